"""The decompose study's measurement stages beyond the shipped series' crossover, each returning JSON (run.py caches
them per stage).

models      `sp.decompose` over two series of 3 trained models each (issue 55 item 7), the calls made with a
            model as the unit (t over models, sign flips over points, Holm over the cells) and the mixture weights with intervals
            (`scoreprobe.stats.decompose_models`); per model as well, so that a call resting on one model shows.
            open: the shipped recipe at training seeds 0, 1, 2; closed: the closed-window series, trained here when
            missing (`scoreprobe.studies.trained_models`: not the models behind mechanism_seeds' exports, whose run
            directories are not kept; their clocks agree within the CIs). Each model's decompose is a resumable store
            under <runs>/models/<model>.decompose.zarr (not committed).
cross_ci    τ_cross with intervals over noise draws and over trained models (`scoreprobe.stats.tau_cross`):
            training seeds on one training set, and data seeds — the shipped recipe with data_seed = k, trained here
            as one ensemble to p["cross_data_steps"] steps (a constant learning rate: a shorter run is the start of a
            longer one) under runs/shipped/d<k>, every model read over its checkpoints up to that step.
excess      the generalizer's excess over the memorizer as a function of N over several data seeds (oracles only),
            beside τ_mem(N) measured by analyses/two_clocks.
pairs       DiTs on disjoint training sets at N where the rule is learned (one stacked ensemble), their clocks and
            their agreement between a floor and a ceiling (`scoreprobe.stats.disjoint_pairs`).
pairs_mem   the same at small N (p["mem_pairs"] overrides the pair_* sizes), trained past τ_mem: agreement across the
            memorization boundary.
pairs_long  the same at N where the rule is learned, trained past τ_mem (p["long_pairs"]: one override per N, since
            each N has its own τ_mem), run directories under <runs>/long, each N cached on its own.
"""
import dataclasses
import json
import logging
from pathlib import Path

import numpy as np

from scoreprobe.store.json_ready import number_or_none as _num
from scoreprobe.studies.stage_cache import cached_json
from scoreprobe.studies.trained_models import CLOSED_RUNS, SHIPPED_RUNS, clock_taus, existing_series, train_closed

logger = logging.getLogger("decompose")

SERIES = {"open": dict(zip(("seed0", "seed1", "seed2"), SHIPPED_RUNS)),
          "closed": {f"closed-s{i}": d for i, d in enumerate(CLOSED_RUNS)}}
STEPS_KEY = {"open": "model_steps", "closed": "closed_steps"}


def measure_models(p, root, runs_dir, series="open", train=False):
    """The calls over one series' models (`calls_over_models`) from their resumable decompose stores, None when no
    model of the series is found; `train`: train the closed series first where it is missing."""
    import scoreprobe as sp
    from scoreprobe.stats.decompose_models import calls_over_models
    if train and series == "closed":
        train_closed(root)
    store = Path(runs_dir) / "models"
    store.mkdir(parents=True, exist_ok=True)
    dss = {name: sp.decompose(s, sigmas=p["sigmas"], n_points=p["n_points"], n_noise=p["n_noise"],
                              steps=p[STEPS_KEY[series]], patch=tuple(p["model_patch"]), progress=False,
                              out=str(store / f"{name}.decompose.zarr"))
           for name, s in existing_series(root, SERIES[series], p[STEPS_KEY[series]]).items()}
    return calls_over_models(dss, p["model_boot"], SERIES[series]) if dss else None


def with_clocks(m, root, series):
    """The stage result `m` with its series' name and each model's τ from its clocks.json (read now, not cached:
    the clocks may be measured after the decompose); a model whose clocks.json is not here keeps the τ `m` holds."""
    if not m:
        return m
    held = m.get("taus") or {}
    return {**m, "series": series, "taus": {n: clock_taus(Path(root) / SERIES[series][n]) or held.get(n)
                                            for n in m["models"]}}


def _one_model(series, p, m, steps, cache_dir):
    """One model's τ_cross and interval (a dict), reused from cache_dir when measured with the same parameters."""
    from scoreprobe.stats.tau_cross import tau_cross_interval
    key = {k: p[k] for k in ("cross_sigmas", "cross_ci_draws", "cross_ci_boot")}
    key.update(series=str(series.path), last=int(max(series.steps)), steps=steps, boot_seed=m)

    def measure():
        o = tau_cross_interval(series, sigmas=p["cross_sigmas"], n_draws=p["cross_ci_draws"],
                               n_boot=p["cross_ci_boot"], boot_seed=m, steps=steps)
        return {"tau_cross": _num(float(o.tau_cross[0])), "lo": _num(float(o.tau_cross_lo[0])),
                "hi": _num(float(o.tau_cross_hi[0])), "boot_never": float(o.boot_never[0])}
    if cache_dir is None:
        return measure()
    return cached_json(Path(cache_dir) / f"cross_ci_{m}.json", key, measure, key="key")[0]


