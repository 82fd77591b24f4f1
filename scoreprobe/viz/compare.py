"""Several runs overlaid: rule accuracy and memorization of each run in its own colour, τ bands."""
import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.viz.clocks import _finite, _step_axis
from scoreprobe.viz.common import _new_axes

RUN_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
              "#bcbd22")


def run_color(i):
    """The colour of the i-th run (cycling through ten)."""
    return RUN_COLORS[i % len(RUN_COLORS)]


def _band(ax, ds, i, key, color, hatch=None):
    """τ's CI of run i as a shaded vertical band (to the right edge when unbounded) and τ as a line."""
    tau = _finite(ds[key].values[i]) if key in ds else np.nan
    if key + "_ci" in ds:
        lo, hi = (_finite(v) for v in ds[key + "_ci"].values[i])
        if np.isfinite(lo):
            hi = hi if np.isfinite(hi) else ax.get_xlim()[1]
            if hatch is None:
                ax.axvspan(lo, hi, color=color, alpha=0.10, lw=0)
            else:
                ax.axvspan(lo, hi, facecolor="none", edgecolor=color, hatch=hatch, lw=0, alpha=0.5)
    if np.isfinite(tau):
        ax.axvline(tau, color=color, lw=1.0, ls="--" if hatch is None else ":")


def plot_compare(ds, ax=None):
    """rule_acc (solid) and mem_ratio (dashed) of every run of a `compare` Dataset, one colour per run;
    markers at each run's own checkpoints; τ_rule's CI as a shaded band and τ_mem's as a hatched one,
    each τ as a vertical line; the thresholds as dotted lines.

    Returns
    -------
    matplotlib Figure.
    """
    if "run" not in ds.dims or "rule_acc" not in ds or "step" not in ds.dims:
        raise ConfigError("plot_compare needs a compare() Dataset (rule_acc along run and step)")
    steps = ds["step"].values.astype(np.float64)
    fig, ax = _new_axes(ax, figsize=(8.0, 4.4))
    _step_axis(ax, steps)
    for i, name in enumerate(ds["run"].values):
        color = run_color(i)
        measured = ds["measured"].values[i] if "measured" in ds else np.ones(len(steps), bool)
        for var, ls, label in (("rule_acc", "-", f"{name}: rule_acc"), ("mem_ratio", "--", f"{name}: memorized")):
            y = ds[var].values[i]
            ax.plot(steps, y, ls, color=color, lw=1.5, label=label)
            ax.plot(steps[measured], y[measured], "o", color=color, ms=2.5)
        _band(ax, ds, i, "tau_rule", color)
        _band(ax, ds, i, "tau_mem", color, hatch="///")
    for key, default in (("rule_threshold", 0.9), ("mem_threshold", 0.1)):
        ax.axhline(float(ds.attrs.get(key, default)), color="0.4", lw=0.7, ls=":", zorder=0)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("fraction of samples")
    ax.set_title("runs compared: τ_rule CI shaded, τ_mem CI hatched", fontsize=10)
    ax.legend(fontsize=7, ncol=2 if ds.sizes["run"] > 3 else 1, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig
