"""scoreprobe: when does a diffusion model learn the rule, and when does it start copying?

The public API is re-exported here; nothing is defined in this file.
"""
import logging as _logging
import os as _os
import sys as _sys

# Tiny models on a few shared cores: OpenMP worker threads that spin while waiting make torch
# up to ~10x slower when another process holds a core. Passive waiting costs nothing measurable
# here; it only applies when torch is not imported yet, and an explicit setting wins.
if "torch" not in _sys.modules:
    _os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_logging.getLogger(__name__).addHandler(_logging.NullHandler())

from scoreprobe.errors import CheckpointError, ConfigError, DataError, ScoreprobeError, StoreError  # noqa: E402,F401
from scoreprobe.rules import ExactK, LatinSquare, Parity, RowK, Sudoku, rule_from_spec  # noqa: E402,F401
from scoreprobe.data import BitIndex, Dataset, load_dataset, make_dataset, to_bits, to_signed  # noqa: E402,F401
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser  # noqa: E402,F401
from scoreprobe.ode import edm_sigmas, integrate, randn_per_sample, sample  # noqa: E402,F401
from scoreprobe.probes.dsm import dsm_by_sigma, dsm_summary  # noqa: E402,F401
from scoreprobe.store import open_store, written_steps  # noqa: E402,F401
from scoreprobe.sweep import sweep  # noqa: E402,F401
from scoreprobe.probes.clocks import clocks, fit_power_law, taus  # noqa: E402,F401
from scoreprobe.slices import Plane, auto_plane, classify, plane_from_spec  # noqa: E402,F401
from scoreprobe.probes.field import score_field  # noqa: E402,F401
from scoreprobe.probes.basins import basins, retention  # noqa: E402,F401
from scoreprobe.viz import animate_basins, plot_basins, plot_dsm, plot_dsm_gap, plot_field, plot_retention  # noqa: E402,F401
from scoreprobe.viz import plot_clocks, plot_states  # noqa: E402,F401
from scoreprobe.checkpoints import CheckpointSeries, load_checkpoint, load_series, series_from_files  # noqa: E402,F401

__version__ = "0.1.0"
