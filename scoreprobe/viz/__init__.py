"""Figures and animations (matplotlib; GIF through Pillow, MP4 through ffmpeg).

Every plot function takes a probe's Dataset, draws on `ax` when given (else on a new Figure)
and returns the Figure; nothing is shown. Figures are built with `matplotlib.figure.Figure`
(no pyplot), so they work headless with any backend.
"""
from scoreprobe.viz.common import new_figure  # noqa: F401
from scoreprobe.viz.plane import plot_basins, plot_field, plot_field_panels, plot_retention  # noqa: F401
from scoreprobe.viz.animation import animate_basins  # noqa: F401
from scoreprobe.viz.dsm import plot_dsm, plot_dsm_gap  # noqa: F401
from scoreprobe.viz.clocks import plot_clocks, plot_states  # noqa: F401
from scoreprobe.viz.decompose import plot_decompose  # noqa: F401
from scoreprobe.viz.circuits import plot_circuits  # noqa: F401
