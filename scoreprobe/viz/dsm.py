"""DSM figures: loss by σ (train vs held-out, oracle references) and the gap heatmap (σ × step)."""
import numpy as np
from matplotlib.ticker import FuncFormatter, MaxNLocator

from scoreprobe.errors import ConfigError
from scoreprobe.viz.common import _new_axes
from scoreprobe.viz.steps import step_ticks


DSM_BAND = (0.2, 2.0)   # σ range where the rule / memorization transitions live (shaded); dsm_summary's default band
BAND_LABEL = "σ band {:g}–{:g} (intermediate noise)"   # dsm_summary's band, the CLI table's mean


def _dsm_steps(ds, steps, max_steps=10):
    """The steps to draw: all given, else all of the series up to `max_steps`, else `max_steps` spread
    over it ([None] if no step dim); the figure's title says when not every step is drawn."""
    if "step" not in ds.dims:
        return [None]
    have = [int(s) for s in ds.step.values]
    if steps is None:
        idx = np.unique(np.round(np.linspace(0, len(have) - 1, min(max_steps, len(have)))).astype(int))
        return [have[i] for i in idx]
    steps = [int(s) for s in np.atleast_1d(steps)]
    missing = [s for s in steps if s not in have]
    if missing:
        raise ConfigError(f"steps {missing} are not in the data; available: {have}")
    return steps


def _split_curve(da, split):
    """Mean over the finite items of one split (NaN/inf losses are dropped, as in dsm_by_sigma's
    `loss_train_mean` / `loss_heldout_mean`): (sigma,) values, or None when the split is empty."""
    mask = np.asarray(da.split.values) == split
    if not mask.any():
        return None
    x = np.asarray(da.values, dtype=np.float64)[..., mask]
    fin = np.isfinite(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(fin, x, 0.0).sum(-1) / fin.sum(-1)        # NaN where no item is finite


def plot_dsm(ds, steps=None, ax=None, weighted=False, oracles=True):
    """DSM loss vs σ, training items (solid) vs held-out items (dashed), one colour per step,
    with the memorizer (grey) and rule-oracle (black) reference curves.

    Parameters
    ----------
    ds : Dataset from `dsm_by_sigma` (dims [step,] sigma, sample; coordinate split).
    steps : int or list of int, steps to draw (default: every step up to 10, else 10 spread over
        the series, and the title says so).
    weighted : plot the EDM-weighted loss λ(σ)·loss (log y axis) instead of the plain one.
    oracles : draw the reference curves when present.
    """
    if "loss" not in ds:
        raise ConfigError("plot_dsm needs a Dataset from dsm_by_sigma()")
    from matplotlib import colormaps
    from matplotlib.lines import Line2D

    fig, ax = _new_axes(ax, figsize=(6.2, 4.4))
    sig = ds.sigma.values
    chosen = _dsm_steps(ds, steps)
    colors = colormaps["viridis"](np.linspace(0.0, 0.9, len(chosen)))
    name = "loss_weighted" if weighted else "loss"
    for step, c in zip(chosen, colors):
        d = ds if step is None else ds.sel(step=step)
        for split, ls in (("train", "-"), ("heldout", "--")):
            y = _split_curve(d[name], split)
            if y is not None:
                ax.plot(sig, y, ls, color=c, lw=1.6, label=(f"step {step}" if step is not None and split == "train"
                                                             else None))
    lam = _dsm_weight(ds) if weighted else 1.0
    for var, color, label in (("mem_loss", "#ff9f1c", "memorizer"), ("rule_loss", "#2ca02c", "rule oracle")):
        if oracles and var in ds:  # wide translucent bands under the model's curves
            for split, ls in (("train", "-"), ("heldout", "--")):
                y = _split_curve(ds[var], split)
                if y is not None:
                    ax.plot(sig, lam * y, ls, color=color, lw=5, alpha=0.35, zorder=1,
                            label=f"{label} (reference)" if split == "train" else None)
    ax.axvspan(*DSM_BAND, color="0.93", zorder=0, label=BAND_LABEL.format(*DSM_BAND))
    ax.set_xscale("log")
    if weighted:
        ax.set_yscale("log")
    ax.set_xlabel("noise level σ")
    ax.set_ylabel("EDM-weighted DSM loss" if weighted else "DSM loss ‖D(x+σε,σ) − x‖² / D")
    n_all = ds.sizes.get("step", 1)
    ax.set_title("DSM loss by σ" + (f", step {chosen[0]}" if len(chosen) == 1 and chosen[0] is not None else "")
                 + (f" ({len(chosen)} of {n_all} checkpoints drawn)" if steps is None and len(chosen) < n_all else ""))
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="0.3", ls="-"), Line2D([], [], color="0.3", ls="--")]
    labels += ["training items (mean)", "held-out items (mean)"]
    ax.legend(handles, labels, fontsize=7, ncol=2, loc="center left", title="colour: step; line style: items",
              title_fontsize=7)   # middle left: below the memorizer's held-out plateau, above the zeros
    return fig


