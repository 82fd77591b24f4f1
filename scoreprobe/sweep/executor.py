"""The interface between `sweep` and what runs its steps (here, or `scoreprobe.sweep.dask`).

An executor needs two things from the sweep, both defined here so that it never imports the
sweep back: the scheduler in effect (`SCHEDULER`: None = here, one step after another;
`scoreprobe.sweep.dask.using(s)` sets it for a block) and the computation of one step
(`run_step(probe, getter, step)`, a pure function of its arguments that a worker process can run).
`sweep` decides which steps to run, hands them to the executor and writes what comes back.
"""
import contextvars

import numpy as np

STEP_ATTRS = {"units": "1", "long_name": "training step"}

# What scheduler=None means: local, unless set by `scoreprobe.sweep.dask.using(...)`.
SCHEDULER = contextvars.ContextVar("scoreprobe_scheduler", default=None)


def with_step(ds, step):
    """Add a length-1 `step` dimension (int64 coordinate, CF attrs) in front of every data variable."""
    ds = ds.expand_dims({"step": np.array([step], dtype=np.int64)})
    ds["step"].attrs.update(STEP_ATTRS)
    return ds


def run_step(probe, getter, step):
    """The probe's Dataset at one step, with its `step` dimension; the model lives only meanwhile."""
    return with_step(probe(getter()), step)
