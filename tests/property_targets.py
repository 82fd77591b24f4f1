"""The targets of the property harness (tests/properties.py): one public call each, with valid tiny arguments and a
strategy of hostile values per argument; `python -m tests.property_targets N [name ...]` prints a census."""
import math
import os
import sys
from collections import Counter

import numpy as np
import torch
from hypothesis import strategies as st

import scoreprobe as sp
from tests.properties import (CLASSES, GOOD, NAN, Target, _short, arrays, as_numpy, counts, explore, integer, nan_rows,
                              scalars)

# ---------------------------------------------------------------------------------------------
# The targets
# ---------------------------------------------------------------------------------------------

RULE = sp.Parity(G=2, shape=(4, 4))
DATA = sp.make_dataset(RULE, n_train=8, n_heldout=8, seed=0)
D_ = 16


def _x(rng, shape):
    return rng.standard_normal(shape)


def _signed(rng, shape):
    return rng.choice([-1.0, 1.0], size=shape)


def _bits(rng, shape):
    return rng.integers(0, 2, size=shape)


def rows_nan(arg, n=3, sigma="sigma"):
    """undefined check of a denoiser-like call: a row whose σ is NaN is NaN throughout, and the output is NaN at
    every entry where x is (a parity group, a patch's pixels or the whole row may follow: the rule oracle's other
    groups do not depend on it)."""
    def check(slot, kw, out):
        out = as_numpy(out).reshape(n, -1)
        if sigma and not np.isnan(out[nan_rows(kw[sigma], n)]).all():
            return False
        x = kw[arg]
        x = as_numpy(x) if torch.is_tensor(x) or (isinstance(x, np.ndarray) and x.dtype != object) else None
        return x is None or x.size != out.size or bool(np.isnan(out[np.isnan(x.reshape(out.shape))]).all())
    return check


def all_nan_or_error(keys):
    """undefined check: every value of the result named in `keys` is NaN (no estimate from undefined input)."""
    def check(slot, kw, out):
        return all(np.isnan(np.asarray(_get(out, k), dtype=float)).all() for k in keys)
    return check


def _get(out, key):
    return out[key] if isinstance(out, dict) else getattr(out, key)


def _denoise(make):
    def call(x, sigma, **kw):
        return make(**kw)(x, sigma)
    return call


def _sigma3():
    return torch.tensor([0.3, 1.0, 2.0], dtype=torch.float64)


def _x3():
    return torch.from_numpy(np.random.default_rng(0).standard_normal((3, D_)))


X_SLOT = arrays((3, D_))
SIGMA_SLOT = st.one_of(scalars(), arrays((3,), fill=lambda rng, s: rng.uniform(0.1, 2, s)))
DENOISE = dict(x=X_SLOT, sigma=SIGMA_SLOT)


def _oracles():
    gauss = sp.GaussianDenoiser.from_bits(DATA.train)
    return [
        Target("EmpiricalDenoiser", _denoise(lambda train=DATA.train: sp.EmpiricalDenoiser(train)),
               lambda: dict(x=_x3(), sigma=_sigma3(), train=DATA.train),
               {**DENOISE, "train": arrays((8, D_), fill=_bits)}, rows_nan("x")),
        Target("RuleDenoiser", lambda x, sigma: sp.RuleDenoiser(RULE)(x, sigma),
               lambda: dict(x=_x3(), sigma=_sigma3()), DENOISE, rows_nan("x")),
        Target("GaussianDenoiser", lambda x, sigma, mean, cov: sp.GaussianDenoiser(mean, cov)(x, sigma),
               lambda: dict(x=_x3(), sigma=_sigma3(), mean=np.zeros(D_), cov=np.eye(D_)),
               {**DENOISE, "mean": arrays((D_,)), "cov": arrays((D_, D_), fill=lambda r, s: np.eye(s[0]))},
               rows_nan("x")),
        Target("GaussianDenoiser.from_bits", lambda x, sigma, train: sp.GaussianDenoiser.from_bits(train)(x, sigma),
               lambda: dict(x=_x3(), sigma=_sigma3(), train=DATA.train),
               {**DENOISE, "train": arrays((8, D_), fill=_bits)}, rows_nan("x")),
        Target("GaussianDenoiser.log_density", lambda x, sigma: gauss.log_density(x, sigma),
               lambda: dict(x=_x3(), sigma=_sigma3()), DENOISE, rows_nan("x")),
        Target("LocalDenoiser", lambda x, sigma, train, patch, equivariant: sp.LocalDenoiser(
                   train, patch=patch, equivariant=equivariant)(x, sigma),
               lambda: dict(x=_x3(), sigma=_sigma3(), train=DATA.train, patch=3, equivariant=False),
               {**DENOISE, "train": arrays((8, D_), fill=_bits), "patch": counts(), "equivariant": scalars()},
               rows_nan("x")),
    ]