def _dsm_weight(ds):
    """λ(σ) with the stored σ_data (the first step's when it varies)."""
    sd = float(np.atleast_1d(ds["sigma_data"].values)[0]) if "sigma_data" in ds else 1.0
    s = ds.sigma.values
    return (s**2 + sd**2) / (s * sd) ** 2


def _log_edges(c):
    """Cell edges around increasing positive centres, midpoints in log space: (n+1,)."""
    c = np.asarray(c, dtype=np.float64)
    if len(c) == 1:
        return np.array([c[0] / 1.5, c[0] * 1.5])
    lc = np.log(c)
    mid = (lc[1:] + lc[:-1]) / 2
    return np.exp(np.concatenate([[2 * lc[0] - mid[0]], mid, [2 * lc[-1] - mid[-1]]]))


def _gap_step_axis(ax, steps, log_x):
    """Log step axis with `step_ticks`; else one column per step, a few of them labelled (rotated)."""
    if log_x:
        ax.set_xscale("log")
        step_ticks(ax)
        return

    def label(i, pos=None):   # column index -> its step
        return str(int(steps[int(i)])) if float(i).is_integer() and 0 <= i < len(steps) else ""

    ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", integer=True))   # as many as fit the axis
    ax.xaxis.set_major_formatter(FuncFormatter(label))
    ax.tick_params(axis="x", labelrotation=90, labelsize=7)


def plot_dsm_gap(ds, ax=None, tau_rule=None, tau_mem=None):
    """Heatmap over (step, σ) of the held-out − training DSM loss gap (log σ axis, and log step
    axis when every step is positive); red = held-out items are denoised worse (memorization).
    Black dots: `first_significant_sigma` per step (smallest σ with gap z > 3), when present.

    Parameters
    ----------
    ds : Dataset from `dsm_by_sigma` over a series (variable gap (step, sigma)).
    tau_rule, tau_mem : optional steps drawn as vertical lines.
    """
    if "gap" not in ds:
        raise ConfigError("plot_dsm_gap needs a Dataset from dsm_by_sigma()")
    from matplotlib.colors import TwoSlopeNorm

    gap = ds["gap"] if "step" in ds["gap"].dims else ds["gap"].expand_dims(step=[0])
    steps = gap.step.values.astype(np.float64)
    z = gap.transpose("sigma", "step").values                                    # (sigma, step)
    fig, ax = _new_axes(ax, figsize=(6.2, 4.4))
    log_x = bool(np.all(steps > 0))
    x = _log_edges(steps) if log_x else np.arange(len(steps) + 1) - 0.5
    vmax = float(np.nanpercentile(np.abs(z), 99)) if np.isfinite(z).any() else 1.0
    vmax = vmax if vmax > 0 else 1.0
    mesh = ax.pcolormesh(x, _log_edges(ds.sigma.values), z, cmap="RdBu_r",
                         norm=TwoSlopeNorm(0.0, -vmax, vmax), shading="flat")
    fig.colorbar(mesh, ax=ax, label="held-out − training DSM loss")
    ax.set_yscale("log")
    _gap_step_axis(ax, steps, log_x)
    for i, s in enumerate(DSM_BAND):
        ax.axhline(s, color="0.4", lw=0.6, ls=":", label=None if i else BAND_LABEL.format(*DSM_BAND))
    xs = steps if log_x else np.arange(len(steps))
    ax.plot(xs, np.full(len(xs), 1.0), "v", ms=4, color="0.2", transform=ax.get_xaxis_transform(), clip_on=False,
            label="computed checkpoints (one column each)")
    if "first_significant_sigma" in ds:
        star = np.atleast_1d(ds["first_significant_sigma"].values).astype(np.float64)       # (step,)
        if np.isfinite(star).any():
            ax.plot(steps if log_x else np.arange(len(steps)), star, "k.", ms=5, label="smallest σ with gap z > 3")
    for tau, label in ((tau_rule, "τ_rule"), (tau_mem, "τ_mem")):
        if tau is not None and log_x and np.isfinite(tau):
            ax.axvline(float(tau), color="k", lw=1.0, ls="--")
            ax.text(float(tau), ax.get_ylim()[1], label, fontsize=8, ha="left", va="top")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_xlabel("training step")
    ax.set_ylabel("noise level σ")
    ax.set_title("DSM generalization gap", pad=10)
    return fig


