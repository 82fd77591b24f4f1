"""The cells of the study reports' markdown tables: a value and its interval as text, from JSON (None stands for
undefined, as `scoreprobe.store.json_ready` writes it)."""
import math


def num(v, fmt="{:+.2f}", none="–"):
    """`v` formatted, or `none` where it is undefined."""
    return none if v is None else fmt.format(v)


def ci_pair(ci, fmt="{:+.2f}"):
    """'[lo, hi]' of an interval [lo, hi]; 'CI open' where an end is undefined."""
    return "CI open" if not ci or any(v is None for v in ci) else f"[{fmt.format(ci[0])}, {fmt.format(ci[1])}]"


def per_model(vals, names, fmt="{:+.2f}"):
    """'s0 +0.12, s1 NaN, …': one value per model."""
    return ", ".join(f"{n} {num(v, fmt, 'NaN')}" for n, v in zip(names, vals))


def never(v, fmt="{:.0f}"):
    """A step that may not exist: 'never' for None or a non-finite value."""
    return "never" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt.format(v)


def triple(x, fmt="{:.2f}"):
    """'m [lo, hi]' of a [mean, lo, hi] triple ('—' for an undefined mean, no bracket without an interval)."""
    m, lo, hi = x
    if m is None:
        return "—"
    return fmt.format(m) + ("" if lo is None else f" [{fmt.format(lo)}, {fmt.format(hi)}]")
