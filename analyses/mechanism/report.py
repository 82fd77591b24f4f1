"""The report of analyses/mechanism: every number from the stores (nothing from a log), the
statistics of scoreprobe.probes.timing / dsm_stats, the md, the json and the figures."""
import json
import logging
import math
from pathlib import Path

import numpy as np

from analyses.mechanism import measure as M
from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.probes.dsm_stats import ALPHA, paired_gap_stats
from scoreprobe.probes.timing import difference_ci, half_change, log10_spread, mean_ci
from scoreprobe.store import normalize_config

logger = logging.getLogger("mechanism")

QUANTITIES = {"training": "valid_memorized", "heldout": "valid_heldout", "novel": "valid_novel",
              "violating": "rule_violating", "invalid": "invalid"}
ANCHORS = {"symmetric": ("t", "h", "w"), "train_heldout": ("t", "h1", "h2"), "random_valid": ("v1", "v2", "v3")}
DSM_BAND = (0.2, 2.0)


# ---------------------------------------------------------------------------------------------
# From the stores to per-unit arrays
# ---------------------------------------------------------------------------------------------

def collect(args, name):
    """Everything measured for series `name`, read from its stores (nothing is computed)."""
    series, taus = M.open_series(args, name)
    steps = M.chosen_steps(series, args.n_ckpt)
    out = {"series": series, "taus": taus, "steps": steps, "basins": {}, "retention": {}, "dsm": {}}
    for seed in args.seeds:
        for kind, extent in [(k, "local") for k in M.KINDS] + [("symmetric", "reach")]:
            ds, planes = M.measure_basins(args, name, series, steps, kind, seed, extent, run=False)
            if ds is not None:
                out["basins"][(kind, extent, seed)] = (ds.sel(step=steps), planes)
        for probe, key in ((M.measure_retention, "retention"), (M.measure_dsm, "dsm")):
            ds = probe(args, name, series, steps, seed, run=False)
            if ds is not None:
                out[key][seed] = ds.sel(step=steps)
    anim = M.measure_animation(args, name, series, steps, run=False)
    out["anim"] = None if anim is None else anim.sel(step=steps)
    return out


def _strs(values):
    """An array of Python str (store string coordinates may come back as numpy StringDType)."""
    return np.array([str(v) for v in np.asarray(values).tolist()], dtype=object)


def plane_shares(ds, sigma):
    """{quantity: (planes, steps) float} of one basins store at σ_start `sigma`: the state shares, valid,
    off_vertex and the three anchors' own basins (anchor0..2)."""
    d = ds.sel(sigma_start=sigma)
    state, anchor = d.endpoint_state.values, d.endpoint_anchor.values                 # (S, P, V, U)
    share = {q: (state == STATE_CODES[c]).mean(axis=(2, 3)).T for q, c in QUANTITIES.items()}
    share["valid"] = share["training"] + share["heldout"] + share["novel"]
    share["off_vertex"] = d.endpoint_off_vertex.values.astype(float).mean(axis=(2, 3)).T
    for k in range(3):
        share[f"anchor{k}"] = (anchor == k).mean(axis=(2, 3)).T
    share["anchor_asymmetry"] = share["anchor0"] - share["anchor1"]
    return share


def pooled_shares(col, kind, extent, sigma, seeds):
    """(shares {q: (U, S)}, groups (U,) seed) over the planes of every seed."""
    parts = [(plane_shares(col["basins"][(kind, extent, s)][0], sigma), s) for s in seeds
             if (kind, extent, s) in col["basins"]]
    if not parts:
        return None, None
    shares = {q: np.concatenate([p[q] for p, _ in parts]) for q in parts[0][0]}
    groups = np.concatenate([np.full(len(p["valid"]), s) for p, s in parts])
    return shares, groups


def item_outcomes(col, split, sigma):
    """({outcome: (items, steps)}, groups) of the retention stores for one split and σ."""
    parts = []
    for seed, ds in col["retention"].items():
        d = ds.sel(sigma=sigma).isel(sample=np.flatnonzero(_strs(ds.split.values) == split))
        parts.append(({k: d[k].values.T for k in d.data_vars if d[k].dims == ("step", "sample")}, seed))
    if not parts:
        return None, None
    out = {k: np.concatenate([p[k] for p, _ in parts]) for k in parts[0][0]}
    return out, np.concatenate([np.full(len(p["retained"]), s) for p, s in parts])


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------

