"""The τ table and the differences of a compare Dataset (`scoreprobe.stats.compare`) as text: what
`scoreprobe compare` prints and its --report page shows. An undefined value is printed as undefined:
τ not reached "—" in the table, a difference NaN with the run that makes it so."""
import math


def _tau_text(v):
    return "—" if v is None or not math.isfinite(v) else f"{v:.0f}"


def _tau_ci_text(ds, i, key):
    if key not in ds:
        return ""
    text = _tau_text(float(ds[key].values[i]))
    if key + "_ci" in ds:
        lo, hi = (float(v) for v in ds[key + "_ci"].values[i])
        text += f" [{_tau_text(lo)}, {'not reached' if math.isinf(hi) else _tau_text(hi)}]"
    return text


def _window_text(ds, i):
    if "window_open" not in ds:
        return ""
    if not bool(ds["window_open"].values[i]):
        return "closed"
    return f"open, log10 width {float(ds['window_log10_width'].values[i]):.2f}"


def table_rows(ds):
    """(head, rows) of the τ table of a compare Dataset, as text: run, checkpoints, τ_rule, τ_novel,
    τ_mem with their CIs (rounded to steps; "—" not reached) and the window, one row per run."""
    level = round(100 * ds.attrs.get("ci", 0.95))
    head = ("run", "checkpoints", f"τ_rule [{level}% CI]", f"τ_novel [{level}% CI]", f"τ_mem [{level}% CI]",
            "window")
    rows = []
    for i, name in enumerate(ds["run"].values):
        n = int(ds["measured"].values[i].sum()) if "measured" in ds else ds.sizes["step"]
        rows.append((str(name), str(n), _tau_ci_text(ds, i, "tau_rule"), _tau_ci_text(ds, i, "tau_novel"),
                     _tau_ci_text(ds, i, "tau_mem"), _window_text(ds, i)))
    return head, rows


DIFFERENCES = (("d_log10_tau_rule", "τ_rule"), ("d_log10_tau_mem", "τ_mem"), ("d_window_log10_width", "window width"))


def _bound_text(v):
    """One end of a difference's interval: +0.123, +∞ / −∞ (a τ not reached in enough resamples), NaN."""
    if math.isnan(v):
        return "NaN"
    return ("+∞" if v > 0 else "−∞") if math.isinf(v) else f"{v:+.3f}"


def _undefined_because(ds, i, key, label):
    """Why the difference `key` of run i to the first is NaN: which run does not reach its τ (or has
    its window closed), from the τ table; a generic reason when that does not say."""
    names = [str(n) for n in ds["run"].values]
    var = "window_log10_width" if key == "d_window_log10_width" else key.replace("d_log10_", "")
    if var not in ds:
        return "not defined"
    missing = list(dict.fromkeys(names[j] for j in (0, i) if not math.isfinite(float(ds[var].values[j]))))
    if not missing:
        return "not defined"
    one = len(missing) == 1
    if var == "window_log10_width":
        return f"{' and '.join(missing)} {'has' if one else 'have'} no innovation window"
    return f"{' and '.join(missing)} {'does' if one else 'do'} not reach {label}"


def difference_text(ds, i, key, label):
    """The difference `key` of run i to the first as text: '+0.123 [+0.050, +0.200]' (an end that is not
    reached in enough resamples: ±∞), or 'NaN (r2 does not reach τ_rule)' when it is not defined."""
    d, (lo, hi) = float(ds[key].values[i]), (float(v) for v in ds[key + "_ci"].values[i])
    if not math.isfinite(d):
        return f"NaN ({_undefined_because(ds, i, key, label)})"
    text = f"{d:+.3f} [{_bound_text(lo)}, {_bound_text(hi)}]"
    return text + (" (∞: the τ is not reached in some resamples)" if math.isinf(lo) or math.isinf(hi) else "")


def difference_rows(ds):
    """[(run, reference, how, data, [(label, text)])] of each run after the first: its differences to
    the first (d_log10_tau_rule, d_log10_tau_mem, d_window_log10_width) with their CIs, as text
    (`difference_text`; NaN with its reason where undefined); how: "paired" / "independent (<what
    differs>)" bootstrap; data: "same data" / "other or unknown data"."""
    ref = ds.attrs.get("reference", str(ds["run"].values[0]))
    out = []
    for i, name in enumerate(ds["run"].values[1:], start=1):
        parts = [(label, difference_text(ds, i, key, label)) for key, label in DIFFERENCES if key in ds]
        why = str(ds["unpaired_because"].values[i]) if "unpaired_because" in ds else ""
        verb = "differ" if "," in why else "differs"
        how = "paired" if bool(ds["paired"].values[i]) else (f"independent ({why} {verb})" if why else "independent")
        out.append((str(name), ref, how, "same data" if bool(ds["same_data"].values[i]) else "other or unknown data",
                    parts))
    return out
