"""The crossover section's measurements beyond the shipped series' losses: τ_cross with intervals over noise draws
and over trained models (`scoreprobe.stats.tau_cross.tau_cross_interval`) — training seeds on one training set,
and data seeds (other training sets of the shipped recipe, training seed 0) — and the generalizer's excess over
the memorizer as a function of N over several data seeds (oracles only).

The data-seed models: the shipped recipe (checkpoints/parity-default/run.json) with data_seed = k, trained here as
one ensemble to p["cross_data_steps"] steps (τ_cross ≈ 1.8k on the shipped models; a constant learning rate, so a
shorter run is the start of a longer one) under runs/shipped/d<k>; τ_cross of every model of that group, data seed
0 (the shipped model) included, is read over the checkpoints up to that step.
"""
import json
import logging
from pathlib import Path

import numpy as np

from scoreprobe.atomic import atomic_write_text

logger = logging.getLogger("decompose.crossover")


def _one_model(series, p, m, steps, cache_dir):
    """One model's τ_cross and interval (a dict), reused from cache_dir when measured with the same parameters."""
    from scoreprobe.stats.tau_cross import tau_cross_interval
    key = {k: p[k] for k in ("cross_sigmas", "cross_ci_draws", "cross_ci_boot")}
    key.update(series=str(series.path), last=int(max(series.steps)), steps=steps, boot_seed=m)
    key = json.loads(json.dumps(key))
    cache = None if cache_dir is None else Path(cache_dir) / f"cross_ci_{m}.json"
    if cache is not None and cache.is_file() and json.loads(cache.read_text())["key"] == key:
        return json.loads(cache.read_text())["result"]
    o = tau_cross_interval(series, sigmas=p["cross_sigmas"], n_draws=p["cross_ci_draws"], n_boot=p["cross_ci_boot"],
                           boot_seed=m, steps=steps)
    out = {"tau_cross": _num(float(o.tau_cross[0])), "lo": _num(float(o.tau_cross_lo[0])),
           "hi": _num(float(o.tau_cross_hi[0])), "boot_never": float(o.boot_never[0])}
    if cache is not None:
        atomic_write_text(cache, json.dumps({"key": key, "result": out}))
    logger.info("τ_cross interval of %s: %s", series.path, out)
    return out


def measure_cross_ci(p, root, cache_dir=None):
    """τ_cross of each series in p["cross_series"] (those with checkpoints) with its bootstrap interval over the
    (item, noise draw) cells, and the t interval over the models -> JSON-able dict."""
    from scoreprobe.loading.series import load_series
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
    res = {"series": paths, "skipped_unfinished": skipped, "last_step": [int(max(s.steps)) for s in series],
           **{k: [o[k] for o in outs] for k in ("tau_cross", "lo", "hi", "boot_never")},
           "n_draws": p["cross_ci_draws"], "n_boot": p["cross_ci_boot"]}
    res.update(_over_models(tau))
    return res


def _over_models(tau, ci=0.95):
    """Mean of the per-model τ_cross with a t interval (M − 1 df); None where undefined (< 2 models, or one never
    crosses: a mean of "never" is no number)."""
    from scoreprobe.stats.intervals import t_interval
    if len(tau) < 2 or not np.isfinite(tau).all():
        return {"mean": _num(float(np.mean(tau))) if len(tau) else None, "mean_lo": None, "mean_hi": None}
    mean, lo, hi = t_interval(tau, ci)
    return {"mean": float(mean), "mean_lo": float(lo), "mean_hi": float(hi)}


def data_seed_dirs(p):
    """The data-seed models' run directories (relative to the repository root)."""
    return [f"runs/shipped/d{k}" for k in p["cross_data_seeds"]]


def train_data_seed_models(p, root):
    """Train (or resume, or skip) the shipped recipe at each data seed of p["cross_data_seeds"], training seed 0,
    p["cross_data_steps"] steps, as one ensemble."""
    import dataclasses

    from scoreprobe.training.config import TrainConfig, stored_config
    from scoreprobe.training.ensemble import train_ensemble
    shipped = json.loads((Path(root) / "checkpoints" / "parity-default" / "run.json").read_text())["config"]
    base = dataclasses.replace(TrainConfig.from_dict(stored_config(shipped)), total_steps=p["cross_data_steps"])
    cfgs = [dataclasses.replace(base, data_seed=k, seed=0) for k in p["cross_data_seeds"]]
    train_ensemble(cfgs, [Path(root) / d for d in data_seed_dirs(p)], device="cpu", progress=False)


def measure_cross_ci_data(p, root, cache_dir):
    """τ_cross with its intervals over data seeds: the shipped model (data seed 0) and the data-seed models, each
    read over its checkpoints up to p["cross_data_steps"] -> measure_cross_ci's dict."""
    from scoreprobe.loading.series import load_series
    if not p["cross_data_seeds"]:
        return None
    train_data_seed_models(p, root)
    group = ["checkpoints/parity-default"] + data_seed_dirs(p)
    steps = sorted({int(v) for d in group for v in load_series(str(Path(root) / d)).steps
                    if int(v) <= p["cross_data_steps"]})
    sub = Path(cache_dir) / "data_seeds"
    sub.mkdir(parents=True, exist_ok=True)
    out = measure_cross_ci(dict(p, cross_series=group, cross_ci_steps=steps), root, sub)
    return dict(out, data_seeds=[0] + list(p["cross_data_seeds"]), up_to_step=p["cross_data_steps"])


def measure_excess_by_n(p, rule, root):
    """The rule oracle's and the memorizer's σ-averaged weighted training loss for datasets of N items, per data
    seed; seed 0's as `rule`, `memorizer`, `excess` (N); all seeds' excess as `excess_by_seed` (seed, N)."""
    from scoreprobe.data.datasets import make_dataset
    from scoreprobe.oracles import RuleDenoiser
    from scoreprobe.probes.crossover import crossover
    gen = RuleDenoiser(rule)
    by = {}
    for seed in p["excess_seeds"]:
        rows = []
        for n in p["Ns"]:
            c = crossover(gen, dataset=make_dataset(rule, n, 1, seed=seed), rule=rule, sigmas=p["cross_sigmas"],
                          n_noise=p["excess_noise"], oracles=("memorizer", "rule"), progress=False)
            avg = dict(zip(c.oracle.values, c.oracle_loss_avg.values))
            rows.append((float(avg["rule"]), float(avg["memorizer"])))
        by[seed] = np.array(rows)                                            # (N, 2)
        logger.info("excess by N, data seed %d done", seed)
    s0 = by[p["excess_seeds"][0]]
    out = {"N": list(p["Ns"]), "rule": s0[:, 0].tolist(), "memorizer": s0[:, 1].tolist(),
           "excess": (s0[:, 0] - s0[:, 1]).tolist(), "excess_seeds": list(p["excess_seeds"]),
           "excess_by_seed": [(by[k][:, 0] - by[k][:, 1]).tolist() for k in p["excess_seeds"]]}
    path = Path(root) / "analyses" / "results" / "two_clocks_cpu.json"
    if path.is_file():
        runs = [r for r in json.loads(path.read_text())["runs"] if r.get("G") == 2 and r.get("tau_mem")]
        out["tau_mem_measured"] = {str(r["N"]): r["tau_mem"] for r in runs}
    return out


def _num(v):
    return None if v is None or not np.isfinite(v) else float(v)