def measure_cross_ci(p, root, cache_dir=None):
    """τ_cross of each series in p["cross_series"] (those with checkpoints) with its bootstrap interval over the
    (item, noise draw) cells, and the t interval over the models -> JSON-able dict."""
    from scoreprobe.loading.series import load_series
    from analyses.decompose.crossover_summary import over_models
    done = [x for x in p["cross_series"] if (Path(root) / x / "ckpt").is_dir()
            and not (Path(root) / x / "resume.pt").is_file()]       # an unfinished run (still training) waits
    skipped = [str(x) for x in p["cross_series"] if x not in done]
    if skipped:
        logger.warning("τ_cross intervals: %s not (yet) finished, left out", skipped)
    paths = [str(x) for x in done]
    series = [load_series(str(Path(root) / x)) for x in paths]
    steps = p["cross_ci_steps"]
    if steps is not None:                                  # the checkpoints each series has among those asked
        steps = [sorted(set(int(v) for v in steps) & set(int(v) for v in s.steps)) for s in series]
    outs = [_one_model(s, p, m, None if steps is None else steps[m], cache_dir) for m, s in enumerate(series)]
    tau = np.array([np.nan if o["tau_cross"] is None else o["tau_cross"] for o in outs])
    return {"series": paths, "skipped_unfinished": skipped, "last_step": [int(max(s.steps)) for s in series],
            **{k: [o[k] for o in outs] for k in ("tau_cross", "lo", "hi", "boot_never")},
            "n_draws": p["cross_ci_draws"], "n_boot": p["cross_ci_boot"], **over_models(tau)}


def measure_cross_ci_data(p, root, cache_dir):
    """τ_cross with its intervals over data seeds: the shipped model (data seed 0) and the data-seed models (trained
    here when missing), each read over its checkpoints up to p["cross_data_steps"] -> measure_cross_ci's dict."""
    from scoreprobe.loading.series import load_series
    from scoreprobe.training.config import TrainConfig, stored_config
    from scoreprobe.training.ensemble import train_ensemble
    if not p["cross_data_seeds"]:
        return None
    dirs = [f"runs/shipped/d{k}" for k in p["cross_data_seeds"]]
    shipped = json.loads((Path(root) / "checkpoints" / "parity-default" / "run.json").read_text())["config"]
    base = dataclasses.replace(TrainConfig.from_dict(stored_config(shipped)), total_steps=p["cross_data_steps"])
    train_ensemble([dataclasses.replace(base, data_seed=k, seed=0) for k in p["cross_data_seeds"]],
                   [Path(root) / d for d in dirs], device="cpu", progress=False)
    group = ["checkpoints/parity-default"] + dirs
    steps = sorted({int(v) for d in group for v in load_series(str(Path(root) / d)).steps
                    if int(v) <= p["cross_data_steps"]})
    sub = Path(cache_dir) / "data_seeds"
    sub.mkdir(parents=True, exist_ok=True)
    out = measure_cross_ci(dict(p, cross_series=group, cross_ci_steps=steps), root, sub)
    return dict(out, data_seeds=[0] + list(p["cross_data_seeds"]), up_to_step=p["cross_data_steps"])


def measure_excess_by_n(p, rule, root):
    """`excess_by_n` over p["Ns"] and p["excess_seeds"], with τ_mem(N) of analyses/two_clocks' G = 2 runs where its
    results are there."""
    from scoreprobe.probes.crossover import excess_by_n
    out = excess_by_n(rule, p["Ns"], p["excess_seeds"], p["cross_sigmas"], p["excess_noise"])
    path = Path(root) / "analyses" / "results" / "two_clocks_cpu.json"
    if path.is_file():
        runs = [r for r in json.loads(path.read_text())["runs"] if r.get("G") == 2 and r.get("tau_mem")]
        out["tau_mem_measured"] = {str(r["N"]): r["tau_mem"] for r in runs}
    return out


