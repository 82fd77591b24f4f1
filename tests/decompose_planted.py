"""Planted recipes for the decompose calls (issue 73): trained models that are mixtures of two oracles plus noise,
built from the oracles' outputs directly (no network), so hundreds of recipes run in seconds.

Each model m of a recipe: D_m = a_m·rule + (1 − a_m)·memorizer + `noise`·ε, a_m ~ N(mean, sd), ε independent per
model, row and coordinate; every model is read on the same points and noise draws (as decompose does)."""
import numpy as np

from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from scoreprobe.oracles import EmpiricalDenoiser, LocalDenoiser, RuleDenoiser
from scoreprobe.probes.decompose import _cells_dataset, cell_values, decompose_points, evaluate, noised, point_stats
from scoreprobe.stats.decompose_calls import decompose_summary, mixture_weights

NAMES = ("memorizer", "rule")


def oracle_outputs(n_points, n_noise, sigmas=(0.5, 1.0, 2.0), seed=0, local=False):
    """{σ: (x (M, D), outputs (2, M, D))} on the held-out points of the shipped-like recipe (parity G = 2, 6×6,
    120 training items), memorizer and rule oracle (and the 3×3 local oracle with `local`, for readers
    that need one)."""
    rule = Parity(G=2, shape=(6, 6), layout="offset")
    ds = make_dataset(rule, n_train=120, n_heldout=n_points, seed=seed)
    bits, split, pos = decompose_points(ds, rule, n_points, seed)
    keep = split == "heldout"
    D = (EmpiricalDenoiser(ds.train), RuleDenoiser(rule)) + ((LocalDenoiser(ds.train, 3, shape=(6, 6)),) if local else ())
    out = {}
    for s in sigmas:
        x = noised(bits[keep], pos[keep], s, n_noise, seed)
        out[s] = (x.numpy(), np.stack([evaluate(o, x, s) for o in D]))
    return out


def model_dataset(outputs, n_noise, a, noise, rng):
    """The decompose Dataset (sigma, split = heldout, …) of one planted model a·rule + (1 − a)·memorizer
    + noise."""
    sig = sorted(outputs)
    cells, stats = [], []
    for s in sig:
        x, o = outputs[s]
        y = a * o[1] + (1 - a) * o[0] + noise * rng.standard_normal(x.shape)
        st = point_stats(y, o, x, n_noise)
        stats.append([st])
        cells.append([cell_values(st)])
    named = [(n, n, 0, None) for n in NAMES] + [("local", "local", 3, None)] * (len(o) > 2)
    return _cells_dataset(cells, stats, sig, ["heldout"], named)


def recipe(outputs, n_noise, n_models, rng, mean=0.5, sd=0.1, noise=0.3):
    """(models' Datasets, their a_m) of one planted recipe."""
    a = rng.normal(mean, sd, n_models)
    return [model_dataset(outputs, n_noise, float(ai), noise, rng) for ai in a], a


def false_calls(n_recipes, n_models=3, n_points=64, n_noise=2, seed=0, sd=0.1, summary=decompose_summary, **kw):
    """At a planted tie (a_m ~ N(0.5, sd); one model: sd = 0 is a tie of that model): (recipes with any oracle
    called, recipes, tested cells in all). `summary`: the reading under test (kw go to it)."""
    outputs = oracle_outputs(n_points, n_noise)
    rng = np.random.default_rng(seed)
    called = tested = 0
    for _ in range(n_recipes):
        models, _ = recipe(outputs, n_noise, n_models, rng, sd=sd)
        s = summary(models if n_models > 1 else models[0], **kw)
        called += bool(np.isin(s.best_oracle.values, NAMES).any())
        tested += s.attrs.get("n_family", 0)
    return called, n_recipes, tested


def weight_coverage(n_recipes, n_models, n_points, n_noise=2, seed=0, n_boot=200, sigma=1.0):
    """Coverage of the rule's mixture weight at σ: over several models the target is the recipe's mean weight
    0.5, over one model its own a_m. Returns (covered, recipes)."""
    outputs = oracle_outputs(n_points, n_noise, sigmas=(sigma,))
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n_recipes):
        models, a = recipe(outputs, n_noise, n_models, rng)
        mw = mixture_weights(models if n_models > 1 else models[0], n_boot=n_boot).sel(oracle="rule")
        target = 0.5 if n_models > 1 else float(a[0])
        hits += bool(float(mw.lower.max()) <= target <= float(mw.upper.min()))
    return hits, n_recipes