def _data():
    return [
        Target("Parity", lambda G, shape, layout, seed: sp.Parity(G=G, shape=shape, layout=layout, seed=seed).n_valid,
               dict(G=2, shape=(4, 4), layout="contiguous", seed=0),
               {"G": scalars(), "shape": st.one_of(scalars(), st.lists(scalars(), max_size=3).map(tuple)),
                "layout": st.one_of(scalars(), st.sampled_from(["random", "offset", "contiguous", "x"])),
                "seed": scalars()}),
        Target("ExactK", lambda k, shape: sp.ExactK(k, shape=shape).n_valid, dict(k=2, shape=(4, 4)),
               {"k": scalars(), "shape": st.one_of(scalars(), st.lists(scalars(), max_size=3).map(tuple))}),
        Target("make_dataset", lambda n_train, n_heldout, seed: sp.make_dataset(RULE, n_train, n_heldout, seed),
               dict(n_train=8, n_heldout=8, seed=0), {"n_train": counts(), "n_heldout": counts(), "seed": scalars()}),
        Target("Parity.is_valid", lambda bits: RULE.is_valid(bits), dict(bits=DATA.train),
               {"bits": arrays((8, D_), fill=_bits)}),
        Target("BitIndex.lookup", lambda bits, query: sp.BitIndex(bits).lookup(query),
               dict(bits=DATA.train, query=DATA.heldout), {"bits": arrays((8, D_), fill=_bits),
                                                          "query": arrays((8, D_), fill=_bits)}),
        Target("to_bits", lambda x: sp.to_bits(x), dict(x=_x3()), {"x": X_SLOT}),
        Target("to_signed", lambda bits: sp.to_signed(bits), dict(bits=DATA.train),
               {"bits": arrays((8, D_), fill=_bits)}),
        Target("classify", lambda x_end, tol: sp.classify(x_end, DATA, RULE, tol=tol)["state"],
               lambda: dict(x_end=_x3().numpy(), tol=0.5), {"x_end": arrays((3, D_), fill=_signed), "tol": scalars()},
               lambda slot, kw, out: slot != "x_end" or bool((np.asarray(out)[nan_rows(kw["x_end"], 3)] == 0).all())),
    ]