def pair_configs(p, rule_spec):
    """[(name, TrainConfig)] of every disjoint-pair member (`pair_members`), the recipe of the preset's pair_* sizes:
    a and b of a pair on disjoint data seeds, c (replicates in pair_same_data) on a's."""
    from scoreprobe.probes.disjoint import disjoint_data_seeds
    from scoreprobe.stats.disjoint_pairs import pair_members
    from scoreprobe.training.config import TrainConfig
    seeds = {n: disjoint_data_seeds(rule_spec, n, p["pair_heldout"], 2 * p["pair_replicates"]) for n in p["pair_Ns"]}
    return [(name, TrainConfig(
        rule=rule_spec, n_train=n, n_heldout=p["pair_heldout"], data_seed=seeds[n][i], seed=seed,
        hidden_size=p["pair_width"], depth=p["pair_depth"], batch_size=p["pair_batch"], total_steps=p["pair_steps"],
        n_checkpoints=p["pair_checkpoints"], first_checkpoint=p["pair_first"], lr=p.get("pair_lr", 2e-3)))
        for name, n, _, i, seed in pair_members(p["pair_Ns"], p["pair_replicates"], p.get("pair_same_data", ()))]


def train_pairs(p, rule_spec, runs_dir, stacked=True, only=None):
    """Train (or resume, or skip when finished) every member -> {name: run_dir}: as one stacked ensemble, or
    (stacked=False) one `train_run` after another, only the member named `only` when given. A member trained one
    way is resumed the same way: a stacked and a single run of one config differ in float rounding, and so in
    their trajectories (the long pairs are trained single: faster per member on a CPU, one process per core)."""
    from scoreprobe.training.ensemble import train_ensemble
    from scoreprobe.training.train import train_run
    members = pair_configs(p, rule_spec)
    dirs = {name: str(Path(runs_dir) / name) for name, _ in members}
    if stacked:
        train_ensemble([c for _, c in members], list(dirs.values()), device="cpu")
    for name, cfg in members:
        if not stacked and only in (None, name):
            train_run(cfg, dirs[name], device="cpu", progress=False)
    return dirs


def long_member_params(p, name):
    """The preset of the long-pairs entry that has member `name`; ValueError if none has it."""
    from scoreprobe.stats.disjoint_pairs import pair_members
    for sub in p["long_pairs"]:
        q = {**p, **sub}
        if name in [m[0] for m in pair_members(q["pair_Ns"], q["pair_replicates"], q["pair_same_data"])]:
            return q
    raise ValueError(f"--train-member: no long-pairs member {name!r}")


def train_long_member(q, rule_spec, runs_dir, name):
    """Train (or resume) the long-pairs member `name` of preset q (`long_member_params`) alone."""
    return train_pairs(q, rule_spec, runs_dir, stacked=False, only=name)[name]


def mem_pair_params(p):
    """The preset `p` with its pair_* sizes replaced by p["mem_pairs"]: the pairs trained past τ_mem at small N."""
    return {**p, **p["mem_pairs"]}


def measure_long_pairs(p, rule_spec, runs_dir):
    """Every p["long_pairs"] entry trained (resumable; run directories under `runs_dir`) and measured, each cached on
    its own (runs_dir/stage_n<N>.json) -> one `measure_pairs` result over all their N (the ceiling is the rule
    oracle's, the same for every entry)."""
    runs_dir = Path(runs_dir)
    out = {"by_n": {}}
    for sub in p["long_pairs"]:
        q = {**p, **sub}
        dirs = train_pairs(q, rule_spec, runs_dir, stacked=False)
        tag = "_".join(str(n) for n in q["pair_Ns"])
        part, _ = cached_json(runs_dir / f"stage_n{tag}.json", {k: q[k] for k in q if k.startswith("pair_")},
                              lambda: measure_pairs(q, dirs))
        out["by_n"].update(part["by_n"])
        out.setdefault("ceiling", part["ceiling"])
        out.setdefault("sizes", part["sizes"])
    return out


def measure_pairs(p, dirs):
    """The members' clocks and the pairs' agreement at the preset's sizes (`scoreprobe.stats.disjoint_pairs`)."""
    from scoreprobe.stats.disjoint_pairs import measure_pairs as measure
    return measure(dirs, p["pair_Ns"], p["pair_replicates"], p.get("pair_same_data", ()), p["pair_clock_samples"],
                   p["pair_measure_at"], sigmas=p["pair_sigmas"], n_points=p["pair_points"],
                   n_samples=p["pair_samples"], n_planes=p["pair_planes"], res=p["pair_res"],
                   n_steps=p["pair_ode_steps"])
