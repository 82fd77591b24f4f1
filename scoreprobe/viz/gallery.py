"""A gallery of samples as pixel grids: each sample's state, the copied item, the rule's groups outlined.

Binary images (C = 1) are drawn as pixels (1 = black); one-hot puzzles (C = n symbols: Latin
squares, Sudoku) as symbols 1..n per cell ("·" for a cell with no symbol, "?" for several). The
rule's groups are outlined on top (parity groups, rows of RowK, Sudoku boxes; the frame for
ExactK), and the cells of every group the sample violates are tinted red, so a violation is visible at a
glance. Each panel's title names the state (docs/definitions.md, "Endpoint states") and, for a
copy, the index of the training item copied (for a held-out hit, the held-out item's).
"""
import math

import numpy as np

from scoreprobe.data.datasets import STATES
from scoreprobe.errors import ConfigError
from scoreprobe.limits import MAX_PANELS, check_int
from scoreprobe.viz.common import STATE_COLORS, new_figure

STATE_TEXT = {"invalid": "invalid", "rule_violating": "violating", "valid_novel": "novel",
              "valid_heldout": "held-out", "valid_memorized": "copy"}


def group_cells(rule):
    """[(rows, cols) int arrays] the grid cells of each group of `rule`, in the order of rule.group_valid."""
    C, H, W = rule.image_shape
    name = getattr(rule, "name", "")
    if C == 1 and getattr(rule, "groups", None) is not None:
        return [np.divmod(np.asarray(g), W) for g in rule.groups]
    if name == "rowk":
        return [(np.full(W, r), np.arange(W)) for r in range(H)]
    if name == "exactk":
        rr, cc = np.divmod(np.arange(H * W), W)
        return [(rr, cc)]
    if name in ("latin", "sudoku"):
        n = H
        out = [(np.full(n, r), np.arange(n)) for r in range(n)] + [(np.arange(n), np.full(n, c)) for c in range(n)]
        if name == "sudoku":
            box = box_ids(n)
            out += [np.nonzero(box == b) for b in range(n)]
        return out
    return []


