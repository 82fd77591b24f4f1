"""Basin-evolution animations: one frame per checkpoint; GIF through Pillow, MP4 through ffmpeg."""
import logging
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from scoreprobe.errors import ConfigError
from scoreprobe.viz.common import _new_axes, _pick_level

logger = logging.getLogger(__name__)
from scoreprobe.viz.plane import _draw_basins, _fraction_text


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


