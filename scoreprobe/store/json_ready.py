"""Results as strict JSON, the rule every store attribute follows too (`store.format`): numpy scalars become Python
numbers, NaN and ±inf become null (None), tuples lists; key order is kept (a study's .json is written in the order
its results were built)."""
import numpy as np


def number_or_none(v):
    """float(v), or None for None, NaN and ±inf."""
    return None if v is None or not np.isfinite(v) else float(v)


def json_ready(v):
    """`v` (nested dicts, lists, tuples, numpy scalars) with NaN / inf as None and numpy scalars as Python ones."""
    if isinstance(v, dict):
        return {k: json_ready(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_ready(x) for x in v]
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.str_):
        return str(v)
    return v
