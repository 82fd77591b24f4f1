"""Pairs of small DiTs trained on disjoint training sets (one stacked ensemble), their clocks and
their agreement over steps (`scoreprobe.probes.disjoint`)."""
import logging
from pathlib import Path

import numpy as np

from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import rule_from_spec
from scoreprobe.loading.series import load_series
from scoreprobe.probes.clocks import clocks
from scoreprobe.probes.disjoint import disjoint_agreement, disjoint_check
from scoreprobe.training.config import TrainConfig
from scoreprobe.training.ensemble import train_ensemble

logger = logging.getLogger("decompose.pairs")


def disjoint_seeds(rule_spec, n, n_heldout, first=0, tries=50):
    """Two data seeds whose training sets of n items share no image: (first, s)."""
    rule = rule_from_spec(rule_spec)
    a = make_dataset(rule, n, n_heldout, first).train
    for s in range(first + 1, first + 1 + tries):
        if disjoint_check(a, make_dataset(rule, n, n_heldout, s).train) == 0:
            return first, s
    raise RuntimeError(f"no disjoint training set of {n} items among {tries} seeds")


def pair_configs(p, rule_spec):
    """[(name, TrainConfig)] of every member: for each N, members a and b on disjoint data, with their
    own initialization and minibatch streams (seed 0 and 1), so that agreement is not inherited."""
    out = []
    for n in p["pair_Ns"]:
        for i, (tag, seed) in enumerate(zip("ab", disjoint_seeds(rule_spec, n, p["pair_heldout"]))):
            out.append((f"n{n}-{tag}", TrainConfig(
                rule=rule_spec, n_train=n, n_heldout=p["pair_heldout"], data_seed=seed, seed=i,
                hidden_size=p["pair_width"], depth=p["pair_depth"], batch_size=p["pair_batch"],
                total_steps=p["pair_steps"], n_checkpoints=p["pair_checkpoints"], first_checkpoint=p["pair_first"],
                lr=2e-3)))
    return out


def train_pairs(p, rule_spec, runs_dir):
    """Train (or resume, or skip when finished) every member as one stacked ensemble -> {name: run_dir}."""
    members = pair_configs(p, rule_spec)
    dirs = [str(Path(runs_dir) / name) for name, _ in members]
    train_ensemble([c for _, c in members], dirs, device="cpu")
    return {name: d for (name, _), d in zip(members, dirs)}


def measure_pairs(p, dirs):
    """Clocks of every member and the agreement of each pair over steps -> JSON-able dict per N."""
    out = {}
    for n in p["pair_Ns"]:
        sa, sb = load_series(dirs[f"n{n}-a"]), load_series(dirs[f"n{n}-b"])
        taus = {}
        for tag, s in (("a", sa), ("b", sb)):
            ck = clocks(s, n_samples=p["pair_clock_samples"], seed=0, progress=False)
            taus[tag] = {"tau_rule": _num(ck.attrs.get("tau_rule")), "tau_mem": _num(ck.attrs.get("tau_mem")),
                         "steps": [int(v) for v in ck.step.values],
                         "mem_ratio": [float(v) for v in ck.mem_ratio.values],
                         "rule_acc": [float(v) for v in ck.rule_acc.values]}
        ag = disjoint_agreement(sa, sb, n_points=p["pair_points"], n_samples=p["pair_samples"],
                                n_planes=p["pair_planes"], res=p["pair_res"], n_steps=p["pair_ode_steps"])
        out[str(n)] = {
            "shared_train": int(ag.attrs["shared_train"]), "clocks": taus,
            "steps": [int(v) for v in ag.step.values], "sigma": [float(v) for v in ag.sigma.values],
            "sigma_start": [float(v) for v in ag.sigma_start.values],
            "cosine": ag.cosine.values.tolist(), "rms_diff": ag.rms_diff.values.tolist(),
            "sample_same": ag.sample_same.values.tolist(), "sample_hamming": ag.sample_hamming.values.tolist(),
            "basin_same": ag.basin_same.values.tolist()}
        logger.info("pair N=%d measured", n)
    return out


def _num(v):
    return None if v is None or not np.isfinite(v) else float(v)
