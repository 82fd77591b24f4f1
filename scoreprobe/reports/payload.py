"""The page's data: each section's Dataset turned into plain JSON values (arrays as base64 of
little-endian int8 / float32, decoded by the page's script), plus PNG figures from `scoreprobe.viz`."""
import base64
import io
import json
import math

import numpy as np

from scoreprobe.probes.wilson import wilson_interval
from scoreprobe.stats.taus import window_status

Z95 = 1.959963984540054   # two-sided 95% normal quantile (the ribbons' Wilson intervals)


def b64(array, dtype):
    """base64 of `array` as C-ordered little-endian `dtype` bytes."""
    return base64.b64encode(np.ascontiguousarray(array, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()).decode()


def png(fig, dpi=100):
    """A matplotlib Figure as a base64 PNG."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return base64.b64encode(buf.getvalue()).decode()


def _num(x, digits=6):
    """A float for JSON: rounded, None for NaN / inf / None (stores keep NaN and inf as null)."""
    if x is None:
        return None
    x = float(x)
    return round(x, digits) if math.isfinite(x) else None


# ---------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------


def _tau(a, key):
    ci = a.get(key + "_ci")
    return {"value": _num(a.get(key, math.nan)), "ci": None if not ci else [_num(v) for v in ci],
            "reached": _num(a.get(key + "_reached"))}


def clocks_payload(ds):
    """Curves (rule_acc, novel_valid, mem_ratio) with 95% Wilson ribbons, group_acc and group_mem
    (group level, without ribbons) when the store has them, τ with CIs, the window (its
    status as stats.taus.window_status words it, from the stored τ and the curve)."""
    a = {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in ds.attrs.items()}   # open_store: null -> NaN
    n = int(ds.sizes["sample"])
    curves = {}
    for name in ("rule_acc", "novel_valid", "mem_ratio"):
        y = ds[name].values.astype(np.float64)
        lo, hi = wilson_interval(y, n, Z95)
        curves[name] = {"y": [_num(v, 4) for v in y], "lo": [_num(v, 4) for v in lo], "hi": [_num(v, 4) for v in hi]}
    for name in ("group_acc", "group_mem"):   # group level: moves where sample-level curves stay at 0 (large G)
        if name in ds:                        # (means of per-sample shares: no Wilson ribbon)
            curves[name] = {"y": [_num(v, 4) for v in ds[name].values.astype(np.float64)]}
    return {"steps": [int(s) for s in ds.step.values], "n_samples": n, "curves": curves,
            "taus": {k: _tau(a, k) for k in ("tau_rule", "tau_novel", "tau_mem")},
            "thresholds": {"rule": _num(a.get("rule_threshold")), "mem": _num(a.get("mem_threshold")),
                           "novel": _num(a.get("novel_threshold", math.nan))},
            "novel_oracle": _num(a.get("novel_oracle", math.nan)),
            "window": {"open": bool(a.get("window_open")), "intervals": a.get("window_intervals") or [],
                       "log10_width": _num(a.get("window_log10_width", math.nan), 3),
                       "log10_width_ci": [_num(v, 3) for v in a.get("window_log10_width_ci") or []],
                       "open_share": _num(a.get("window_open_share")), "censored": bool(a.get("window_hi_censored")),
                       "status": window_status(ds, tau=a), "undecided": _undecided(ds, a, n)},
            "under_resolved": list(a.get("under_resolved") or []), "n_boot": a.get("n_boot"), "ci": _num(a.get("ci"))}


def _undecided(ds, a, n):
    """For a window closed because τ_rule is not reached: a sentence when the highest measured rule accuracy's 95%
    Wilson interval reaches the threshold (more samples would decide), else None."""
    thr = a.get("rule_threshold")
    if a.get("window_open") or thr is None or not (a.get("tau_rule") is None or not math.isfinite(a["tau_rule"])):
        return None
    y = ds["rule_acc"].values.astype(np.float64)
    if not np.isfinite(y).any():
        return None
    k = int(np.nanargmax(y))
    lo, hi = wilson_interval(y[k:k + 1], n, Z95)
    if hi[0] < thr:
        return None
    return (f"not decided at this budget: the highest rule accuracy, {y[k]:.3f} at step {int(ds.step.values[k])}, "
            f"has a 95% interval [{lo[0]:.3f}, {hi[0]:.3f}] over {n} samples that reaches {thr:g}; more samples "
            f"(and more than {ds.sizes['step']} checkpoints) would decide")


def _anchors(ds):
    """Each anchor's label, plane coordinates and colour (that of the figures: viz.common.ANCHOR_COLORS)."""
    from scoreprobe.viz.common import ANCHOR_COLORS
    if "anchor_u" not in ds:
        return []
    return [{"label": str(ds.anchor_label.values[k]), "u": _num(ds.anchor_u.values[k]),
             "v": _num(ds.anchor_v.values[k]), "color": ANCHOR_COLORS[k % len(ANCHOR_COLORS)]}
            for k in range(ds.sizes["anchor"])]


def _grid(ds):
    return {"u": [_num(x) for x in ds.u.values], "v": [_num(x) for x in ds.v.values], "anchors": _anchors(ds)}


def basins_payload(ds):
    """State maps (step, sigma_start, v, u) as int8, the shares per (step, sigma_start, state)."""
    from scoreprobe.data.datasets import STATES
    from scoreprobe.viz.common import STATE_COLORS
    st = ds["endpoint_state"].transpose("step", "sigma_start", "v", "u").values
    frac = ds["fraction"].transpose("step", "sigma_start", "state").sel(state=list(STATES)).values
    off = ds["endpoint_off_vertex"].transpose("step", "sigma_start", "v", "u").values.mean(axis=(2, 3))
    return {"steps": [int(s) for s in ds.step.values], "sigma_start": [_num(s) for s in ds.sigma_start.values],
            "states": list(STATES), "colors": [STATE_COLORS[s] for s in STATES], "maps": b64(st, "i1"),
            "fraction": np.round(frac, 4).tolist(), "off_vertex": np.round(off, 4).tolist(), **_grid(ds)}


def _log_mag(ds, prefix):
    su, sv, off = (ds[prefix + k].values.astype(np.float64) for k in ("score_u", "score_v", "score_off_norm"))
    return np.log10(np.sqrt(su ** 2 + sv ** 2 + off ** 2) + 1e-12)


def field_payload(ds):
    """In-plane score (u, v parts) and log10 |score| as float32 (step, sigma, v, u), oracles (sigma, v, u)."""
    order = ("step", "sigma", "v", "u")
    out = {"steps": [int(s) for s in ds.step.values], "sigma": [_num(s) for s in ds.sigma.values], **_grid(ds),
           "fields": {}}
    for prefix, who in (("", "model"), ("mem_", "memorizer"), ("rule_", "rule oracle")):
        if prefix + "score_u" not in ds:
            continue
        dims = [d for d in order if d in ds[prefix + "score_u"].dims]
        part = ds[[prefix + k for k in ("score_u", "score_v", "score_off_norm")]].transpose(*dims)
        out["fields"][who] = {"su": b64(part[prefix + "score_u"].values, "f4"),
                              "sv": b64(part[prefix + "score_v"].values, "f4"),
                              "mag": b64(_log_mag(part, prefix), "f4"), "per_step": "step" in dims}
    return out


def retention_payload(ds):
    """Mean retained / captured fraction per (step, sigma) for each split."""
    split = np.array([str(x) for x in ds.split.values])
    out = {"steps": [int(s) for s in ds.step.values], "sigma": [_num(s) for s in ds.sigma.values], "splits": {}}
    for name in dict.fromkeys(split):
        part = ds.isel(sample=np.flatnonzero(split == name))
        out["splits"][name] = {v: np.round(part[v].transpose("step", "sigma", "sample").values.mean(axis=2), 4).tolist()
                               for v in ("retained", "captured")} | {"n": int(part.sizes["sample"])}
    return out


def dsm_payload(ds, clocks=None):
    """The gap heat map (σ × step, significance marks) and the loss curves, as PNGs from scoreprobe.viz."""
    from scoreprobe.viz import new_figure, plot_dsm, plot_dsm_gap
    taus = {} if clocks is None else {k: clocks.attrs.get(k) for k in ("tau_rule", "tau_mem")}
    fig = new_figure((6.4, 4.2))
    plot_dsm_gap(ds, ax=fig.add_subplot(), **taus)
    heat = png(fig, dpi=110)
    fig = new_figure((6.4, 4.2))
    plot_dsm(ds, ax=fig.add_subplot())
    star = np.atleast_1d(ds["first_significant_sigma"].values) if "first_significant_sigma" in ds else []
    return {"heatmap": heat, "losses": png(fig, dpi=110), "steps": [int(s) for s in np.atleast_1d(ds.step.values)],
            "first_significant_sigma": [_num(s, 4) for s in star], "n_sigma": int(ds.sizes["sigma"]),
            "n_noise": json.loads(ds.attrs.get("scoreprobe_config", "{}")).get("n_noise")}


PAYLOADS = {"clocks": clocks_payload, "basins": basins_payload, "field": field_payload,
            "retention": retention_payload}


def section_payloads(datasets, paths=None):
    """{section: JSON-able payload} for the gathered Datasets, each checked first (reports.checks:
    StoreError naming `paths[section]` for a variable, step or attribute of the wrong kind)."""
    from scoreprobe.reports.checks import check_dataset
    for name, ds in datasets.items():
        check_dataset(name, ds, (paths or {}).get(name, f"of {name}"))
    out = {name: PAYLOADS[name](ds) for name, ds in datasets.items() if name in PAYLOADS}
    if "dsm" in datasets:
        out["dsm"] = dsm_payload(datasets["dsm"], datasets.get("clocks"))
    return out
