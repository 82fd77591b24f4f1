"""The interface between `sweep` and what runs its steps (here, or `scoreprobe.sweep.dask`).

An executor needs two things from the sweep, both defined here so that it never imports the
sweep back: the scheduler in effect (`SCHEDULER`: None = here, one step after another;
`scoreprobe.sweep.dask.using(s)` sets it for a block) and the computation of one step
(`run_step(probe, getter, step, identify)`, a pure function of its arguments that a worker process can run).
`sweep` decides which steps to run, hands them to the executor and writes what comes back.
"""
import contextvars

import numpy as np

STEP_ATTRS = {"units": "1", "long_name": "training step"}
MODEL_ATTR = "scoreprobe_model"   # a step's Dataset carries the identity of its model here, until it is written

# What scheduler=None means: local, unless set by `scoreprobe.sweep.dask.using(...)`.
SCHEDULER = contextvars.ContextVar("scoreprobe_scheduler", default=None)

# The steps of the model(s) a probe call measures: (step,), or the K steps of a stacked pass, in the order of the
# stack; None outside a sweep. A probe may read it (basins' warm start records which step seeded a map).
PROBE_STEPS = contextvars.ContextVar("scoreprobe_probe_steps", default=None)


def call_probe(probe, model, steps):
    """probe(model) with PROBE_STEPS set to `steps` (a tuple of ints) meanwhile."""
    token = PROBE_STEPS.set(tuple(int(s) for s in steps))
    try:
        return probe(model)
    finally:
        PROBE_STEPS.reset(token)


def with_step(ds, step):
    """Add a length-1 `step` dimension (int64 coordinate, CF attrs) in front of every data variable."""
    ds = ds.expand_dims({"step": np.array([step], dtype=np.int64)})
    ds["step"].attrs.update(STEP_ATTRS)
    return ds


def run_step(probe, getter, step, identify=None):
    """The probe's Dataset at one step, with its `step` dimension; the model lives only meanwhile.
    With `identify` (a `scoreprobe.sweep.identity.Identifier`) the identity of the model it
    measured is in attrs[MODEL_ATTR], for the store's record."""
    model = getter()
    ident = identify(model, step) if identify is not None else None
    return identified(with_step(call_probe(probe, model, (step,)), step), identify, ident)


def identified(ds, identify, ident):
    """`ds` carrying `ident` in attrs[MODEL_ATTR] (unchanged without `identify`)."""
    if identify is not None:
        ds.attrs[MODEL_ATTR] = ident
    return ds
