"""Figures and animations (matplotlib; GIF through Pillow, MP4 through ffmpeg).

Every plot function takes a probe's Dataset, draws on `ax` when given (else on a new Figure)
and returns the Figure; nothing is shown. Figures are built with `matplotlib.figure.Figure`
(no pyplot), so they work headless with any backend.
"""
import logging
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from scoreprobe.errors import ConfigError

logger = logging.getLogger(__name__)


def _new_axes(ax, figsize=(5.0, 4.2)):
    """(fig, ax): the given axes' figure, or a new Figure with one axes."""
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _pick_step(ds, step):
    """Select one step (default: the last) when `ds` has a step dim; returns (ds, step or None)."""
    if "step" not in ds.dims:
        return ds, None
    step = int(ds.step.values[-1]) if step is None else int(step)
    if step not in set(int(s) for s in ds.step.values):
        raise ConfigError(f"step {step} is not in the data; available: {[int(s) for s in ds.step.values]}")
    return ds.sel(step=step), step


def _pick_level(ds, dim, value):
    """Select the level of `dim` nearest to `value` (default: the middle one)."""
    if value is None:
        return ds.isel({dim: len(ds[dim]) // 2})
    return ds.sel({dim: float(value)}, method="nearest")


# ---------------------------------------------------------------------------------------------
# Plane figures (score field, basins)
# ---------------------------------------------------------------------------------------------

STATE_COLORS = {
    "invalid": "#3b3b3b",
    "rule_violating": "#d62728",
    "valid_novel": "#2ca02c",
    "valid_heldout": "#1f77b4",
    "valid_memorized": "#ff9f1c",
}
ANCHOR_MARKERS = ("o", "s", "^")


def _extent(ds):
    u, v = ds.u.values, ds.v.values
    du, dv = (u[1] - u[0]) / 2, (v[1] - v[0]) / 2
    return (u[0] - du, u[-1] + du, v[0] - dv, v[-1] + dv)


def _mark_anchors(ax, ds):
    if "anchor_u" not in ds:
        return
    for k in range(ds.sizes["anchor"]):
        label = str(ds.anchor_label.values[k]) if "anchor_label" in ds else f"anchor {k}"
        au, av = float(ds.anchor_u[k]), float(ds.anchor_v[k])
        ax.plot(au, av, ANCHOR_MARKERS[k % 3], ms=8, mfc="white", mec="black", mew=1.5, zorder=5)
        ax.annotate(label, (au, av), xytext=(5, 5), textcoords="offset points", fontsize=8,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "alpha": 0.7}, zorder=6)


def plot_field(ds, sigma=None, step=None, ax=None, prefix="", density=16):
    """Score field on the plane: |score| as background, in-plane score as arrows, anchors marked.

    Parameters
    ----------
    ds : Dataset from `score_field` (dims [step,] sigma, v, u).
    sigma : noise level (nearest available; default: the middle one).
    step : training step (default: the last) when `ds` has a step dim.
    prefix : "" for the model, "mem_" / "rule_" for the oracle fields (when computed).
    density : about this many arrows per axis.
    """
    if prefix + "score_u" not in ds:
        raise ConfigError(f"no {prefix}score_u in the data; compute it with score_field(..., oracles=True)"
                          if prefix else "plot_field needs a Dataset from score_field")
    d, step = _pick_step(ds, step)
    step = step if "step" in ds[prefix + "score_u"].dims else None    # oracle fields have no step
    d = _pick_level(d, "sigma", sigma)
    su, sv, off = (d[prefix + k].values for k in ("score_u", "score_v", "score_off_norm"))  # (V, U)
    norm = np.sqrt(su ** 2 + sv ** 2 + off ** 2)
    fig, ax = _new_axes(ax)
    im = ax.imshow(np.log10(norm + 1e-12), origin="lower", extent=_extent(d), cmap="viridis", aspect="equal")
    fig.colorbar(im, ax=ax, label="log10 |score|")
    k = max(1, len(d.u) // density)
    uu, vv = np.meshgrid(d.u.values[::k], d.v.values[::k])
    mag = np.hypot(su, sv)[::k, ::k] + 1e-12
    ax.quiver(uu, vv, su[::k, ::k] / mag, sv[::k, ::k] / mag, color="white", alpha=0.8, pivot="mid")
    _mark_anchors(ax, d)
    who = {"": "model", "mem_": "memorizer", "rule_": "rule oracle"}.get(prefix, prefix)
    title = f"score field ({who}), sigma={float(d.sigma):.3g}"
    ax.set_title(title + (f", step {step}" if step is not None else ""))
    ax.set_xlabel("u")
    ax.set_ylabel("v")
    return fig


def _state_cmap():
    from scoreprobe.data import STATE_CODES, STATES
    colors = [STATE_COLORS[s] for s in STATES]
    codes = np.array([STATE_CODES[s] for s in STATES])
    bounds = np.concatenate([codes - 0.5, [codes[-1] + 0.5]])
    return ListedColormap(colors), BoundaryNorm(bounds, len(colors)), STATES


def _draw_basins(ax, d):
    """Draw one basin map (d: dims v, u) on ax; returns the image artist."""
    cmap, norm, states = _state_cmap()
    im = ax.imshow(d.endpoint_state.values, origin="lower", extent=_extent(d), cmap=cmap, norm=norm,
                   aspect="equal", interpolation="nearest")
    anchor = d.endpoint_anchor.values.astype(float)                          # (V, U), -1 none
    for k in range(d.sizes.get("anchor", 0)):
        if (anchor == k).any() and not (anchor == k).all():
            ax.contour(d.u.values, d.v.values, (anchor == k).astype(float), levels=[0.5],
                       colors="black", linewidths=1.0, linestyles="-")
    _mark_anchors(ax, d)
    handles = [Patch(color=STATE_COLORS[s], label=s.replace("_", " ")) for s in states]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    ax.set_xlabel("u")
    ax.set_ylabel("v")
    return im


def _fraction_text(d):
    short = {"valid_memorized": "train", "valid_heldout": "held-out", "valid_novel": "novel",
             "rule_violating": "violating", "invalid": "invalid"}
    frac = {str(s): float(f) for s, f in zip(d.state.values, d.fraction.values)}
    return "  ".join(f"{short.get(s, s)} {frac[s]:.2f}" for s in short if s in frac)


def plot_basins(ds, sigma_start=None, step=None, ax=None):
    """Basin map: the endpoint state of every grid point (categorical colours and legend),
    black outlines around the anchors' own basins, anchors marked.

    Parameters
    ----------
    ds : Dataset from `basins` (dims [step,] sigma_start, v, u).
    sigma_start : starting noise level (nearest available; default: the middle one).
    step : training step (default: the last) when `ds` has a step dim.
    """
    if "endpoint_state" not in ds:
        raise ConfigError("plot_basins needs a Dataset from basins()")
    d, step = _pick_step(ds, step)
    d = _pick_level(d, "sigma_start", sigma_start)
    fig, ax = _new_axes(ax, figsize=(6.2, 4.2))
    _draw_basins(ax, d)
    head = f"basins, sigma_start={float(d.sigma_start):.3g}" + (f", step {step}" if step is not None else "")
    ax.set_title(head + "\n" + _fraction_text(d), fontsize=9)
    return fig


def plot_retention(ds, step=None, ax=None):
    """Retention vs σ: mean fraction of noisy restarts that return to the item (solid) and that
    are captured by another training item (dashed), for training vs held-out items.

    Parameters
    ----------
    ds : Dataset from `retention` (dims [step,] sigma, sample; coordinate split).
    step : training step (default: the last) when `ds` has a step dim.
    """
    if "retained" not in ds:
        raise ConfigError("plot_retention needs a Dataset from retention()")
    d, step = _pick_step(ds, step)
    fig, ax = _new_axes(ax)
    colors = {"train": "#ff9f1c", "heldout": "#1f77b4", "other": "#7f7f7f"}
    for split in dict.fromkeys(str(s) for s in d.split.values):
        part = d.isel(sample=np.flatnonzero(d.split.values == split))
        c = colors.get(split, None)
        ax.plot(d.sigma, part.retained.mean("sample"), "-o", color=c, ms=3, label=f"{split}: returns to itself")
        ax.plot(d.sigma, part.captured.mean("sample"), "--s", color=c, ms=3,
                label=f"{split}: captured by another training item")
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("noise level sigma of the restart")
    ax.set_ylabel("fraction of restarts")
    ax.set_title("basin retention" + (f", step {step}" if step is not None else ""))
    ax.legend(fontsize=8)
    return fig


# ---------------------------------------------------------------------------------------------
# Animation
# ---------------------------------------------------------------------------------------------

def _frames(ds, sigma_start, dpi):
    """RGB uint8 frames (one per step) of the basin map at `sigma_start`."""
    fig, ax = _new_axes(None, figsize=(6.2, 4.4))
    fig.set_dpi(dpi)
    steps = [int(s) for s in ds.step.values] if "step" in ds.dims else [None]
    frames = []
    for step in steps:
        ax.clear()
        d = ds.sel(step=step) if step is not None else ds
        d = _pick_level(d, "sigma_start", sigma_start)
        _draw_basins(ax, d)
        head = f"step {step}" if step is not None else "basins"
        ax.set_title(f"{head}, sigma_start={float(d.sigma_start):.3g}\n{_fraction_text(d)}", fontsize=9)
        fig.canvas.draw()
        frames.append(np.asarray(fig.canvas.buffer_rgba())[..., :3].copy())  # (H, W, 3)
    return frames


def animate_basins(ds_or_path, path, fps=4, sigma_start=None, dpi=80):
    """Animate a basin map over training steps: one frame per step, the step and the state
    fractions in the title.

    Parameters
    ----------
    ds_or_path : Dataset from `basins` (usually with a step dim) or the path of its zarr store.
    path : output file, ".gif" (Pillow, always available) or ".mp4" (needs ffmpeg).
    fps : frames per second.
    sigma_start : starting noise level to show (nearest available; default: the middle one).

    Returns
    -------
    pathlib.Path of the written file.
    """
    import xarray as xr

    path = Path(path)
    ext = path.suffix.lower()
    if ext not in (".gif", ".mp4"):
        raise ConfigError(f"cannot write an animation to {path.name!r}: use a .gif or .mp4 file name")
    if fps <= 0:
        raise ConfigError(f"fps must be positive, got {fps}")
    if not isinstance(ds_or_path, xr.Dataset):
        from scoreprobe.store import open_store
        ds_or_path = open_store(ds_or_path)
    if "endpoint_state" not in ds_or_path:
        raise ConfigError("animate_basins needs a basins Dataset or store (scoreprobe basins --out ...)")
    if ext == ".mp4":
        _check_ffmpeg()
    frames = _frames(ds_or_path, sigma_start, dpi)
    path.parent.mkdir(parents=True, exist_ok=True)
    if ext == ".gif":
        _write_gif(frames, path, fps)
    else:
        _write_mp4(frames, path, fps)
    logger.info("wrote %d frames to %s", len(frames), path)
    return path


def _write_gif(frames, path, fps):
    from PIL import Image
    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(round(1000 / fps)), loop=0)


def _check_ffmpeg():
    from matplotlib import animation
    if not animation.writers.is_available("ffmpeg"):
        raise ConfigError("writing .mp4 needs ffmpeg, which was not found (install it, or set "
                          "matplotlib's animation.ffmpeg_path); or write a .gif instead")


def _write_mp4(frames, path, fps):
    from matplotlib import animation
    h, w = frames[0].shape[:2]
    fig = Figure(figsize=(w / 100, h / 100), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    im = ax.imshow(frames[0])
    writer = animation.FFMpegWriter(fps=fps)
    with writer.saving(fig, str(path), dpi=100):
        for f in frames:
            im.set_data(f)
            writer.grab_frame()


# ---------------------------------------------------------------------------------------------
# DSM figures
# ---------------------------------------------------------------------------------------------

DSM_BAND = (0.2, 2.0)   # σ range where the rule / memorization transitions live (shaded)


def _dsm_steps(ds, steps, max_steps=6):
    """The steps to draw: all given, else up to `max_steps` spread over the series ([None] if no step dim)."""
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
    """Mean over the items of one split: (sigma,) values, or None when the split is empty."""
    mask = np.asarray(da.split.values) == split
    return da.values[..., mask].mean(-1) if mask.any() else None


def plot_dsm(ds, steps=None, ax=None, weighted=False, oracles=True):
    """DSM loss vs σ, training items (solid) vs held-out items (dashed), one colour per step,
    with the memorizer (grey) and rule-oracle (black) reference curves.

    Parameters
    ----------
    ds : Dataset from `dsm_by_sigma` (dims [step,] sigma, sample; coordinate split).
    steps : int or list of int, steps to draw (default: up to 6 spread over the series).
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
    ax.axvspan(*DSM_BAND, color="0.93", zorder=0)
    ax.set_xscale("log")
    if weighted:
        ax.set_yscale("log")
    ax.set_xlabel("noise level σ")
    ax.set_ylabel("EDM-weighted DSM loss" if weighted else "DSM loss ‖D(x+σε,σ) − x‖² / D")
    ax.set_title("DSM loss by σ" + (f", step {chosen[0]}" if len(chosen) == 1 and chosen[0] is not None else ""))
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="0.3", ls="-"), Line2D([], [], color="0.3", ls="--")]
    labels += ["training items", "held-out items"]
    ax.legend(handles, labels, fontsize=7, ncol=2)
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


def plot_dsm_gap(ds, ax=None, tau_rule=None, tau_mem=None):
    """Heatmap over (step, σ) of the held-out − training DSM loss gap (log σ axis, and log step
    axis when every step is positive); red = held-out items are denoised worse (memorization).

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
    if log_x:
        ax.set_xscale("log")
    else:
        ax.set_xticks(np.arange(len(steps)), [str(int(s)) for s in steps], rotation=90, fontsize=7)
    for s in DSM_BAND:
        ax.axhline(s, color="0.4", lw=0.6, ls=":")
    for tau, label in ((tau_rule, "τ_rule"), (tau_mem, "τ_mem")):
        if tau is not None and log_x and np.isfinite(tau):
            ax.axvline(float(tau), color="k", lw=1.0, ls="--")
            ax.text(float(tau), ax.get_ylim()[1], label, fontsize=8, ha="left", va="top")
    ax.set_xlabel("training step")
    ax.set_ylabel("noise level σ")
    ax.set_title("DSM generalization gap")
    return fig


# ---------------------------------------------------------------------------------------------
# Clock figures
# ---------------------------------------------------------------------------------------------

CLOCK_CURVES = (("rule_acc", "rule accuracy", "#2ca02c", "-"), ("group_acc", "group accuracy", "#2ca02c", ":"),
                ("mem_ratio", "memorized", "#ff9f1c", "-"), ("heldout_ratio", "held-out", "#1f77b4", "--"))
STATE_RATIOS = (("invalid", "invalid_ratio"), ("rule_violating", "violating_ratio"), ("valid_novel", "novel_ratio"),
                ("valid_heldout", "heldout_ratio"), ("valid_memorized", "mem_ratio"))


def _step_axis(ax, steps):
    """Log-like x axis that keeps step 0: symlog, linear below the first positive checkpoint."""
    positive = steps[steps > 0]
    ax.set_xscale("symlog", linthresh=float(positive.min()) if positive.size else 1.0, linscale=0.3)
    if steps.max() > steps.min():  # a single checkpoint keeps matplotlib's automatic limits
        ax.set_xlim(float(steps.min()), float(steps.max()))
    ax.set_xlabel("training step")


def _clock_taus(ds):
    """τ values from the attrs written by clocks(), else computed from the curves."""
    if "tau_rule" in ds.attrs and "tau_mem" in ds.attrs:
        return {k: ds.attrs.get(k) for k in ("tau_rule", "tau_mem", "window_open")}
    from scoreprobe.probes.clocks import taus
    return taus(ds)


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
    if t.get("window_open"):
        hi = tau_mem if np.isfinite(tau_mem) else steps.max()
        ax.axvspan(tau_rule, hi, color="#2ca02c", alpha=0.12, lw=0, label="innovation window")
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
    from scoreprobe.data import STATE_CODES
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
