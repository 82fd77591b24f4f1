"""Clock figures: rule accuracy / memorization vs step with τ lines, and stacked endpoint states."""
import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.viz.common import STATE_COLORS, STATE_LABELS, _new_axes
from scoreprobe.viz.steps import step_ticks


CLOCK_CURVES = (("rule_acc", "rule accuracy", "#2ca02c", "-"), ("group_acc", "group accuracy", "#2ca02c", ":"),
                ("novel_valid", "valid, not a copy", "#9467bd", "-."),
                ("mem_ratio", "memorized", "#ff9f1c", "-"), ("heldout_hit", "held-out", "#1f77b4", "--"))
STATE_RATIOS = (("invalid", "invalid_ratio"), ("rule_violating", "violating_ratio"), ("valid_novel", "novel_ratio"),
                ("valid_heldout", "heldout_hit"), ("valid_memorized", "mem_ratio"))


def _step_axis(ax, steps):
    """Log-like x axis that keeps step 0: symlog, linear below the first positive checkpoint; plain,
    non-overlapping step labels (`step_ticks`)."""
    positive = steps[steps > 0]
    ax.set_xscale("symlog", linthresh=float(positive.min()) if positive.size else 1.0, linscale=0.3)
    if steps.max() > steps.min():  # a single checkpoint keeps matplotlib's automatic limits
        ax.set_xlim(float(steps.min()), float(steps.max()))
    step_ticks(ax)
    ax.set_xlabel("training step")


def _clock_taus(ds):
    """τ values from the attrs written by clocks(), else computed from the curves."""
    if "tau_rule" in ds.attrs and "window_intervals" in ds.attrs:
        return ds.attrs
    from scoreprobe.stats.taus import tau_summary
    return tau_summary(ds, n_boot=0, warn=False)


TAU_MARKS = (("tau_rule", "τ_rule", "#2ca02c", "rule_threshold"), ("tau_mem", "τ_mem", "#ff9f1c", "mem_threshold"))


def _finite(v):
    """float(v), NaN for None; inf stays inf."""
    return float("nan") if v is None else float(v)


def _draw_tau_ci(ax, tau, ci, y, color):
    """τ's CI as a horizontal bar at height y (the threshold where τ is read), capped at its finite
    ends; an end at +inf (not reached in enough resamples) is an arrow to the right edge instead."""
    lo, hi = (_finite(v) for v in ci)
    if not np.isfinite(lo):
        return
    kw = dict(color=color, lw=2.6, alpha=0.75, solid_capstyle="butt", zorder=4)
    ax.plot([lo], [y], "|", ms=9, mew=2, color=color, zorder=4)
    if np.isfinite(hi):
        ax.plot([lo, hi], [y, y], **kw)
        ax.plot([hi], [y], "|", ms=9, mew=2, color=color, zorder=4)
    else:
        ax.annotate("", xy=(ax.get_xlim()[1], y), xytext=(lo, y), zorder=4,
                    arrowprops={"arrowstyle": "-|>", "color": color, "lw": 2.6, "alpha": 0.75, "shrinkA": 0,
                                "shrinkB": 0, "mutation_scale": 14})
    if np.isfinite(tau):
        ax.plot([tau], [y], "D", ms=5, color=color, mec="black", mew=0.6, zorder=5)


def plot_clocks(ds, ax=None):
    """Rule accuracy and memorization vs training step, τ_rule / τ_mem lines with their CIs, the
    thresholds they are read at, innovation window shaded.

    The CI of each τ (attrs `<tau>_ci`, from `taus`) is a bar on its threshold line (a diamond at τ);
    an unbounded end (τ not reached in more than (1 − ci)/2 of the bootstrap resamples) is an arrow.

    Parameters
    ----------
    ds : Dataset from `clocks` (dims step, sample) or its store.

    Returns
    -------
    matplotlib Figure.
    """
    from matplotlib.lines import Line2D
    if "step" not in ds.dims or "rule_acc" not in ds:
        raise ConfigError("plot_clocks needs a clocks() Dataset over several steps")
    ds = ds.sortby("step")
    steps = ds.step.values.astype(np.float64)
    fig, ax = _new_axes(ax, figsize=(7.6, 4.0))
    for name, label, color, ls in CLOCK_CURVES:
        if name in ds:
            ax.plot(steps, ds[name].values, ls, color=color, marker="o", ms=3, label=label)
    t = _clock_taus(ds)
    for i, (lo, hi) in enumerate(t.get("window_intervals") or []):   # rule_acc >= 0.9 and mem_ratio < 0.1
        ax.axvspan(lo, hi, color="#2ca02c", alpha=0.12, lw=0, label=None if i else "innovation window")
    _step_axis(ax, steps)
    has_ci = False
    for key, label, color, th in TAU_MARKS:
        tau, y = _finite(t.get(key)), float(t.get(th, 0.9 if key == "tau_rule" else 0.1))
        ax.axhline(y, color=color, lw=0.7, ls=":", zorder=0)
        if np.isfinite(tau):
            ax.axvline(tau, color=color, lw=1.2, ls="--")
            ax.text(tau, 1.01, f"{label}={tau:.0f}", color=color, fontsize=8, ha="center", va="bottom",
                    transform=ax.get_xaxis_transform())
        if t.get(key + "_ci") is not None:
            _draw_tau_ci(ax, tau, t[key + "_ci"], y, color)
            has_ci = True
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("fraction of samples")
    handles, labels = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="0.4", lw=0.7, ls=":"))
    labels.append(f"thresholds: rule {t.get('rule_threshold', 0.9):g}, memorized {t.get('mem_threshold', 0.1):g}")
    if has_ci:
        handles.append(Line2D([], [], color="0.4", lw=2.6, marker="D", ms=4, mfc="0.4", mec="black"))
        labels.append(f"τ and its {100 * float(t.get('ci', 0.95)):g}% CI (→ unbounded)")
    if ax.get_position().width * fig.get_figwidth() >= 4.0:      # room for the legend beside the axes
        ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(handles, labels, fontsize=6, loc="best", framealpha=0.8)
    ax.set_title("the two clocks", pad=16)
    return fig


def _state_fractions(ds):
    """(5, n_steps) fractions of the five states, from the per-step ratios or from `state`."""
    if all(r in ds for _, r in STATE_RATIOS):
        return np.stack([ds[r].values for _, r in STATE_RATIOS])
    from scoreprobe.data.datasets import STATE_CODES
    state = ds["state"].transpose("step", "sample").values  # (step, sample)
    return np.stack([(state == STATE_CODES[name]).mean(axis=1) for name, _ in STATE_RATIOS])


def plot_states(ds, ax=None):
    """Stacked area of the five endpoint states over training steps.

    Parameters
    ----------
    ds : Dataset from `clocks` (dims step, sample).

    Returns
    -------
    matplotlib Figure.
    """
    if "step" not in ds.dims or ("state" not in ds and "mem_ratio" not in ds):
        raise ConfigError("plot_states needs a clocks() Dataset over several steps")
    ds = ds.sortby("step")
    steps = ds.step.values.astype(np.float64)
    fig, ax = _new_axes(ax, figsize=(6.0, 4.0))
    names = [name for name, _ in STATE_RATIOS]
    ax.stackplot(steps, _state_fractions(ds), colors=[STATE_COLORS[n] for n in names],
                 labels=[STATE_LABELS.get(n, n.replace("_", " ")) for n in names], alpha=0.9)
    _step_axis(ax, steps)
    ax.set_ylim(0, 1)
    ax.set_ylabel("fraction of samples")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("endpoint states")
    return fig