def _curve(values, groups, args, seed=0):
    r = mean_ci(values, groups, n_boot=args.n_boot, seed=seed)
    return {"mean": r["mean"].tolist(), "lo": r["lo"].tolist(), "hi": r["hi"].tolist(),
            "by_seed": {str(k): v.tolist() for k, v in r["by_group"].items()}, "n_units": int(len(values))}


def basin_summary(col, args):
    """{kind/extent: {σ: {quantity: curve}}} with 95% CIs over planes (stratified by seed)."""
    out = {}
    for kind, extent in [(k, "local") for k in M.KINDS] + [("symmetric", "reach")]:
        for sigma in (args.sigma_starts if extent == "local" else args.reach_sigmas):
            shares, groups = pooled_shares(col, kind, extent, sigma, args.seeds)
            if shares is not None:
                out.setdefault(f"{kind}/{extent}", {})[str(sigma)] = {q: _curve(v, groups, args) for q, v in shares.items()}
    return out


def retention_summary(col, args):
    out = {}
    for split in ("train", "heldout"):
        for sigma in args.ret_sigmas:
            res, groups = item_outcomes(col, split, sigma)
            if res is not None:
                out.setdefault(split, {})[str(sigma)] = {k: _curve(v, groups, args) for k, v in res.items()}
    return out


def capture_closer(col, args, sigma):
    """Held-out restarts captured although closer to a valid non-training vertex, at σ: the share of all
    restarts and the rate among the restarts that start closer (a ratio of means, bootstrapped jointly)."""
    res, groups = item_outcomes(col, "heldout", sigma)
    if res is None:
        return None
    cc, cn = res["captured_closer"], res["closer_nontrain"]
    from scoreprobe.probes.timing import bootstrap_means
    boot = bootstrap_means(np.concatenate([cc, cn], axis=1), groups, args.n_boot)   # (B, 2S): one draw for both
    s = cc.shape[1]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = boot[:, :s] / boot[:, s:]
        point = np.nanmean(cc, axis=0) / np.nanmean(cn, axis=0)
    return {"share": _curve(cc, groups, args), "closer_share": _curve(cn, groups, args),
            "rate_given_closer": {"mean": point.tolist(), "lo": np.nanpercentile(ratio, 2.5, axis=0).tolist(),
                                  "hi": np.nanpercentile(ratio, 97.5, axis=0).tolist()}}


def symmetry(col, args):
    """Training − held-out: anchor basins on the symmetric planes (paired per plane) and retention (items)."""
    out = {}
    shares, groups = pooled_shares(col, "symmetric", "local", args.sigma_starts[0], args.seeds)
    if shares is not None:
        out["basins"] = _curve(shares["anchor_asymmetry"], groups, args)
    for sigma in args.ret_sigmas:
        tr, gt = item_outcomes(col, "train", sigma)
        ho, gh = item_outcomes(col, "heldout", sigma)
        if tr is not None:
            d = difference_ci(tr["retained"], ho["retained"], gt, gh, n_boot=args.n_boot)
            out[f"retention_sigma_{sigma}"] = {"mean": d["mean"].tolist(), "lo": d["lo"].tolist(),
                                               "hi": d["hi"].tolist(),
                                               "by_seed": {str(k): v.tolist() for k, v in d["by_group"].items()}}
    return out


def dsm_summary(col, args):
    """Paired held-out − train DSM statistics per (step, σ): the loss of each item averaged over the seeds'
    noise banks, pairs by position; Holm over σ per step. Per seed alone: the first significant σ."""
    if not col["dsm"]:
        return None
    dss = list(col["dsm"].values())
    d0 = dss[0]
    loss = np.mean([d.loss.values for d in dss], axis=0)                              # (S, n_sigma, items)
    split, pos, sig = _strs(d0.split.values), d0.item_index.values, d0.sigma.values
    st = paired_gap_stats(loss, split, pos, sig, method="holm")
    by_seed = {str(s): paired_gap_stats(d.loss.values, split, pos, sig)["first_significant_sigma"].tolist()
               for s, d in col["dsm"].items()}
    return {"sigma": sig.tolist(), "paired_gap": st["paired_gap"].tolist(), "z": st["paired_gap_z"].tolist(),
            "p_adjusted": st["p_adjusted"].tolist(), "n_pairs": st["n_pairs"].tolist(),
            "first_significant_sigma": st["first_significant_sigma"].tolist(),
            "significant_band": [_band(sig, row < ALPHA) for row in st["p_adjusted"]],
            "first_significant_sigma_by_seed": by_seed, "method": "holm", "alpha": ALPHA,
            "test": "one-sided paired t-test of held-out > train over pairs, Holm over the σ grid per step"}


