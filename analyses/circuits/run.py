"""Where in the shipped DiT do the rule and the copies live, and when do those sites form?

    python analyses/circuits --plan            # what the preset computes, and its cost
    python analyses/circuits --smoke --out /tmp/c   # < 2 min: the pipeline at toy size
    python analyses/circuits                   # CPU preset: 24 checkpoints, ≈ 1 min on 1 thread (5 on a busy machine)
    python analyses/circuits --from-results    # rewrite the .md from the .json

Through the API only: `sp.circuits` over the shipped series (resumable store, analyses/results/
circuits.zarr, not committed), then per kind of pair (rule, copy) the sites with the largest final
effect (mean over σ), the step at which their effect first reaches half of its final value with a
bootstrap CI over pairs (the pairs are the same items at every checkpoint, so they are resampled
jointly across steps), against τ_rule and τ_mem of the series' own clocks (checkpoints/parity-default/
clocks.json); the attention of each head to same-group tokens; and at the last checkpoint the
basin-flip fraction of the top sites along the PF-ODE (sp.patch_ode). Results: analyses/results/
circuits.{md,json,png}.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from analyses.circuits import report as circuits_report
from scoreprobe.atomic import atomic_write_text

HERE = Path(__file__).resolve().parent

PRESETS = {
    "cpu": dict(steps=None, n_pairs=16, sigmas=[0.3, 0.7, 1.5], sites=["block", "sub", "head"], n_boot=1000,
                ode_pairs=16, ode_sigma_start=2.0, ode_stars=[2.0, 0.7, 0.3], ode_steps=12),
    "smoke": dict(steps=[500, 2876, 36000], n_pairs=4, sigmas=[0.7], sites=["block", "sub", "head"], n_boot=50,
                  ode_pairs=3, ode_sigma_start=2.0, ode_stars=[2.0], ode_steps=4),
}
N_TOP = 3


def crossing(steps, curve, final):
    """First step where `curve` reaches final/2, interpolated linearly in log(step + 1) between the
    checkpoints around it; checkpoints where the curve is NaN (no contrast to split, e.g. step 0 of an
    adaLN-Zero network) are skipped; at the first finite checkpoint already: that step (a bound).
    NaN when final ≤ 0 or never reached."""
    if not np.isfinite(final) or final <= 0:
        return np.nan
    ok = np.isfinite(curve)
    steps, curve = np.asarray(steps, float)[ok], np.asarray(curve, float)[ok]
    above = np.flatnonzero(curve >= final / 2)
    if len(above) == 0:
        return np.nan
    i = above[0]
    if i == 0:
        return float(steps[0])
    a, b = np.log(steps[i - 1] + 1), np.log(steps[i] + 1)
    f = (final / 2 - curve[i - 1]) / (curve[i] - curve[i - 1])
    return float(np.exp(a + f * (b - a)) - 1)


def decay(steps, curve):
    """First step after the curve's peak where it falls to half of the peak (log(step + 1)-interpolated);
    NaN if it never does. As `half_crossing`, only the checkpoints where the curve is defined take part
    (a NaN metric is a checkpoint that says nothing; NaN when none is defined)."""
    ok = np.isfinite(curve)
    if not ok.any():
        return np.nan
    steps, curve = np.asarray(steps, float)[ok], np.asarray(curve, float)[ok]
    k = int(np.argmax(curve))
    below = np.flatnonzero(curve[k:] <= curve[k] / 2)
    if len(below) == 0:
        return np.nan
    i = k + below[0]
    a, b = np.log(steps[i - 1] + 1), np.log(steps[i] + 1)
    f = (curve[k] / 2 - curve[i - 1]) / (curve[i] - curve[i - 1])
    return float(np.exp(a + f * (b - a)) - 1)


def pooled(eff, den, idx):
    """Pooled effect (step, sigma, site) of the pairs `idx`: Σ e·d / Σ d over pairs; eff (step, σ, site,
    pair), den (step, σ, pair)."""
    e, d = eff[..., idx], den[..., idx][:, :, None, :]
    with np.errstate(invalid="ignore", divide="ignore"):      # no contrast (step 0): NaN, skipped later
        # nansum: a pair's effect is NaN where its d = 0 (no contrast), and such a pair has weight 0 in Σ e·d
        # as in Σ d; a NaN d (undefined metric) makes Σ d, so the pooled effect, NaN
        return np.nansum(e * d, -1) / d.sum(-1)


def site_timing(ds, kind, n_boot, seed):
    """Per site: final effect (mean over σ) and half-crossing step, with bootstrap CIs over pairs."""
    eff = ds[f"{kind}_effect_pair"].transpose("step", "sigma", "site", f"{kind}_pair").values
    den = ds[f"{kind}_total_pair"].transpose("step", "sigma", f"{kind}_pair").values
    steps = ds.step.values.astype(float)
    n = eff.shape[-1]

    def stats(idx):
        curve = pooled(eff, den, idx).mean(1)                                    # (step, site)
        return curve[-1], np.array([crossing(steps, curve[:, j], curve[-1, j]) for j in range(curve.shape[1])])

    final, cross = stats(np.arange(n))
    rng = np.random.default_rng(seed)
    boot = [stats(rng.integers(0, n, n)) for _ in range(n_boot)]
    bf = np.array([b[0] for b in boot])
    bc = np.array([b[1] for b in boot])
    with np.errstate(all="ignore"):
        reached = np.isfinite(bc).mean(0)
        lo, hi = np.nanpercentile(np.where(np.isfinite(bc), bc, np.nan), [2.5, 97.5], axis=0)
    return {"final": final, "final_ci": np.nanpercentile(bf, [2.5, 97.5], axis=0), "cross": cross,
            "cross_ci": np.stack([lo, hi]), "cross_reached": reached}


def top_sites(ds, kind, t, n_top=N_TOP):
    """The top site overall and of each kind (block, sub, head), by final effect."""
    order = np.argsort(-np.nan_to_num(t["final"], nan=-1e9), kind="stable")
    kinds = ds.site_kind.values
    out = list(order[:n_top])
    for k in ("block", "sub", "head"):
        best = next((i for i in order if kinds[i] == k), None)
        if best is not None and best not in out:
            out.append(best)
    rows = []
    first = float(ds.step.values[np.isfinite(ds[f"{kind}_effect"].mean("sigma").values).any(1)][0])
    for i in out:
        curve = ds[f"{kind}_effect"].isel(site=i).values                          # (step, σ)
        rows.append({"site": str(ds.site.values[i]), "site_kind": str(kinds[i]),
                     "final": float(t["final"][i]), "final_ci": [float(v) for v in t["final_ci"][:, i]],
                     "by_sigma_final": {f"{s:g}": float(v) for s, v in zip(ds.sigma.values, curve[-1])},
                     "half_step": _num(t["cross"][i]), "half_step_ci": [_num(v) for v in t["cross_ci"][:, i]],
                     "half_reached_share": float(t["cross_reached"][i]),
                     "half_step_is_bound": bool(t["cross"][i] == first)})
    return rows


def _num(v):
    return None if v is None or not np.isfinite(v) else float(v)


def attention_summary(ds):
    """Per head: attention to same-group tokens at the first and last checkpoint (mean over σ) vs chance."""
    if "attn_same_group" not in ds:
        return None
    a = ds.attn_same_group.mean("sigma")                                          # (step, layer, head)
    chance = float(ds.attrs["attn_same_group_chance"])
    last, first = a.isel(step=-1).values, a.isel(step=0).values
    heads = [{"layer": int(i), "head": int(h), "first": float(first[i, h]), "last": float(last[i, h])}
             for i in range(last.shape[0]) for h in range(last.shape[1])]
    heads.sort(key=lambda r: -r["last"])
    return {"chance": chance, "heads": heads, "curve_top": [float(v) for v in
            a.values[:, heads[0]["layer"], heads[0]["head"]]]}


def copy_contrast(ds, n_boot, seed):
    """When the network stops telling a training item from its nearest held-out item: the step at which
    the copy total (mean over σ and pairs) falls to half of its peak, with a bootstrap CI over pairs;
    and the top copy sites at the peak step (where there is most contrast to split)."""
    den = ds.copy_total_pair.transpose("step", "sigma", "copy_pair").values
    steps = ds.step.values.astype(float)
    n = den.shape[-1]
    est = decay(steps, den.mean((1, 2)))
    rng = np.random.default_rng(seed)
    boot = np.array([decay(steps, den[..., rng.integers(0, n, n)].mean((1, 2))) for _ in range(n_boot)])
    peak = int(np.nanargmax(den.mean((1, 2))))   # the peak of the defined checkpoints (as decay)
    e = ds.copy_effect.isel(step=peak).mean("sigma")
    order = np.argsort(-np.nan_to_num(e.values, nan=-1e9), kind="stable")[:N_TOP]
    with np.errstate(all="ignore"):
        ci = np.nanpercentile(boot, [2.5, 97.5]) if np.isfinite(boot).any() else [np.nan, np.nan]
    return {"half_decay_step": _num(est), "half_decay_ci": [_num(v) for v in ci],
            "half_decay_reached_share": float(np.isfinite(boot).mean()), "peak_step": int(steps[peak]),
            "top_at_peak": [{"site": str(ds.site.values[i]), "effect": float(e[i])} for i in order]}


def attention_timing(ds, n_heads=3):
    """For the heads with most same-group attention at the end: the step at which their excess over
    chance reaches half of its final value (no CI: the probe keeps the per-head mean only; a value
    below `first_step`, the first checkpoint after 0, is only known to lie before it)."""
    if "attn_same_group" not in ds:
        return []
    a = ds.attn_same_group.mean("sigma").values - ds.attrs["attn_same_group_chance"]   # (step, layer, head)
    steps = ds.step.values.astype(float)
    flat = [(a[-1, i, h], i, h) for i in range(a.shape[1]) for h in range(a.shape[2])]
    first = int(steps[steps > 0][0]) if (steps > 0).any() else 0
    return [{"layer": int(i), "head": int(h), "excess_final": float(x), "first_step": first,
             "half_step": _num(crossing(steps, a[:, i, h], x))} for x, i, h in sorted(flat, reverse=True)[:n_heads]]


def sub_block_split(ds, kind, n_boot=200, seed=2):
    """Σ over layers of the attention and of the MLP sub-block effects at the last checkpoint (mean over
    σ), and a bootstrap CI over pairs of their difference attn − mlp."""
    eff = ds[f"{kind}_effect_pair"].transpose("step", "sigma", "site", f"{kind}_pair").values[-1:]
    den = ds[f"{kind}_total_pair"].transpose("step", "sigma", f"{kind}_pair").values[-1:]
    labels = np.array([str(s) for s in ds.site.values])
    is_attn, is_mlp = np.char.endswith(labels, "hook_attn_out"), np.char.endswith(labels, "hook_mlp_out")
    n = eff.shape[-1]

    def split(idx):
        e = pooled(eff, den, idx)[0].mean(0)                                      # (site,)
        return e[is_attn].sum(), e[is_mlp].sum()

    attn, mlp = split(np.arange(n))
    rng = np.random.default_rng(seed)
    diff = np.array([np.subtract(*split(rng.integers(0, n, n))) for _ in range(n_boot)])
    lo, hi = np.nanpercentile(diff, [2.5, 97.5])
    return {"attn": float(attn), "mlp": float(mlp), "diff_ci": [float(lo), float(hi)]}


def ode_flips(sp, series, ds, rows, cfg):
    """Basin flips at the last checkpoint for the top head and top sub-block of each kind."""
    from scoreprobe.probes.circuits import copy_pairs, rule_pairs
    D = series.denoiser(int(ds.step.values[-1]))
    n = cfg["ode_pairs"]
    pairs = {"copy": copy_pairs(series.dataset, n), "rule": rule_pairs(series.dataset, series.rule, n, 0)[:2]}
    out = []
    for kind in ("rule", "copy"):
        sites = [r["site"] for r in rows[kind] if r["site_kind"] in ("head", "sub")][:2] + ["*"]
        for star in cfg["ode_stars"]:
            f = sp.patch_ode(D, *pairs[kind], sites, sigma_star=star, sigma_start=cfg["ode_sigma_start"],
                             n_steps=cfg["ode_steps"], seed=5)
            for s in sites:
                out.append({"kind": kind, "site": s, "sigma_star": star,
                            "flip_fraction": float(f.flip_fraction.sel(site=s)),
                            "to_clean_fraction": float(f.to_clean_fraction.sel(site=s)),
                            "same_basin_unpatched": float(f.same_basin_unpatched.mean())})
    return out


def read_taus(series):
    """τ_rule, τ_mem (and CIs) from the series' clocks.json."""
    t = json.loads((Path(series.path) / "clocks.json").read_text())["taus"]
    return {k: t[k] for k in ("tau_rule", "tau_rule_ci", "tau_mem", "tau_mem_ci")}


