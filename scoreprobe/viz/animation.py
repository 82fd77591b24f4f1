"""Basin-evolution animations: one frame per checkpoint; GIF through Pillow, MP4 through ffmpeg."""
import logging
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from scoreprobe.atomic import atomic_path
from scoreprobe.defaults import ANIMATION_DPI, ANIMATION_SIZE
from scoreprobe.errors import ConfigError
from scoreprobe.viz.common import _new_axes, _pick_level, save_gif
from scoreprobe.viz.plane import _draw_basins, _fraction_text

logger = logging.getLogger(__name__)


def _frames(ds, sigma_start, dpi, size):
    """RGB uint8 frames (one per step) of the basin map at `sigma_start`: (H, W, 3) each,
    H, W = round(size[1] * dpi), round(size[0] * dpi)."""
    fig, ax = _new_axes(None, figsize=size)
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


def animate_basins(ds_or_path, path, fps=4, sigma_start=None, dpi=ANIMATION_DPI, size=ANIMATION_SIZE):
    """Animate a basin map over training steps: one frame per step, the step and the state
    fractions in the title.

    Parameters
    ----------
    ds_or_path : Dataset from `basins` (usually with a step dim) or the path of its zarr store.
    path : output file, ".gif" (Pillow, always available) or ".mp4" (needs ffmpeg).
    fps : frames per second.
    sigma_start : starting noise level to show (nearest available; default: the middle one).
    dpi : pixels per inch of the frames (default 160: 992 x 704 px at the default size).
    size : (width, height) of each frame in inches (default (6.2, 4.4)); text keeps its size in
        inches, so a larger `size` gives the map more room and a larger `dpi` only more pixels.

    Returns
    -------
    pathlib.Path of the written file.
    """
    import xarray as xr

    path = Path(path)
    ext = path.suffix.lower()
    if ext not in (".gif", ".mp4"):
        raise ConfigError(f"cannot write an animation to {path.name!r}: use a .gif or .mp4 file name")
    from scoreprobe.limits import FPS_RANGE, check_real
    fps = check_real(fps, "fps", *FPS_RANGE)   # 1e-300 would make the frame duration infinite
    size = check_frame(dpi, size)
    if not isinstance(ds_or_path, xr.Dataset):
        from scoreprobe.store import open_store
        ds_or_path = open_store(ds_or_path)
    if "endpoint_state" not in ds_or_path:
        raise ConfigError("animate_basins needs a basins Dataset or store (scoreprobe basins --out ...)")
    if ext == ".mp4":
        _check_ffmpeg()
    frames = _frames(ds_or_path, sigma_start, dpi, size)
    path.parent.mkdir(parents=True, exist_ok=True)
    if ext == ".gif":
        _write_gif(frames, path, fps)
    else:
        _write_mp4(frames, path, fps)
    logger.info("wrote %d frames to %s", len(frames), path)
    return path


def check_frame(dpi, size):
    """(w, h) inches as floats; ConfigError unless dpi and both sides are positive and a frame has at
    most MAX_FRAME_PX pixels a side."""
    from scoreprobe.limits import MAX_FRAME_PX, check_positive
    if isinstance(size, (str, bytes)) or np.ndim(size) != 1 or len(size) != 2:
        raise ConfigError(f"size must be (width, height) in inches, got {size!r}")
    dpi = check_positive(dpi, "dpi")
    w, h = (check_positive(x, f"size[{i}]") for i, x in enumerate(size))
    if max(w, h) * dpi > MAX_FRAME_PX:
        raise ConfigError(f"frames of {w * dpi:.0f} x {h * dpi:.0f} px are too large (at most {MAX_FRAME_PX} px "
                          "a side, scoreprobe.limits.MAX_FRAME_PX); lower dpi or size")
    return w, h


def _write_gif(frames, path, fps):
    from PIL import Image
    save_gif([Image.fromarray(f) for f in frames], path, fps)


def _check_ffmpeg():
    from matplotlib import animation
    if not animation.writers.is_available("ffmpeg"):
        raise ConfigError("writing .mp4 needs ffmpeg, which was not found (install it, or set "
                          "matplotlib's animation.ffmpeg_path); or write a .gif instead")


def _write_mp4(frames, path, fps):
    from matplotlib import animation
    h, w = (n - n % 2 for n in frames[0].shape[:2])     # even sides: H.264 (yuv420p) needs them
    frames = [f[:h, :w] for f in frames]
    fig = Figure(figsize=(w / 100, h / 100), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    im = ax.imshow(frames[0])
    writer = animation.FFMpegWriter(fps=fps)
    with atomic_path(path, keep_suffix=True) as tmp:     # ffmpeg takes the container from the suffix
        with writer.saving(fig, str(tmp), dpi=100):
            for f in frames:
                im.set_data(f)
                writer.grab_frame()


