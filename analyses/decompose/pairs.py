"""Pairs of DiTs trained on disjoint training sets at N where the rule is learned (one stacked ensemble),
their clocks and their agreement (`scoreprobe.probes.disjoint`), between a floor (the two training sets'
memorizers) and a ceiling (the rule oracle with itself; a same-data pair of two init seeds)."""
import logging
from pathlib import Path

import numpy as np

from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import rule_from_spec
from scoreprobe.loading.series import load_series
from scoreprobe.stats.clocks import clocks
from scoreprobe.probes.disjoint import compare_pair, disjoint_agreement, disjoint_check
from scoreprobe.training.config import TrainConfig
from scoreprobe.training.ensemble import train_ensemble

logger = logging.getLogger("decompose.pairs")


def disjoint_data_seeds(rule_spec, n, n_heldout, k, first=0, tries=200):
    """k data seeds (the first `first`) whose training sets of n items are pairwise disjoint -> [int] * k.

    Greedy over seeds first, first + 1, ...: a seed is kept when its training set shares no image with any kept
    one. RuntimeError when `tries` seeds do not give k."""
    rule = rule_from_spec(rule_spec)
    kept, seen = [], set()
    for s in range(first, first + tries):
        rows = {bytes(r) for r in np.asarray(make_dataset(rule, n, n_heldout, s).train, np.uint8)}
        if not rows & seen:
            kept.append(s)
            seen |= rows
            if len(kept) == k:
                return kept
    raise RuntimeError(f"no {k} pairwise disjoint training sets of {n} items among {tries} data seeds")


def pair_members(p):
    """[(name, N, replicate, data index, init seed)] of every member: per N and replicate r, members a and b on
    disjoint training sets (data index 2r, 2r + 1) with their own init seeds; for the replicates in
    `pair_same_data`, a member c on a's training set with a third init seed (the same-data pair a–c).
    Every training set of one N is disjoint from every other one (replicates differ in data and init)."""
    out = []
    for n in p["pair_Ns"]:
        for r in range(p["pair_replicates"]):
            out += [(f"n{n}-r{r}-a", n, r, 2 * r, 10 * r + 1), (f"n{n}-r{r}-b", n, r, 2 * r + 1, 10 * r + 2)]
            if r in p.get("pair_same_data", ()):
                out.append((f"n{n}-r{r}-c", n, r, 2 * r, 10 * r + 3))
    return out


def pair_configs(p, rule_spec):
    """[(name, TrainConfig)] of every member (`pair_members`), the recipe of the preset's pair_* sizes."""
    seeds = {n: disjoint_data_seeds(rule_spec, n, p["pair_heldout"], 2 * p["pair_replicates"]) for n in p["pair_Ns"]}
    return [(name, TrainConfig(
        rule=rule_spec, n_train=n, n_heldout=p["pair_heldout"], data_seed=seeds[n][i], seed=seed,
        hidden_size=p["pair_width"], depth=p["pair_depth"], batch_size=p["pair_batch"], total_steps=p["pair_steps"],
        n_checkpoints=p["pair_checkpoints"], first_checkpoint=p["pair_first"], lr=p.get("pair_lr", 2e-3)))
        for name, n, _, i, seed in pair_members(p)]


def train_pairs(p, rule_spec, runs_dir):
    """Train (or resume, or skip when finished) every member as one stacked ensemble -> {name: run_dir}."""
    members = pair_configs(p, rule_spec)
    dirs = [str(Path(runs_dir) / name) for name, _ in members]
    train_ensemble([c for _, c in members], dirs, device="cpu")
    return {name: d for (name, _), d in zip(members, dirs)}


def nearest_steps(steps, targets):
    """The checkpoint steps nearest (in ln(step + 1)) to each target, sorted and deduplicated -> [int]."""
    x = np.log(np.asarray(steps, np.float64) + 1)
    return sorted({int(steps[int(np.argmin(abs(x - np.log(t + 1))))]) for t in targets})