def _ode():
    mem = sp.EmpiricalDenoiser(DATA.train)
    return [
        Target("edm_sigmas", lambda n_steps, sigma_min, sigma_max, rho: sp.edm_sigmas(n_steps, sigma_min, sigma_max, rho),
               dict(n_steps=8, sigma_min=0.002, sigma_max=80.0, rho=7.0),
               {"n_steps": counts(), **{k: scalars() for k in ("sigma_min", "sigma_max", "rho")}},
               lambda slot, kw, out: bool(torch.isnan(torch.as_tensor(out)).all())),
        Target("integrate", lambda x0, sigma_start, n_steps: sp.integrate(mem, x0, sigma_start, n_steps=n_steps,
                                                                           solver="heun"),
               lambda: dict(x0=_x3().float(), sigma_start=1.0, n_steps=4),
               {"x0": X_SLOT, "sigma_start": scalars(), "n_steps": counts()}, rows_nan("x0", sigma="sigma_start")),
        Target("sample", lambda n, seed, n_steps, sigma_max: sp.sample(mem, n, seed, n_steps=n_steps, sigma_max=sigma_max),
               dict(n=3, seed=0, n_steps=4, sigma_max=80.0),
               {"n": counts(), "seed": scalars(), "n_steps": counts(), "sigma_max": scalars()},
               lambda slot, kw, out: bool(torch.isnan(out).all())),
        Target("randn_per_sample", lambda seed, index, d: sp.randn_per_sample(seed, index, d),
               dict(seed=0, index=torch.arange(3), d=4),
               {"seed": scalars(), "index": st.one_of(scalars(), arrays((3,), fill=lambda r, s: np.arange(3))),
                "d": counts()}),
        Target("Plane.through", lambda a, b, c: sp.Plane.through(a, b, c).basis,
               lambda: dict(a=DATA.train[0] * 2.0 - 1, b=DATA.train[1] * 2.0 - 1, c=DATA.heldout[0] * 2.0 - 1),
               {k: arrays((D_,), fill=_signed) for k in "abc"}),
        Target("score_field", lambda sigmas, res: sp.score_field(mem, _plane(), sigmas, res=res),
               dict(sigmas=[0.5, 1.0], res=4), {"sigmas": st.one_of(scalars(), arrays((2,), fill=lambda r, s: [0.5, 1])),
                                                "res": counts()}),
        Target("dsm_by_sigma", lambda sigmas, n_noise, seed: sp.dsm_by_sigma(mem, sigmas, n_noise=n_noise, seed=seed,
                                                                              dataset=DATA, rule=RULE, oracles=False),
               dict(sigmas=[0.5, 1.0], n_noise=2, seed=0),
               {"sigmas": st.one_of(scalars(), arrays((2,), fill=lambda r, s: [0.5, 1])), "n_noise": counts(),
                "seed": scalars()},
               lambda slot, kw, out: bool(np.isnan(out["loss"].values[..., nan_rows(kw["sigmas"], 2)]).all())
               if slot == "sigmas" and np.size(kw["sigmas"]) == 2 else True),
    ]


