"""Formatting and selection helpers of the scaling tables (analyses/scaling/tables.py, sections.py)."""
import math

from analyses.scaling.stats import pooled


def fmt(v, digits=0):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float) and math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.{digits}f}" if digits or abs(v) < 1e15 else f"{v:.3g}"


def ci_text(ci, digits=0, open_end="not reached"):
    """'[lo, hi]'; an infinite end reads `open_end` ("unbounded" for a fitted exponent, either end)."""
    if not math.isfinite(ci[0]) and ci[0] > 0:
        return f"[{open_end}]"
    lo = open_end if math.isinf(ci[0]) and open_end == "unbounded" else fmt(ci[0], digits)
    return f"[{lo}, {fmt(ci[1], digits) if math.isfinite(ci[1]) else open_end}]"


def pooled_cell(p, digits=0):
    """'pooled [lo, hi] (s0 / s1 / s2)'; '> pooled' for a lower bound (some seed unreached)."""
    per = " / ".join("—" if not math.isfinite(v) else fmt(v, digits) for v in p["per_seed"])
    head = f"> {fmt(p['pooled'], digits)}" if p["lower_bound"] else fmt(p["pooled"], digits)
    return f"{head} {ci_text(p['ci'], digits)} ({per})"


def select(rows, **meta):
    return [r for r in rows if all(r["meta"].get(k) == v for k, v in meta.items())]


def statuses(rs):
    return "; ".join(f"s{r['seed']}: {r['window_status']}" for r in rs)


def cells(rs, draws, keys):
    """{key: pooled} and the markdown cells of one configuration."""
    p = {k: pooled(rs, draws, k) for k in keys}
    return p, [pooled_cell(p[k], 2 if k in ("window_log10_width", "abruptness") else 0) for k in keys]
