"""Shared helpers of the figure modules: axes creation, step / level selection, state colours."""

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from scoreprobe.errors import ConfigError


def new_figure(figsize=(5.0, 4.2)):
    """A headless Figure (Agg canvas, constrained layout); no pyplot state is touched."""
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _new_axes(ax, figsize=(5.0, 4.2)):
    """(fig, ax): the given axes' figure, or a new Figure with one axes."""
    if ax is not None:
        return ax.figure, ax
    fig = new_figure(figsize)
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


STATE_COLORS = {
    "invalid": "#3b3b3b",
    "rule_violating": "#d62728",
    "valid_novel": "#2ca02c",
    "valid_heldout": "#1f77b4",
    "valid_memorized": "#ff9f1c",
}
ANCHOR_MARKERS = ("o", "s", "^")
# One colour per anchor (marker edge, basin outline, legend entry): none is a state colour.
ANCHOR_COLORS = ("#000000", "#e6007e", "#00d5ff")
# What figures and legends call the endpoint states (the data keep the names of STATES): "invalid"
# is a non-finite endpoint, not one that breaks the rule.
STATE_LABELS = {"invalid": "non-finite", "rule_violating": "rule violating", "valid_novel": "valid novel",
                "valid_heldout": "valid held-out", "valid_memorized": "valid memorized"}


def save_figure(fig, path, dpi):
    """Write `fig` to `path` (format from its suffix, e.g. .png, .pdf, .svg; none: matplotlib's savefig.format,
    its suffix added, as savefig does) atomically (scoreprobe.atomic: an error or a full disk leaves an existing
    file as it was); returns the Path written."""
    from pathlib import Path
    import matplotlib
    from scoreprobe.atomic import atomic_path
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")     # the temporary file's name says nothing: the format is named
    if not fmt:
        fmt = matplotlib.rcParams["savefig.format"]
        path = path.with_name(f"{path.name}.{fmt}")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format=fmt)
    return path


def save_gif(images, path, fps):
    """Write PIL images as a looping GIF at `fps` frames per second to `path` atomically; returns the Path."""
    from pathlib import Path
    from scoreprobe.atomic import atomic_path
    path = Path(path)
    with atomic_path(path) as tmp:
        images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:], duration=int(round(1000 / fps)),
                       loop=0)
    return path


def agg_figure(figsize):
    """A headless Figure (Agg canvas) without a layout engine: lay it out with fig.tight_layout(), as pyplot's
    figures are; no pyplot state is touched."""
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig
