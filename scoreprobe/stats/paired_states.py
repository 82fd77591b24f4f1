"""Two measurements of one model from the same initial noises (e.g. a sampler against Heun),
compared sample by sample at the last checkpoint."""
import numpy as np

from scoreprobe.data.datasets import STATE_CODES

MEMORIZED = STATE_CODES["valid_memorized"]


def paired(row, base):
    """(fraction of samples whose final state differs from `base`'s, Δ final mem_ratio, its paired s.e.): the
    same initial noise, so the difference is taken sample by sample. row, base: dicts with "final_state" (n,)
    state codes."""
    a, b = np.asarray(row["final_state"]), np.asarray(base["final_state"])                # (n,) each
    d = (a == MEMORIZED).astype(float) - (b == MEMORIZED)                                  # (n,)
    return float(np.mean(a != b)), float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))
