"""What a study reads off the loss crossover (`scoreprobe.probes.crossover.crossover_json`,
`excess_by_n`): the share of the generalizer's excess the network has closed at its clocks, the log-log slope of a
quantity in N, and that slope per data seed with its t interval over the seeds."""
import numpy as np

from scoreprobe.stats.unit_intervals import t_triple


def gap_closed(cross, taus):
    """(L_rule − L_net)/(L_rule − L_mem) of the σ-averaged training losses per step, and interpolated
    (in ln(step + 1)) at τ_rule and τ_mem -> {"per_step": {step: share}, "at": {"tau_rule", "tau_mem"}}."""
    avg = dict(zip(cross["oracle"], cross["oracle_loss_avg"]))
    g = (avg["rule"] - np.array(cross["loss_avg"])) / (avg["rule"] - avg["memorizer"])
    x = np.log(np.array(cross["steps"], float) + 1)
    at = {k: float(np.interp(np.log(taus[k] + 1), x, g)) for k in ("tau_rule", "tau_mem")}
    return {"per_step": dict(zip(map(str, cross["steps"]), g.round(4).tolist())), "at": at}


def loglog_slope(x, y):
    """Least-squares slope of log y on log x (None with fewer than 2 positive points)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = (x > 0) & (y > 0) & np.isfinite(y)
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0]) if ok.sum() >= 2 else None


def excess_slopes(ex):
    """The excess-vs-N log-log slope per data seed and its t interval over the seeds ([mean, lo, hi])."""
    by = ex.get("excess_by_seed") or [ex["excess"]]
    per = [loglog_slope(ex["N"], row) for row in by]
    return {"seeds": ex.get("excess_seeds", [0]), "per_seed": per,
            "interval": t_triple([np.nan if v is None else v for v in per])}


def over_models(tau):
    """Mean of per-model τ_cross with a t interval (M − 1 df) -> {"mean", "mean_lo", "mean_hi"}; None where
    undefined (< 2 models for the interval, or one never crosses: a mean of "never" is no number)."""
    return dict(zip(("mean", "mean_lo", "mean_hi"), t_triple(tau)))
