"""Clock figures: rule accuracy / memorization vs step with τ lines, and stacked endpoint states."""
import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.viz.common import STATE_COLORS, _new_axes
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
    from scoreprobe.probes.taus import taus
    return taus(ds, n_boot=0, warn=False)


def plot_clocks(ds, ax=None):
    """Rule accuracy and memorization vs training step, τ_rule / τ_mem lines, innovation window shaded.

    Parameters
    ----------
    ds : Dataset from `clocks` (dims step, sample) or its store.

    Returns
    -------
    matplotlib Figure.
    """
    if "step" not in ds.dims or "rule_acc" not in ds:
        raise ConfigError("plot_clocks needs a clocks() Dataset over several steps")
    ds = ds.sortby("step")
    steps = ds.step.values.astype(np.float64)
    fig, ax = _new_axes(ax, figsize=(6.0, 4.0))
    for name, label, color, ls in CLOCK_CURVES:
        if name in ds:
            ax.plot(steps, ds[name].values, ls, color=color, marker="o", ms=3, label=label)
    t = _clock_taus(ds)
    tau_rule, tau_mem = (float("nan") if t[k] is None else float(t[k]) for k in ("tau_rule", "tau_mem"))
    for tau, label, color in ((tau_rule, "τ_rule", "#2ca02c"), (tau_mem, "τ_mem", "#ff9f1c")):
        if np.isfinite(tau):
            ax.axvline(tau, color=color, lw=1.2, ls="--")
            ax.text(tau, 1.02, f"{label}={tau:.0f}", color=color, fontsize=8, ha="center", va="bottom",
                    transform=ax.get_xaxis_transform())
    for i, (lo, hi) in enumerate(t.get("window_intervals") or []):   # rule_acc >= 0.9 and mem_ratio < 0.1
        ax.axvspan(lo, hi, color="#2ca02c", alpha=0.12, lw=0, label=None if i else "innovation window")
    _step_axis(ax, steps)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("fraction of samples")
    ax.legend(fontsize=8, loc="best")
    ax.set_title("the two clocks", pad=14)
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
                 labels=[n.replace("_", " ") for n in names], alpha=0.9)
    _step_axis(ax, steps)
    ax.set_ylim(0, 1)
    ax.set_ylabel("fraction of samples")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("endpoint states")
    return fig