def box_ids(n):
    """(n, n) Sudoku box of each cell: box_row * (n / s) + box_col for boxes of s = √n cells a side."""
    s = math.isqrt(n)
    r, c = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return (r // s) * (n // s) + c // s


def outline_ids(rule):
    """(H, W) int partition whose borders are drawn (parity groups, RowK rows, Sudoku boxes), or None."""
    C, H, W = rule.image_shape
    name = getattr(rule, "name", "")
    if name == "sudoku":
        return box_ids(H)
    if name in ("latin", "exactk"):
        return None
    ids = np.full((H, W), -1)
    for g, (rr, cc) in enumerate(group_cells(rule)):
        ids[rr, cc] = g
    return ids


def border_segments(ids):
    """[((x0, y0), (x1, y1))] the cell edges between cells of different ids of an (H, W) partition, in
    cell-edge units (cell (r, c) spans x in [c, c + 1], y in [r, r + 1]); the frame is not included."""
    H, W = ids.shape
    out = []
    for r in range(H):
        for c in range(W):
            if c + 1 < W and ids[r, c] != ids[r, c + 1]:
                out.append(((c + 1, r), (c + 1, r + 1)))
            if r + 1 < H and ids[r, c] != ids[r + 1, c]:
                out.append(((c, r + 1), (c + 1, r + 1)))
    return out


def _borders(ax, ids):
    """Thick lines on the cell edges between cells of different ids (border_segments)."""
    kw = {"color": "#ff7f0e", "lw": 2.0, "solid_capstyle": "butt"}
    for (x0, y0), (x1, y1) in border_segments(ids):
        ax.plot([x0 - 0.5, x1 - 0.5], [y0 - 0.5, y1 - 0.5], **kw)


def cell_codes(bits, shape):
    """(n, H, W) int8 what each cell of n images shows: for C = 1 its pixel (0 / 1); for one-hot
    puzzles (C > 1) its symbol 1..C, 0 for a cell with no symbol, -1 for a cell with several."""
    C, H, W = shape
    img = np.asarray(bits).reshape(-1, C, H, W)
    if C == 1:
        return img[:, 0].astype(np.int8)
    active = img.sum(axis=1)                                              # (n, H, W) symbols on in each cell
    return np.where(active == 1, img.argmax(axis=1) + 1, np.where(active == 0, 0, -1)).astype(np.int8)


def violated_groups(bits, rule):
    """(n, n_groups) bool: the groups of `rule` (group_cells order) each image violates."""
    bits = np.asarray(bits, dtype=np.uint8)
    return ~rule.group_valid(bits) if group_cells(rule) else np.zeros((len(bits), 0), bool)


def _draw_cells(ax, bits, shape):
    """One sample: pixels (C = 1) or symbols (C > 1, one-hot channels; cell_codes)."""
    C, H, W = shape
    codes = cell_codes(bits, shape)[0]
    if C == 1:
        ax.imshow(codes, cmap="gray_r", vmin=0, vmax=1, interpolation="nearest")
        return
    ax.imshow(np.ones((H, W)), cmap="gray", vmin=0, vmax=1)
    for r in range(H):
        for c in range(W):
            k = int(codes[r, c])
            text, color = (str(k), "black") if k > 0 else ("·" if k == 0 else "?", "#d62728")
            ax.text(c, r, text, ha="center", va="center", fontsize=9, color=color)
    ax.set_xlim(-0.5, W - 0.5)
    ax.set_ylim(H - 0.5, -0.5)


def state_title(state, train_index=None, heldout_index=None):
    """(text, colour) of a sample's state: "copy of #i" (the training item), "held-out #j", "novel",
    "violating", "invalid"; the colour of the state (viz.common.STATE_COLORS)."""
    name = STATES[int(state)]
    text = STATE_TEXT[name]
    if name == "valid_memorized" and train_index is not None and train_index >= 0:
        text += f" of #{int(train_index)}"
    if name == "valid_heldout" and heldout_index is not None and heldout_index >= 0:
        text += f" #{int(heldout_index)}"
    return text, STATE_COLORS[name]


def plot_gallery(bits, rule, state=None, train_index=None, heldout_index=None, ncols=8, title=None, labels=None):
    """Samples as a grid of small panels (see the module docstring).

    Parameters
    ----------
    bits : (n, D) uint8 thresholded samples; rule : their rule (image_shape, groups, group_valid).
    state : (n,) int8 codes of scoreprobe.data.STATES (None: no state titles).
    train_index, heldout_index : (n,) int (-1: none), the copied training / held-out item of each sample.
    ncols : panels per row; title : the figure's title; labels : (n,) extra text per panel (e.g. its sample index).

    Returns
    -------
    matplotlib Figure.
    """
    bits = np.asarray(bits, dtype=np.uint8)
    if bits.ndim != 2 or bits.shape[1] != rule.n_bits or len(bits) == 0:
        raise ConfigError(f"plot_gallery needs bits of shape (n >= 1, {rule.n_bits}), got {bits.shape}")
    n = len(bits)
    if n > MAX_PANELS:
        raise ConfigError(f"plot_gallery draws at most {MAX_PANELS} panels (scoreprobe.limits), got {n} samples: "
                          "pass a subset")
    ncols = max(1, min(check_int(ncols, "ncols", 1, MAX_PANELS), n))
    nrows = math.ceil(n / ncols)
    fig = new_figure((1.45 * ncols, 1.6 * nrows + (0.4 if title else 0.0)))
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    cells, ids = group_cells(rule), outline_ids(rule)
    violated = violated_groups(bits, rule)                                   # (n, n_groups)
    for i, ax in enumerate(axes):
        ax.set_xticks([])
        ax.set_yticks([])
        if i >= n:
            ax.set_axis_off()
            continue
        _draw_cells(ax, bits[i], rule.image_shape)
        for g in np.flatnonzero(violated[i]):
            rr, cc = cells[g]
            for r, c in zip(rr, cc):
                ax.add_patch(_cell_patch(r, c))
        if ids is not None:
            _borders(ax, ids)
        text, color = ("", "black") if state is None else state_title(
            state[i], None if train_index is None else train_index[i],
            None if heldout_index is None else heldout_index[i])
        if labels is not None:
            text = f"{labels[i]}: {text}" if text else str(labels[i])
        ax.set_title(text, fontsize=8, color=color, pad=2)
        for spine in ax.spines.values():
            spine.set_edgecolor(color)
            spine.set_linewidth(2.0 if state is not None else 0.8)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def _cell_patch(r, c):
    from matplotlib.patches import Rectangle
    return Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor="#d62728", alpha=0.35, lw=0, zorder=3)