def _band(sig, mask):
    return [float(sig[mask].min()), float(sig[mask].max())] if mask.any() else None


def dsm_pair_gaps(col):
    """(units, steps) band-averaged paired differences over DSM_BAND, units = (seed, pair); groups = seed."""
    rows, groups = [], []
    for seed, d in col["dsm"].items():
        band = d.sel(sigma=(d.sigma >= DSM_BAND[0]) & (d.sigma <= DSM_BAND[1]))
        tr, ho = (band.isel(sample=np.flatnonzero(_strs(band.split.values) == s)) for s in ("train", "heldout"))
        n = min(tr.sizes["sample"], ho.sizes["sample"])
        diff = (ho.loss.values[..., :n] - tr.loss.values[..., :n]).mean(axis=1)        # (S, pairs)
        rows.append(diff.T)
        groups.append(np.full(n, seed))
    return (np.concatenate(rows), np.concatenate(groups)) if rows else (None, None)


def half_changes(col, args):
    """Half-change steps (to="extreme") of the study's quantities with 95% CIs (planes / items within
    seeds) and the per-seed steps."""
    steps, out = col["steps"], {}
    sigma = args.sigma_starts[0]
    pooled = [pooled_shares(col, k, "local", sigma, args.seeds) for k in M.KINDS]
    pooled = [p for p in pooled if p[0] is not None]
    if pooled:
        groups = np.concatenate([g for _, g in pooled])
        for q in ("valid", "violating", "training", "heldout"):
            out[f"{q} basin share (all planes, σ_start {sigma})"] = (np.concatenate([s[q] for s, _ in pooled]), groups)
    sym, g = pooled_shares(col, "symmetric", "local", sigma, args.seeds)
    if sym is not None:
        out["training − held-out basin (symmetric planes)"] = (sym["anchor_asymmetry"], g)
    ho, g = item_outcomes(col, "heldout", 1.0) if 1.0 in args.ret_sigmas else (None, None)
    if ho is not None:
        out["held-out captured (σ 1)"] = (ho["captured"], g)
        out["held-out captured although closer (σ 1)"] = (ho["captured_closer"], g)
    gaps, g = dsm_pair_gaps(col)
    if gaps is not None:
        out[f"DSM paired gap, σ in {list(DSM_BAND)}"] = (gaps, g)
    result = {}
    for name, (values, groups) in out.items():
        r = half_change(steps, values, groups, to="extreme", n_boot=args.n_boot)
        r["log10_spread_over_seeds"] = log10_spread(r["by_group"])
        result[name] = r
    return result


def summarize(col, args):
    return {"taus": col["taus"], "steps": col["steps"], "basins": basin_summary(col, args),
            "retention": retention_summary(col, args),
            "capture_closer": {str(s): capture_closer(col, args, s) for s in (1.0, 2.0) if s in args.ret_sigmas},
            "symmetry": symmetry(col, args), "dsm": dsm_summary(col, args), "half_change": half_changes(col, args),
            "n_planes": {f"{k}/{e}": sum(len(p) for (k2, e2, _), (_, p) in col["basins"].items() if (k2, e2) == (k, e))
                         for k, e in [(k, "local") for k in M.KINDS] + [("symmetric", "reach")]},
            "symmetric_hamming": _hammings(col)}


def _hammings(col):
    from scoreprobe.slices import hamming_matrix
    out = {}
    for (kind, extent, _), (_, planes) in col["basins"].items():
        if kind == "symmetric" and extent == "local":
            for p in planes:
                bits = (p.anchors > 0).astype(np.uint8)
                d = str(int(hamming_matrix(bits[:1], bits[1:2])[0, 0]))
                out[d] = out.get(d, 0) + 1
    return out


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

def write_report(args, timings, measure_s):
    from analyses.mechanism.markdown import markdown
    from scoreprobe.viz.mechanism import study_figures
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    stem = results / f"mechanism{args.suffix}"
    cols = {name: collect(args, name) for name in args.series}
    summary = {name: summarize(col, args) for name, col in cols.items()}
    settings = {k: v for k, v in vars(args).items() if k not in ("results", "out")}
    report = normalize_config({"settings": settings, "series": summary, "timings_s": timings,
                               "measure_s": round(measure_s, 1)})
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1))
    figures = study_figures(summary, {n: c["anim"] for n, c in cols.items()}, stem)
    stem.with_suffix(".md").write_text(markdown(report, figures, args))
    print(stem.with_suffix(".md").read_text())
    print(f"wrote {stem}.md, .json and {', '.join(str(f) for f in figures)}")
    return report


def fmt_step(v):
    return "not reached" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.0f}"