def _more():
    """Further public calls: rule specs, planes, basins, retention, samplers, window and abruptness readings, the
    grid exponent, and the loaders given hostile paths."""
    mem = sp.EmpiricalDenoiser(DATA.train)
    ds = _clocks_ds()
    path = st.one_of(scalars(), st.sampled_from(["", "/nonexistent/x", "/proc/self/mem", "/dev/null", "/", ".",
                                                 "a\x00b", "~" * 300]))
    spec = st.one_of(scalars(), st.dictionaries(st.sampled_from(["name", "G", "k", "n", "shape", "layout", "seed"]),
                                                st.one_of(scalars(), st.sampled_from(["parity", "exactk", "rowk",
                                                                                      "latin", "sudoku"]),
                                                          st.lists(scalars(), max_size=3)), max_size=5))
    return [
        Target("rule_from_spec", lambda spec: sp.rule_from_spec(spec).n_bits,
               dict(spec={"name": "parity", "G": 2, "shape": [4, 4]}), {"spec": spec}),
        Target("RowK", lambda k, shape: sp.RowK(k, shape=shape).n_valid, dict(k=1, shape=(3, 3)),
               {"k": scalars(), "shape": st.one_of(scalars(), st.lists(scalars(), max_size=3).map(tuple))}),
        Target("Sudoku", lambda n: sp.Sudoku(n).n_bits, dict(n=4), {"n": counts()}),
        Target("auto_plane", lambda seed: sp.auto_plane(DATA, RULE, seed=seed).basis, dict(seed=0), {"seed": scalars()}),
        Target("basins", lambda sigma_start, res, n_steps: sp.basins(mem, _plane(), sigma_start=sigma_start, res=res,
                                                                     n_steps=n_steps, solver="heun", dataset=DATA, rule=RULE),
               dict(sigma_start=(0.5,), res=3, n_steps=2),
               {"sigma_start": st.one_of(scalars(), arrays((1,), fill=lambda r, s: [0.5])), "res": counts(),
                "n_steps": counts()}),
        Target("retention", lambda points, sigmas, n_noise: sp.retention(
                   mem, points, sigmas=sigmas, n_noise=n_noise, n_steps=2, solver="heun", dataset=DATA, rule=RULE),
               lambda: dict(points=DATA.train[:2].astype(float) * 2 - 1, sigmas=(0.5,), n_noise=2),
               {"points": arrays((2, D_), fill=_signed), "sigmas": st.one_of(scalars(), arrays((1,), fill=lambda r, s: [0.5])),
                "n_noise": counts()}),
        Target("Sampler", lambda name, s_churn, eta: sp.Sampler(name=name, s_churn=s_churn, eta=eta),
               dict(name="heun", s_churn=None, eta=None),
               {"name": st.one_of(scalars(), st.sampled_from(["heun", "euler", "edm_stochastic", "ddim", "x"])),
                "s_churn": scalars(), "eta": scalars()},
               lambda slot, kw, out: False),        # a sampler built with a NaN setting is never "undefined kept"
        Target("window_status", lambda rule_threshold, mem_threshold: sp.window_status(
                   ds, rule_threshold=rule_threshold, mem_threshold=mem_threshold),
               dict(rule_threshold=0.9, mem_threshold=0.1), {"rule_threshold": scalars(), "mem_threshold": scalars()}),
        Target("abruptness", lambda var, n_boot, ci, min_count: sp.abruptness(ds, var=var, n_boot=n_boot, ci=ci,
                                                                              min_count=min_count),
               dict(var="mem_ratio", n_boot=20, ci=0.95, min_count=5),
               {"var": st.one_of(scalars(), st.sampled_from(["rule_acc", "state", "x"])), "n_boot": counts(),
                "ci": scalars(), "min_count": counts()}),
        Target("fit_exponent", lambda x, over, key, ci: _fit_exponent(x, over, key, ci),
               dict(x="N", over="seed", key="tau_rule", ci=0.95),
               {"x": st.one_of(scalars(), st.sampled_from(["N", "seed", "x"])),
                "over": st.one_of(scalars(), st.sampled_from(["N", "seed", "x"])),
                "key": st.one_of(scalars(), st.sampled_from(["tau_rule", "tau_mem", "budget", "x"])), "ci": scalars()}),
        Target("load_series", lambda path: sp.load_series(path), dict(path="/nonexistent"), {"path": path}),
        Target("load_dataset", lambda path: sp.load_dataset(path, RULE), dict(path="/nonexistent"), {"path": path}),
        Target("load_checkpoint", lambda path: sp.load_checkpoint(path), dict(path="/nonexistent"), {"path": path}),
        Target("open_store", lambda path: sp.open_store(path), dict(path="/nonexistent"), {"path": path}),
    ]


def _fit_exponent(x, over, key, ci):
    from scoreprobe.studies.tidy import fit_exponent
    return fit_exponent(_collected(), x=x, over=over, key=key, ci=ci)


def _plane():
    s = DATA.train.astype(float) * 2 - 1
    return sp.Plane.through(s[0], s[1], s[2])


def _clocks_ds(rule_acc_shift=0.0):
    from scoreprobe.studies.export import clocks_dataset
    rng = np.random.default_rng(0)
    state = np.stack([rng.choice([1, 2, 4], size=32, p=[1 - p, p * 0.8, p * 0.2]) for p in (0.05, 0.3, 0.7, 0.95, 1.0)])
    return clocks_dataset([0, 100, 300, 1000, 3000], state.astype(np.int8), 0.5)


