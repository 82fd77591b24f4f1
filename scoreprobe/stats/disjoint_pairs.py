"""Pairs of trained models on disjoint training sets (issue 38), read between a floor (the two training sets'
memorizers) and a ceiling (the rule oracle with itself; a same-data pair of two init seeds): the members and their
names, the measurement (each member's clocks; the agreement of each pair per σ, `scoreprobe.probes.disjoint`), and
its intervals — per pair over the points (t, cosine) and samples (Wilson, shares), and over replicate pairs (t).
"""
import logging

import numpy as np

from scoreprobe.loading.series import load_series
from scoreprobe.probes.disjoint import agreement_json, compare_pair, disjoint_agreement, disjoint_check
from scoreprobe.stats.clocks import clocks
from scoreprobe.stats.nearest_steps import nearest_steps
from scoreprobe.stats.unit_intervals import mean_interval, t_triple, wilson_triple
from scoreprobe.store.json_ready import number_or_none as _num

logger = logging.getLogger(__name__)


def pair_members(Ns, replicates, same_data=()):
    """[(name, N, replicate, data index, init seed)] of every member: per N and replicate r, members a and b on
    disjoint training sets (data index 2r, 2r + 1) with their own init seeds; for the replicates in
    `same_data`, a member c on a's training set with a third init seed (the same-data pair a–c).
    Every training set of one N is disjoint from every other one (replicates differ in data and init)."""
    out = []
    for n in Ns:
        for r in range(replicates):
            out += [(f"n{n}-r{r}-a", n, r, 2 * r, 10 * r + 1), (f"n{n}-r{r}-b", n, r, 2 * r + 1, 10 * r + 2)]
            if r in same_data:
                out.append((f"n{n}-r{r}-c", n, r, 2 * r, 10 * r + 3))
    return out


def member_clock(series, n_samples):
    """A member's clocks -> JSON-able dict (τ_rule, τ_mem, rule_acc and mem_ratio per checkpoint)."""
    ck = clocks(series, n_samples=n_samples, seed=0, progress=False)
    cfg = series.config
    return {"tau_rule": _num(ck.attrs.get("tau_rule")), "tau_mem": _num(ck.attrs.get("tau_mem")),
            "steps": [int(v) for v in ck.step.values], "rule_acc": [float(v) for v in ck.rule_acc.values],
            "mem_ratio": [float(v) for v in ck.mem_ratio.values], "n_train": int(cfg["n_train"]),
            "data_seed": int(cfg["data_seed"]), "seed": int(cfg["seed"])}


def measure_pairs(dirs, Ns, replicates, same_data, clock_samples, measure_at, **kw):
    """The members (`pair_members(Ns, replicates, same_data)`, run directories `dirs` {name: dir}) measured: clocks of
    every member (`clock_samples` samples); per N and replicate, the agreement of the disjoint pair (a, b) and of the same-data
    pair (a, c) at the measured steps, and the floor (the two members' memorizers); the ceiling (the rule oracle
    with itself) once; the agreement (`compare_pair`, `disjoint_agreement`: sigmas, n_points, n_samples, n_planes,
    res, n_steps in `kw`) at the checkpoints nearest `measure_at`.
    -> JSON-able dict {"by_n": {N: ...}, "ceiling": ..., "sizes": ...}."""
    from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
    out = {"by_n": {}, "sizes": {"n_points": kw["n_points"], "n_samples": kw["n_samples"],
                                  "n_grid": kw["n_planes"] * kw["res"] ** 2}}
    members = pair_members(Ns, replicates, same_data)
    series = {name: load_series(dirs[name]) for name, *_ in members}
    rule = next(iter(series.values())).rule
    out["ceiling"] = agreement_json(compare_pair(RuleDenoiser(rule), RuleDenoiser(rule), rule, **kw))
    for n in Ns:
        names = [m[0] for m in members if m[1] == n]
        trains = {k: series[k].dataset.train for k in names}
        shared = {f"{x}|{y}": disjoint_check(trains[x], trains[y]) for i, x in enumerate(names) for y in names[i + 1:]
                  if not (x.endswith("-a") and y.endswith("-c") and x[:-2] == y[:-2])}   # a–c share data by design
        rec = {"clocks": {k: member_clock(series[k], clock_samples) for k in names}, "shared_train": shared,
               "replicates": {}}
        steps = nearest_steps(series[names[0]].steps, measure_at)
        for r in range(replicates):
            a, b = series[f"n{n}-r{r}-a"], series[f"n{n}-r{r}-b"]
            one = {"disjoint": agreement_json(disjoint_agreement(a, b, steps=steps, **kw)),
                   "floor": agreement_json(compare_pair(EmpiricalDenoiser(a.dataset.train),
                                                        EmpiricalDenoiser(b.dataset.train), rule, **kw))}
            if f"n{n}-r{r}-c" in series:
                one["same_data"] = agreement_json(disjoint_agreement(a, series[f"n{n}-r{r}-c"], steps=steps, **kw))
            rec["replicates"][str(r)] = one
            logger.info("pair N=%d replicate %d measured", n, r)
        out["by_n"][str(n)] = rec
    return out