def run(cfg, out_dir, name, log):
    import torch

    import scoreprobe as sp
    torch.set_num_threads(1)
    series = sp.load_series()
    t0 = time.time()
    ds = sp.circuits(series, sigmas=cfg["sigmas"], n_pairs=cfg["n_pairs"], sites=cfg["sites"],
                     steps=cfg["steps"], out=out_dir / f"{name}.zarr")
    t_probe = time.time() - t0
    timing = {kind: site_timing(ds, kind, cfg["n_boot"], seed=0) for kind in ("rule", "copy")}
    rows = {kind: top_sites(ds, kind, timing[kind]) for kind in ("rule", "copy")}
    t1 = time.time()
    flips = ode_flips(sp, series, ds, rows, cfg)
    result = {"preset": cfg, "series": str(series.path), "steps": [int(s) for s in ds.step.values],
              "taus": read_taus(series), "top": rows, "attention": attention_summary(ds),
              "attention_timing": attention_timing(ds), "copy_contrast": copy_contrast(ds, cfg["n_boot"], 1),
              "sub_blocks": {k: sub_block_split(ds, k) for k in ("rule", "copy")},
              "totals": {k: [float(v) for v in ds[f"{k}_total"].mean("sigma").values] for k in ("rule", "copy")},
              "ode": flips, "seconds": {"probe": round(t_probe, 1), "ode": round(time.time() - t1, 1)}}
    atomic_write_text(out_dir / f"{name}.json", json.dumps(result, indent=1))
    circuits_report.write(result, ds, out_dir, name)
    log(f"wrote {out_dir / name}.{{json,md,png}} (probe {t_probe:.0f} s)")
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--smoke", action="store_true", help="toy size (3 checkpoints, 4 pairs, 1 σ)")
    p.add_argument("--plan", action="store_true", help="print what the preset computes and stop")
    p.add_argument("--from-results", action="store_true", help="rewrite the .md from the .json")
    p.add_argument("--out", default=None, help="results folder (default analyses/results)")
    a = p.parse_args(argv)
    preset = "smoke" if a.smoke else "cpu"
    cfg = PRESETS[preset]
    out_dir = Path(a.out or HERE.parent / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    name = "circuits" if preset == "cpu" else "circuits_smoke"
    if a.plan:
        print(circuits_report.plan(cfg))
        return 0
    if a.from_results:
        result = json.loads((out_dir / f"{name}.json").read_text())
        atomic_write_text(out_dir / f"{name}.md", circuits_report.markdown(result))
        print(f"wrote {out_dir / name}.md")
        return 0
    run(cfg, out_dir, name, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