def _stats():
    from scoreprobe.stats.censored import censored_mean
    ds = _clocks_ds()
    pts = st.one_of(scalars(), arrays((4,), fill=lambda r, s: r.uniform(100, 1000, s)))
    return [
        Target("taus", lambda rule_thresholds, mem_thresholds: sp.taus(ds, rule_thresholds=rule_thresholds,
                                                                       mem_thresholds=mem_thresholds, n_boot=20),
               dict(rule_thresholds=[0.5, 0.9], mem_thresholds=[0.1]),
               {"rule_thresholds": st.one_of(scalars(), arrays((2,), fill=lambda r, s: [0.5, 0.9])),
                "mem_thresholds": st.one_of(scalars(), arrays((1,), fill=lambda r, s: [0.1]))},
               lambda slot, kw, out: bool(np.isnan(out["tau_rule" if slot == "rule_thresholds" else "tau_mem"].values[
                   nan_rows(kw[slot], np.size(kw[slot]))]).all())),
        Target("tau_summary", lambda rule_threshold, mem_threshold, n_boot, ci, seed: sp.tau_summary(
                   ds, rule_threshold=rule_threshold, mem_threshold=mem_threshold, n_boot=n_boot, ci=ci, seed=seed),
               dict(rule_threshold=0.9, mem_threshold=0.1, n_boot=20, ci=0.95, seed=0),
               {"n_boot": counts(), **{k: scalars() for k in ("rule_threshold", "mem_threshold", "ci", "seed")}},
               lambda slot, kw, out: all(out[k] is None or math.isnan(out[k]) for k in
                                         (("tau_rule",) if slot == "rule_threshold" else ("tau_mem",)))),
        # NaN among the points means "not reached" (documented): a lower bound, no interval
        Target("pool_seeds", lambda points, ci, n_boot, last_steps: sp.pool_seeds(points, ci=ci, n_boot=n_boot,
                                                                                  last_steps=last_steps),
               lambda: dict(points=np.array([300.0, 500, 700, 400]), ci=0.95, n_boot=50, last_steps=None),
               {"points": pts, "ci": scalars(), "n_boot": counts(),
                "last_steps": st.one_of(scalars(), arrays((4,), fill=lambda r, s: np.full(s, 3000.0)))},
               lambda slot, kw, out: slot != "points" or (out["lower_bound"] and np.isnan(out["ci"]).all())),
        Target("pool_ratio", lambda points_a, points_b, ci: sp.pool_ratio(points_a, points_b, ci=ci),
               lambda: dict(points_a=np.array([300.0, 500, 700, 400]), points_b=np.array([30.0, 50, 70, 40]), ci=0.95),
               {"points_a": pts, "points_b": pts, "ci": scalars()},
               lambda slot, kw, out: math.isnan(out["ratio"]) if "ratio" in out else True),
        Target("seed_fit", lambda xs, points: sp.seed_fit(xs, points),
               lambda: dict(xs=np.array([10.0, 20, 40]), points=np.array([[100.0, 120], [210, 190], [400, 430]])),
               {"xs": arrays((3,), fill=lambda r, s: [10, 20, 40]),
                "points": arrays((3, 2), fill=lambda r, s: r.uniform(100, 400, s))},
               None),
        Target("fit_power_law", lambda N, tau: sp.fit_power_law(N, tau),
               lambda: dict(N=np.array([10.0, 20, 40, 80]), tau=np.array([100.0, 210, 400, 820])),
               {"N": arrays((4,), fill=lambda r, s: [10, 20, 40, 80]), "tau": pts},
               lambda slot, kw, out: out["n"] == int(np.isfinite(np.asarray(kw["N"], float) * np.asarray(
                   kw["tau"], float)).sum()) if np.size(kw[slot]) == 4 else True),
        Target("verdict", lambda thresholds, estimate, lower, upper, region, paper_threshold, censored: sp.verdict(
                   thresholds, estimate, lower, upper, region=region, paper_threshold=paper_threshold,
                   censored=censored),
               dict(thresholds=[0.5, 0.9], estimate=[2.0, 2.0], lower=[1.0, 1.0], upper=[3.0, 3.0], region=(0.0, 5.0),
                    paper_threshold=0.9, censored=[False, False]),
               {"thresholds": arrays((2,), fill=lambda r, s: [0.5, 0.9]), "estimate": arrays((2,)),
                "lower": arrays((2,), fill=lambda r, s: [1, 1]), "upper": arrays((2,), fill=lambda r, s: [3, 3]),
                "region": st.one_of(scalars(), st.tuples(scalars(), scalars())), "paper_threshold": scalars(),
                "censored": st.one_of(scalars(), arrays((2,), fill=lambda r, s: [0, 0]),
                                      st.lists(st.sampled_from([True, False, "False", NAN, None, 0]), max_size=3))},
               lambda slot, kw, out: slot not in ("lower", "upper") or all(
                   r.word == "undefined" for r, bad in zip(out.readings, nan_rows(kw[slot], 2)) if bad)),
        Target("censored_mean", lambda y, censored, level: censored_mean(y, censored, level),
               dict(y=[5.0, 6.0, 7.0], censored=np.array([False, False, True]), level=0.95),
               {"y": arrays((3,), fill=lambda r, s: [5, 6, 7]), "censored": arrays((3,), fill=lambda r, s: [0, 0, 1]),
                "level": scalars()}, all_nan_or_error(["mean"])),
        Target("pool_windows", lambda is_open, widths, hi_censored: sp.pool_windows(is_open, widths, hi_censored),
               dict(is_open=[True, True, False], widths=[1.0, 2.0, np.nan], hi_censored=[False, True, False]),
               {"is_open": arrays((3,), fill=lambda r, s: [1, 1, 0]), "widths": arrays((3,), fill=lambda r, s: [1, 2, 1]),
                "hi_censored": arrays((3,), fill=lambda r, s: [0, 1, 0])}, None),
    ]