def member_clock(series, p):
    """A member's clocks -> JSON-able dict (τ_rule, τ_mem, rule_acc and mem_ratio per checkpoint)."""
    ck = clocks(series, n_samples=p["pair_clock_samples"], seed=0, progress=False)
    cfg = series.config
    return {"tau_rule": _num(ck.attrs.get("tau_rule")), "tau_mem": _num(ck.attrs.get("tau_mem")),
            "steps": [int(v) for v in ck.step.values], "rule_acc": [float(v) for v in ck.rule_acc.values],
            "mem_ratio": [float(v) for v in ck.mem_ratio.values], "n_train": int(cfg["n_train"]),
            "data_seed": int(cfg["data_seed"]), "seed": int(cfg["seed"])}


def agreement_json(ds):
    """A `compare_pair` / `disjoint_agreement` Dataset -> JSON-able dict ([step] first where present)."""
    out = {"sigma": [float(v) for v in ds.sigma.values], "sigma_start": [float(v) for v in ds.sigma_start.values]}
    if "step" in ds.dims:
        out["steps"] = [int(v) for v in ds.step.values]
    for v in ("cosine", "cosine_sd", "rms_diff", "sample_same", "sample_hamming", "sample_nonfinite", "basin_same",
              "basin_nonfinite"):
        out[v] = np.asarray(ds[v].values).tolist()
    return out


def _kw(p):
    return dict(sigmas=p["pair_sigmas"], n_points=p["pair_points"], n_samples=p["pair_samples"],
                n_planes=p["pair_planes"], res=p["pair_res"], n_steps=p["pair_ode_steps"])


def measure_pairs(p, dirs):
    """Clocks of every member; per N and replicate, the agreement of the disjoint pair (a, b) and of the same-data
    pair (a, c) at the measured steps, and the floor (the two members' memorizers); the ceiling (the rule oracle
    with itself) once. -> JSON-able dict {"by_n": {N: ...}, "ceiling": ..., "sizes": ...}."""
    from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
    out = {"by_n": {}, "sizes": {"n_points": p["pair_points"], "n_samples": p["pair_samples"],
                                  "n_grid": p["pair_planes"] * p["pair_res"] ** 2}}
    members = pair_members(p)
    series = {name: load_series(dirs[name]) for name, *_ in members}
    rule = next(iter(series.values())).rule
    out["ceiling"] = agreement_json(compare_pair(RuleDenoiser(rule), RuleDenoiser(rule), rule, **_kw(p)))
    for n in p["pair_Ns"]:
        names = [m[0] for m in members if m[1] == n]
        trains = {k: series[k].dataset.train for k in names}
        shared = {f"{x}|{y}": disjoint_check(trains[x], trains[y]) for i, x in enumerate(names) for y in names[i + 1:]
                  if not (x.endswith("-a") and y.endswith("-c") and x[:-2] == y[:-2])}   # a–c share data by design
        rec = {"clocks": {k: member_clock(series[k], p) for k in names}, "shared_train": shared, "replicates": {}}
        steps = nearest_steps(series[names[0]].steps, p["pair_measure_at"])
        for r in range(p["pair_replicates"]):
            a, b = series[f"n{n}-r{r}-a"], series[f"n{n}-r{r}-b"]
            one = {"disjoint": agreement_json(disjoint_agreement(a, b, steps=steps, **_kw(p))),
                   "floor": agreement_json(compare_pair(EmpiricalDenoiser(a.dataset.train),
                                                        EmpiricalDenoiser(b.dataset.train), rule, **_kw(p)))}
            if f"n{n}-r{r}-c" in series:
                one["same_data"] = agreement_json(disjoint_agreement(a, series[f"n{n}-r{r}-c"], steps=steps, **_kw(p)))
            rec["replicates"][str(r)] = one
            logger.info("pair N=%d replicate %d measured", n, r)
        out["by_n"][str(n)] = rec
    return out


def _num(v):
    return None if v is None or not np.isfinite(v) else float(v)
