"""Rule clocks of a run whose data hold the pieces of a curriculum (scoreprobe.data.curriculum: a curriculum run
and its control, analyses/remedies' G = 3 preset): rule accuracy among the samples that break a piece and its τ
over thresholds, the rule accuracy compared for any run, and a run's endpoints (peak rule accuracy, the last
memorized share). Rows are scoreprobe.stats.runs.run_stats's, with the piece readings of
analyses.remedies.curriculum_rows.run_row."""
import numpy as np

from scoreprobe.data.curriculum import beyond_state
from scoreprobe.probes.wilson import wilson_lower
from scoreprobe.stats.crossings import logit_fraction, reliable_crossing

ENDPOINTS = ("peak_rule", "final_mem")


def among_breaking(state, piece):
    """Rule accuracy among the samples that break a piece: (S,) share of them valid (copies count as valid,
    as everywhere), (S,) how many there are. state, piece (S, n)."""
    _, valid = beyond_state(state, piece)
    count = (~piece).sum(axis=1)
    return (valid & ~piece).sum(axis=1) / np.maximum(count, 1), count


def breaking_taus(steps, acc, count, thresholds):
    """τ (steps; inf: not reached) of `acc` (S,) at each threshold, read as every τ is (reliably exceeds:
    definitions version 6) but with each checkpoint's own sample count in its Wilson bound (`count` (S,);
    a checkpoint without a piece-breaking sample is never confident)."""
    u, n = np.log1p(np.asarray(steps, np.float64)), np.maximum(np.asarray(count, np.float64), 1)
    y = np.asarray(acc, np.float64)[None]                                        # (1, S)
    z = logit_fraction(y, n)
    out = [reliable_crossing(u, z, logit_fraction(t, n.max()), wilson_lower(y, n) >= t)[0] for t in thresholds]
    return np.where(np.isnan(out), np.inf, np.expm1(out))


def rule_curve(row):
    """(S,) the rule accuracy compared for a run: among the piece-breaking samples for a curriculum run or its
    control (run_row), rule accuracy itself for the others."""
    return row["curve"].get("rule_acc_breaking", row["curve"]["rule_acc"])


def endpoint(row, name):
    """A run's peak rule accuracy (rule_curve) or its memorized share at the last checkpoint."""
    if name == "final_mem":
        return float(row["final_mem_ratio"])
    return float(np.max(rule_curve(row)))