def _studies():
    from scoreprobe.studies.grid import Grid, views
    from scoreprobe.training.config import TrainConfig
    base = TrainConfig(hidden_size=32, depth=1, num_heads=2, n_checkpoints=3, first_checkpoint=10, total_steps=30)
    axis = st.one_of(scalars(), st.lists(scalars(), max_size=4), arrays((2,), fill=lambda r, s: [2, 4]))
    return [
        Target("Grid", lambda axes, steps, name: len(Grid(base, axes, steps=steps, name=name)),
               dict(axes={"N": [2, 4]}, steps=None, name="g"),
               {"axes": st.one_of(scalars(), st.dictionaries(st.sampled_from(["N", "seed", "lr", "G", "width", "x"]),
                                                             axis, max_size=3)),
                "steps": st.one_of(scalars(), scalars().map(lambda v: (lambda cfg: v)),
                                   st.tuples(scalars(), scalars()).map(lambda kv: views(*kv))),
                "name": st.one_of(scalars(), st.text(max_size=8))}),
        Target("Monitor", lambda every, n_samples, seed, n_steps, steps: sp.Monitor(
                   DATA, RULE, every=every, n_samples=n_samples, seed=seed, n_steps=n_steps, steps=steps),
               dict(every=10, n_samples=4, seed=0, n_steps=2, steps=None),
               {"every": counts(), "n_samples": counts(), "seed": scalars(), "n_steps": counts(),
                "steps": st.one_of(scalars(), st.lists(scalars(), max_size=4))},
               accepts={"every": lambda v: v is None or integer(v), "n_samples": integer, "seed": integer}),
        Target("Monitor.__call__", lambda step: sp.Monitor(DATA, RULE, every=10, n_samples=4, n_steps=2)(
                   step, sp.EmpiricalDenoiser(DATA.train)), dict(step=10), {"step": st.one_of(scalars(), arrays(()))},
               accepts={"step": integer}),
        Target("pool", lambda over, ci: _pool(over, ci), dict(over="seed", ci=0.95),
               {"over": st.one_of(scalars(), st.sampled_from(["N", "seed", "x"])), "ci": scalars()}),
    ]


_COLLECTED = {}


def _collected():
    """collect() of a planted 2 x 3 grid (exports written from chosen states, no training), kept."""
    if "ds" not in _COLLECTED:
        import tempfile
        from scoreprobe.studies.export import clocks_dataset, export_run
        from scoreprobe.studies.grid import Grid
        from scoreprobe.studies.tidy import collect
        from scoreprobe.training.config import TrainConfig
        base = TrainConfig(hidden_size=32, depth=1, num_heads=2, n_checkpoints=3, first_checkpoint=10, total_steps=30)
        import atexit
        import shutil
        folder = tempfile.mkdtemp(prefix="sp-prop-")          # unique to this process; removed at its exit
        atexit.register(shutil.rmtree, folder, True)
        grid = Grid(base, {"N": [8, 16], "seed": [0, 1, 2]}, out=folder)
        rng = np.random.default_rng(1)
        for run in grid:
            state = np.stack([rng.choice([1, 4], size=16, p=[1 - p, p]) for p in (0.0, 0.5, 0.95)]).astype(np.int8)
            export_run(clocks_dataset([0, 10, 30], state, 0.5), run.cfg, 1000, grid.exports / f"{run.name}.npz",
                       meta={"train_start": 10})
        _COLLECTED["ds"] = collect(grid)
    return _COLLECTED["ds"]