def _at(ag, k=None):
    """One comparison's arrays at step index k (None: a comparison without steps)."""
    pick = (lambda v: np.asarray(v, np.float64)) if k is None else (lambda v: np.asarray(v, np.float64)[k])
    return {v: pick(ag[v]) for v in ("cosine", "cosine_sd", "sample_same", "sample_nonfinite", "basin_same",
                                     "basin_nonfinite")}


def one_pair(a, sizes):
    """Per-pair intervals: cosine per σ over the points (t), same sample and same basin (Wilson)."""
    return {"cosine": [mean_interval(m, s, sizes["n_points"]) for m, s in zip(a["cosine"], a["cosine_sd"])],
            "sample_same": wilson_triple(float(a["sample_same"]), sizes["n_samples"] - int(a["sample_nonfinite"])),
            "basin_same": [wilson_triple(float(b), sizes["n_grid"] - int(nb))
                           for b, nb in zip(a["basin_same"], a["basin_nonfinite"])]}


def over_replicates(parts):
    """Mean with a t interval over the replicate pairs (2 df for 3) of cosine (σ), sample_same, basin_same."""
    return {"cosine": [t_triple(col) for col in np.array([p["cosine"] for p in parts]).T],
            "sample_same": t_triple([float(p["sample_same"]) for p in parts]),
            "basin_same": [t_triple(col) for col in np.array([p["basin_same"] for p in parts]).T],
            "n_pairs": len(parts)}


def n_summary(rec, sizes):
    """One N: members' clocks, and per measured step the disjoint pairs (over replicates and per pair), the
    same-data pairs and the floor."""
    reps = rec["replicates"]
    first = next(iter(reps.values()))["disjoint"]
    steps = first["steps"]
    clocks = {k: {"tau_rule": c["tau_rule"], "tau_mem": c["tau_mem"], "data_seed": c["data_seed"], "seed": c["seed"],
                  "steps": c["steps"], "rule_acc": c["rule_acc"],
                  "rule_acc_at": {str(s): float(np.interp(np.log(s + 1), np.log(np.array(c["steps"]) + 1),
                                                          c["rule_acc"])) for s in steps}}
              for k, c in rec["clocks"].items()}
    out = {"clocks": clocks, "steps": steps, "sigma": first["sigma"], "sigma_start": first["sigma_start"],
           "rule_learned": all(c["tau_rule"] is not None for c in clocks.values()),
           "tau_mem_reached": [k for k, c in clocks.items() if c["tau_mem"] is not None],
           "shared_train_max": max(rec["shared_train"].values()) if rec["shared_train"] else 0,
           "floor": over_replicates([_at(r["floor"]) for r in reps.values()]),
           "floor_per_pair": {r: one_pair(_at(x["floor"]), sizes) for r, x in reps.items()},
           "disjoint": {}, "disjoint_per_pair": {}, "same_data": {}}
    for k, s in enumerate(steps):
        parts = {r: _at(x["disjoint"], k) for r, x in reps.items()}
        out["disjoint"][str(s)] = over_replicates(list(parts.values()))
        out["disjoint_per_pair"][str(s)] = {r: one_pair(a, sizes) for r, a in parts.items()}
        out["same_data"][str(s)] = {r: one_pair(_at(x["same_data"], k), sizes) for r, x in reps.items()
                                    if "same_data" in x}
    return out


def pairs_summary(pairs):
    """The pairs section's summary from res["pairs"]."""
    c = pairs["ceiling"]
    return {"by_n": {n: n_summary(rec, pairs["sizes"]) for n, rec in pairs["by_n"].items()},
            "ceiling": {"cosine": [float(v) for v in c["cosine"]], "sample_same": float(c["sample_same"]),
                        "basin_same": [float(v) for v in c["basin_same"]]}}
