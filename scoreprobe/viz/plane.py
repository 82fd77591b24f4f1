"""Plane figures: score field, basin maps, retention curves."""
import numpy as np
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.patches import Patch

from scoreprobe.errors import ConfigError
from scoreprobe.viz.common import (ANCHOR_COLORS, ANCHOR_MARKERS, STATE_COLORS, STATE_LABELS, _new_axes, _pick_level,
                                   _pick_step, new_figure)


def _extent(ds):
    u, v = ds.u.values, ds.v.values
    du, dv = (u[1] - u[0]) / 2, (v[1] - v[0]) / 2
    return (u[0] - du, u[-1] + du, v[0] - dv, v[-1] + dv)


def _anchor_labels(ds):
    """The three anchors' names (a, b, c of Plane.through)."""
    n = ds.sizes.get("anchor", 0)
    return [str(ds.anchor_label.values[k]) if "anchor_label" in ds else f"anchor {k}" for k in range(n)]


def _uv_axes(ax, ds):
    """Axis labels that say what u and v are: u along a -> b, v towards c at right angles
    (Plane.through; units of the signed images, docs/definitions.md 'Basin maps')."""
    names = _anchor_labels(ds)
    if len(names) == 3:
        ax.set_xlabel(f"u: along {names[0]} → {names[1]}", fontsize=8)
        ax.set_ylabel(f"v: towards {names[2]}, ⊥ u", fontsize=8)
    else:
        ax.set_xlabel("u")
        ax.set_ylabel("v")


def _mark_anchors(ax, ds):
    if "anchor_u" not in ds:
        return
    for k, label in enumerate(_anchor_labels(ds)):
        au, av = float(ds.anchor_u[k]), float(ds.anchor_v[k])
        ax.plot(au, av, ANCHOR_MARKERS[k % 3], ms=8, mfc="white", mec=ANCHOR_COLORS[k % 3], mew=1.8, zorder=5)
        ax.annotate(label, (au, av), xytext=(5, 5), textcoords="offset points", fontsize=8,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "alpha": 0.7}, zorder=6)


def _field_slice(ds, sigma, step, prefix):
    """(d, step): the field at one σ (nearest; default the middle one) and step (default the last);
    step is None when the `prefix` field has no step dim (oracle fields)."""
    if prefix + "score_u" not in ds:
        raise ConfigError(f"no {prefix}score_u in the data; compute it with score_field(..., oracles=True)"
                          if prefix else "plot_field needs a Dataset from score_field")
    d, step = _pick_step(ds, step)
    step = step if "step" in ds[prefix + "score_u"].dims else None    # oracle fields have no step
    return _pick_level(d, "sigma", sigma), step


def _log_magnitude(d, prefix):
    """log10 |score| (in-plane and off-plane parts together) of a one-σ field: (V, U)."""
    su, sv, off = (d[prefix + k].values for k in ("score_u", "score_v", "score_off_norm"))  # (V, U)
    return np.log10(np.sqrt(su ** 2 + sv ** 2 + off ** 2) + 1e-12)