def _pool(over, ci):
    from scoreprobe.studies.tidy import pool
    return pool(_collected(), over=over, ci=ci)


def _inside():
    """The intervention API on a tiny random DiT (x and σ; the hook arguments are tests/test_inside_*'s)."""
    from scoreprobe.models.dit import DiT
    from scoreprobe.models.edm import EDMDenoiser
    torch.manual_seed(0)
    net = DiT(input_size=(4, 4), patch_size=1, in_channels=1, hidden_size=16, depth=1, num_heads=2)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0, 0.3)          # adaLN-Zero starts at a zero output: move every weight
    D = EDMDenoiser(net.eval(), (1, 4, 4))
    x, sig = (lambda: _x3().float()), (lambda: torch.tensor([0.3, 1.0, 2.0]))
    xs = arrays((3, D_))
    return [
        Target("run_with_cache", lambda x, names: sp.run_with_cache(D, x, torch.tensor([0.3, 1.0, 2.0]),
                                                                    names=names, return_type="dict")[0],
               lambda: dict(x=x(), names=None), {"x": xs, "names": st.one_of(scalars(), st.lists(st.text(max_size=12),
                                                                                               max_size=2))},
               rows_nan("x", sigma=None)),
        Target("ablate", lambda x, how, seed: sp.ablate(D, x, sig(), sites="head", how=how, seed=seed),
               lambda: dict(x=x(), how="zero", seed=0),
               {"x": xs, "how": st.one_of(scalars(), st.sampled_from(["zero", "mean", "resample", "x"]))},
               lambda slot, kw, out: bool(np.isnan(out["effect"].values).any()) if "effect" in out else True),
        Target("patch", lambda clean, corrupt, sites: sp.patch(D, clean, corrupt, sig(), sites=sites),
               lambda: dict(clean=torch.from_numpy(DATA.train[:3] * 2.0 - 1).float(),
                            corrupt=torch.from_numpy(DATA.heldout[:3] * 2.0 - 1).float(), sites="all"),
               {"clean": arrays((3, D_), fill=_signed), "corrupt": arrays((3, D_), fill=_signed), "sites": st.one_of(scalars(), st.lists(st.text(max_size=12), max_size=2))},
               lambda slot, kw, out: bool(np.isnan(out["effect"].values[..., nan_rows(kw[slot], 3)]).all())
               if "effect" in out and out["effect"].shape[-1] == 3 else True),
    ]


def targets():
    """Every target, in a fixed order."""
    return [*_data(), *_oracles(), *_ode(), *_stats(), *_studies(), *_more(), *_inside()]


def census(n_examples, names=None):
    """{target: Counter(class)} and the failures [(target, slot, value, class, detail)] over every target."""
    tally, failures = {}, []
    for t in targets():
        if names and t.name not in names:
            continue
        c = tally.setdefault(t.name, Counter())

        def record(slot, value, cls, detail, t=t, c=c):
            c[cls] += 1
            if cls not in GOOD:
                failures.append((t.name, slot, _short(value)[:80], cls, detail))
        explore(t, n_examples, record)
    return tally, failures


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    tally, failures = census(n, set(sys.argv[2:]) or None)
    total = Counter()
    for name, c in tally.items():
        total.update(c)
        print(f"{name:32s} " + " ".join(f"{k}={c[k]}" for k in CLASSES if c[k]))
    print("TOTAL " + " ".join(f"{k}={total[k]}" for k in CLASSES))
    seen = set()
    for f in failures:
        key = (f[0], f[1], f[3], f[4][:60])
        if key not in seen:
            seen.add(key)
            print(" | ".join(map(str, f)))
    os._exit(0)
