"""The cells of a study's markdown tables read from its report dict (JSON: a missing number is None): numbers,
steps, p-values, 'mean [lo, hi]' of a per-step curve, a τ with its interval, the innovation window."""
import math

NR = "not reached"


def finite(v):
    """v is a finite int or float (None, NaN and ±inf are not)."""
    return isinstance(v, (int, float)) and math.isfinite(v)


def num(v, d=3):
    """v with d decimals; '—' when it is not a finite number."""
    return f"{v:.{d}f}" if finite(v) else "—"


def step_text(v, missing=NR):
    """A step, rounded; `missing` ('not reached') when it is not a finite number."""
    return f"{v:.0f}" if finite(v) else missing


def interval(lo, hi, d=2):
    """'[lo, hi]' with d decimals ('—' for an undefined end)."""
    return f"[{num(lo, d)}, {num(hi, d)}]"


def p_text(p):
    """A p-value: two significant digits, '< 1e-4' below, '—' when undefined."""
    return "—" if p is None or not finite(p) else f"{p:.2g}" if p >= 1e-4 else "< 1e-4"


def curve_cell(c, i, d=3):
    """'mean [lo, hi]' of a curve {"mean", "lo", "hi"} at step index i; '—' without a curve or a finite mean."""
    if c is None or not finite(c["mean"][i]):
        return "—"
    return f"{num(c['mean'][i], d)} {interval(c['lo'][i], c['hi'][i], d)}"


def tau_cell(t, key):
    """'τ [lo, hi]' of t[key] with its t[key + '_ci'] (steps); 'not reached' alone when τ is not a number."""
    v, ci = t.get(key), t.get(key + "_ci") or [None, None]
    return step_text(v) if not finite(v) else f"{step_text(v)} [{step_text(ci[0])}, {step_text(ci[1])}]"


def window_text(t):
    """'closed', or the window's intervals 'a–b ∪ c–d' (steps) of t["window_intervals"]."""
    if not t.get("window_open"):
        return "closed"
    return " ∪ ".join(f"{step_text(a)}–{step_text(b)}" for a, b in t.get("window_intervals") or [])