def plot_field(ds, sigma=None, step=None, ax=None, prefix="", density=16, norm=None, colorbar=True):
    """Score field on the plane: |score| as background, in-plane score as arrows, anchors marked.

    Parameters
    ----------
    ds : Dataset from `score_field` (dims [step,] sigma, v, u).
    sigma : noise level (nearest available; default: the middle one).
    step : training step (default: the last) when `ds` has a step dim.
    prefix : "" for the model, "mem_" / "rule_" for the oracle fields (when computed).
    density : about this many arrows per axis.
    norm : matplotlib Normalize of the log10 |score| colours (default: this panel's min..max); pass
        one shared norm to compare panels (`plot_field_panels` does).
    colorbar : draw this panel's colorbar.
    """
    d, step = _field_slice(ds, sigma, step, prefix)
    fig, ax = _new_axes(ax)
    im = ax.imshow(_log_magnitude(d, prefix), origin="lower", extent=_extent(d), cmap="viridis", norm=norm,
                   aspect="equal")
    if colorbar:
        fig.colorbar(im, ax=ax, label="log10 |score|")
    su, sv = d[prefix + "score_u"].values, d[prefix + "score_v"].values                   # (V, U)
    k = max(1, len(d.u) // density)
    uu, vv = np.meshgrid(d.u.values[::k], d.v.values[::k])
    mag = np.hypot(su, sv)[::k, ::k] + 1e-12
    ax.quiver(uu, vv, su[::k, ::k] / mag, sv[::k, ::k] / mag, color="white", alpha=0.8, pivot="mid")
    _mark_anchors(ax, d)
    who = {"": "model", "mem_": "memorizer", "rule_": "rule oracle"}.get(prefix, prefix)
    title = f"score field ({who}), sigma={float(d.sigma):.3g}"
    ax.set_title(title + (f", step {step}" if step is not None else ""))
    _uv_axes(ax, d)
    return fig


def _shared_norm(ds, sigmas, prefixes, step, vmin, vmax):
    """One Normalize over the finite log10 |score| of every panel (vmin / vmax override its ends)."""
    from matplotlib.colors import Normalize
    vals = np.concatenate([_log_magnitude(_field_slice(ds, s, step, p)[0], p).ravel()
                           for s in sigmas for p in prefixes])
    vals = vals[np.isfinite(vals)]
    lo, hi = (float(vals.min()), float(vals.max())) if vals.size else (0.0, 1.0)
    return Normalize(lo if vmin is None else float(vmin), hi if vmax is None else float(vmax))


def plot_field_panels(ds, sigmas=None, prefixes=("", "mem_", "rule_"), step=None, fig=None, density=16,
                      vmin=None, vmax=None):
    """Score fields side by side: one row per σ, one column per field (model, memorizer, rule oracle;
    those present in `ds`), all coloured on ONE log10 |score| scale with one shared colorbar.

    Parameters
    ----------
    ds : Dataset from `score_field` (dims [step,] sigma, v, u), with `oracles=True` for the oracle columns.
    sigmas : noise levels, one row each (nearest available; default: every σ in `ds`).
    prefixes : fields to show, in column order: "" model, "mem_" memorizer, "rule_" rule oracle;
        those absent from `ds` are skipped.
    step : training step of the model field (default: the last) when `ds` has a step dim.
    fig : Figure or SubFigure to draw on (default: a new one sized to the grid).
    density : about this many arrows per axis in each panel.
    vmin, vmax : ends of the shared log10 |score| scale (default: the min / max over all panels).

    Returns
    -------
    matplotlib Figure (or the given `fig`); axes in row-major order, then the colorbar's.
    """
    from matplotlib.cm import ScalarMappable
    prefixes = [p for p in prefixes if p + "score_u" in ds]
    if not prefixes:
        raise ConfigError("plot_field_panels needs a Dataset from score_field (none of the fields is in it)")
    sigmas = [float(s) for s in (ds.sigma.values if sigmas is None else np.atleast_1d(sigmas))]
    if not sigmas:
        raise ConfigError("plot_field_panels needs at least one sigma")
    norm = _shared_norm(ds, sigmas, prefixes, step, vmin, vmax)
    fig = new_figure((4.4 * len(prefixes) + 1.0, 3.8 * len(sigmas))) if fig is None else fig
    axes = fig.subplots(len(sigmas), len(prefixes), squeeze=False)                  # (n_sigma, n_field)
    for row, sigma in zip(axes, sigmas):
        for ax, prefix in zip(row, prefixes):
            plot_field(ds, sigma, step, ax, prefix, density, norm=norm, colorbar=False)
    fig.colorbar(ScalarMappable(norm=norm, cmap="viridis"), ax=axes.ravel().tolist(), label="log10 |score|")
    fig.suptitle(_shown_step_text(ds, step, prefixes) + "\narrows: score direction in the plane (unit length); "
                 "colour: log10 |score|", fontsize=9)
    return fig


def _shown_step_text(ds, step, prefixes):
    """Which checkpoint the panels show, out of which computed ones (the oracles have no step)."""
    if "step" not in ds.dims:
        return "score field"
    have = [int(s) for s in ds.step.values]
    shown = have[-1] if step is None else int(step)
    which = "the last" if shown == have[-1] else "one"
    text = (f"model field at step {shown}" + (f" ({which} of {len(have)} computed: {', '.join(map(str, have))})"
                                              if len(have) > 1 else ""))
    return text + ("; the oracles do not depend on the step" if len(prefixes) > 1 else "")


def _state_cmap():
    from scoreprobe.data.datasets import STATE_CODES, STATES
    colors = [STATE_COLORS[s] for s in STATES]
    codes = np.array([STATE_CODES[s] for s in STATES])
    bounds = np.concatenate([codes - 0.5, [codes[-1] + 0.5]])
    return ListedColormap(colors), BoundaryNorm(bounds, len(colors)), STATES


# memorized regions: one shade per training item reached, the largest first (the state colour first)
ITEM_COLORS = (STATE_COLORS["valid_memorized"], "#a6540b", "#ffd27f", "#6b2f0a", "#e8743b", "#c9a227", "#f7b6a0",
               "#8f5d2a")
MAX_ITEM_LABELS = 12


def _memorized_items(d):
    """[(training index, cell count)] of the items the map's endpoints equal, largest first."""
    if "endpoint_train_index" not in d:
        return []
    t = d.endpoint_train_index.values                                         # (V, U), -1 none
    items, counts = np.unique(t[t >= 0], return_counts=True)
    order = np.lexsort((items, -counts))
    return [(int(items[i]), int(counts[i])) for i in order]


def _draw_items(ax, d, items):
    """Colour the memorized cells by the training item they copy, white borders between two items'
    cells, each item's index written on it (anchors are labelled already). Returns the legend handles."""
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_rgba
    t = d.endpoint_train_index.values                                         # (V, U)
    rgba = np.zeros(t.shape + (4,))
    for k, (item, _) in enumerate(items):
        rgba[t == item] = to_rgba(ITEM_COLORS[k % len(ITEM_COLORS)])
    x0, x1, y0, y1 = _extent(d)
    ax.imshow(rgba, origin="lower", extent=(x0, x1, y0, y1), aspect="equal", interpolation="nearest", zorder=1)
    xe, ye = np.linspace(x0, x1, t.shape[1] + 1), np.linspace(y0, y1, t.shape[0] + 1)
    vi, ui = np.nonzero((t[:, 1:] != t[:, :-1]) & (t[:, 1:] >= 0) & (t[:, :-1] >= 0))   # vertical edges
    segs = [((xe[u + 1], ye[v]), (xe[u + 1], ye[v + 1])) for v, u in zip(vi, ui)]
    vi, ui = np.nonzero((t[1:] != t[:-1]) & (t[1:] >= 0) & (t[:-1] >= 0))            # horizontal edges
    segs += [((xe[u], ye[v + 1]), (xe[u + 1], ye[v + 1])) for v, u in zip(vi, ui)]
    ax.add_collection(LineCollection(segs, colors="white", linewidths=0.8, zorder=2))
    anchored = {str(a) for a in d.anchor_label.values} if "anchor_label" in d else set()
    for item, _ in items[:MAX_ITEM_LABELS]:
        if f"train:{item}" not in anchored:
            j = _label_cell(d, t == item)
            ax.text(d.u.values[j[1]], d.v.values[j[0]], f"#{item}", fontsize=7, ha="center", va="center", zorder=4,
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "alpha": 0.6, "lw": 0})
    return [Patch(color=ITEM_COLORS[k % len(ITEM_COLORS)], label=f"copies train:{item}")
            for k, (item, _) in enumerate(items[:len(ITEM_COLORS)])]


def _label_cell(d, mask):
    """(v, u) index of the cell of `mask` (V, U) deepest inside it and away from the anchors' labels."""
    from scipy.ndimage import distance_transform_edt
    depth = distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1]                # cells to the region's edge
    if "anchor_u" in d:
        du, dv = d.u.values[1] - d.u.values[0], d.v.values[1] - d.v.values[0]
        uc, vc = np.meshgrid(d.u.values, d.v.values)
        for au, av in zip(d.anchor_u.values, d.anchor_v.values):             # the label sits up-right of it
            depth = np.minimum(depth, np.hypot((uc - au) / du - 2, (vc - av) / dv - 0.5))
    return np.unravel_index(np.argmax(np.where(mask, depth, -np.inf)), mask.shape)


def _draw_basins(ax, d):
    """Draw one basin map (d: dims v, u) on ax: the endpoint states, the memorized cells shaded by the
    training item they copy, the anchors' basins outlined, a legend saying all that. Returns the
    state image artist."""
    from matplotlib.lines import Line2D
    cmap, norm, states = _state_cmap()
    im = ax.imshow(d.endpoint_state.values, origin="lower", extent=_extent(d), cmap=cmap, norm=norm,
                   aspect="equal", interpolation="nearest")
    items = _memorized_items(d)
    item_handles = _draw_items(ax, d, items) if len(items) > 1 else []
    anchor = d.endpoint_anchor.values.astype(float)                          # (V, U), -1 none
    outlined = []
    for k, name in enumerate(_anchor_labels(d)):
        if (anchor == k).any() and not (anchor == k).all():
            ax.contour(d.u.values, d.v.values, (anchor == k).astype(float), levels=[0.5],
                       colors=ANCHOR_COLORS[k % 3], linewidths=1.4, linestyles="-", zorder=3)
            outlined.append((k, name))
    _mark_anchors(ax, d)
    handles = [Patch(color=STATE_COLORS[s], label=STATE_LABELS.get(s, s.replace("_", " "))) for s in states]
    for k, name in outlined:   # one colour per anchor: its marker's edge and its basin's outline
        handles.append(Line2D([], [], color=ANCHOR_COLORS[k % 3], lw=1.4, marker=ANCHOR_MARKERS[k % 3], mfc="white",
                              label=f"basin of {name}\n(ends on it)"))
    if item_handles:
        handles += item_handles
        if len(items) > len(ITEM_COLORS):
            handles.append(Patch(color="none", label=f"+{len(items) - len(ITEM_COLORS)} more items\n(shades repeat, #index\nwritten on each)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    ax.set_anchor("W")    # the equal-aspect map shrinks towards its label, not into the legend's room
    _uv_axes(ax, d)
    return im


def _fraction_text(d):
    short = {"valid_memorized": "train", "valid_heldout": "held-out", "valid_novel": "novel",
             "rule_violating": "violating", "invalid": "non-finite"}
    frac = {str(s): float(f) for s, f in zip(d.state.values, d.fraction.values)}
    return "  ".join(f"{short.get(s, s)} {frac[s]:.2f}" for s in short if s in frac)


def plot_basins(ds, sigma_start=None, step=None, ax=None):
    """Basin map: the endpoint state of every grid point (categorical colours and legend); when the
    endpoints copy several training items, each item's cells in its own shade (white borders between
    items, its index written on it, "copies train:I" in the legend); the anchors' own basins outlined,
    one colour per anchor (its marker's edge; "basin of train:I" in the legend); the axes name the
    anchors u and v run along.

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


