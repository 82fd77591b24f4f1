"""How long the missing part of a report takes on this machine, said before anything is computed.

The model (`estimate`), and what it assumes:

- a forward of the network on B rows costs `latency + B / rate` seconds; both are measured now on the
  series' last checkpoint (`measure_rate`: the median of batches of 1024 rows, the fastest of 16), so a
  busy machine gives a longer estimate. Every checkpoint is assumed to cost what the last one does (same architecture);
- clocks and the gallery: the fixed-grid sampler, 2·n_steps − 1 forwards per step, all samples of a
  checkpoint in one batch (`sizes["n_samples"]`, the gallery's few samples: there the latency dominates);
- basins and retention run the adaptive engine, which stops each row once it is decided: the forwards
  it needs per row are measured now by a pilot (`adaptive_forwards`: the engine on a coarse grid of the
  plane, and on a few noised items, at up to 3 of the checkpoints to compute), not assumed to be the
  fixed grid's 2·n_steps − 1 (which overstated these sections 2.4–5.8× on the shipped series);
- the score field: one forward per grid point and σ; its oracle fields are cheap beside it;
- the DSM loss: one forward per (item, noise draw, σ) in batches of thousands of rows, which run
  slower per row than the 1024 measured (DSM_BATCH_COST), and the memorizer's and the rule
  oracle's losses once (at their own rate, measured now when the section is to be computed);
- each section also pays per checkpoint a fixed cost: loading it, identifying the model and
  committing the step to its store, taken as PER_CHECKPOINT times one load and identity check timed
  now (the gallery: one load and check per checkpoint). It dominates at toy sizes. Not counted: importing the probes the first time in a
  process (a few seconds), and the page itself (about a second).

DSM_BATCH_COST and PER_CHECKPOINT were fitted by timing each section of reports of the shipped series
(default sizes, and the toy sizes of tests/test_report.py) against this model on a busy 2-core machine.

tests/test_issue56_item9_estimate.py (slow) times a report of the shipped series against its estimate.
"""
import time

import numpy as np

from scoreprobe.errors import ConfigError

DSM_BATCH_COST = 1.4     # per-row cost of the DSM's large batches relative to batches of 1024 (shipped series)
PER_CHECKPOINT = 2.0     # a section's fixed cost per checkpoint, in loads + identity checks of one (shipped series)
PILOT_STEPS = 3          # checkpoints the adaptive pilot runs at (first, middle and last of those to compute)
PILOT_GRID = 5           # basins pilot: grid points per axis of the plane (the same extent as the map)
PILOT_ITEMS = 4          # retention pilot: training and held-out items each, one noise draw per σ


def is_gpt(series):
    return getattr(series, "kind", "dit") == "gpt"


def calls_per_sample(sizes):
    """Forwards of one fixed-grid PF-ODE sample: Heun, two per step, Euler for the last."""
    return 2 * sizes["n_steps"] - 1


def section_rows(section, sizes, series):
    """Network rows (inputs to one forward) one checkpoint of `section` costs at `sizes` on the fixed
    grid (basins and retention: an upper bound; `estimate` replaces it by the pilot's count); for a
    GPT series, samples (each a whole ancestral draw; a GPT page shows the clocks only)."""
    if is_gpt(series):
        return sizes["n_samples"] if section == "clocks" else 0
    return section_starts(section, sizes, series) * (calls_per_sample(sizes) if section in ADAPTIVE or
                                                     section == "clocks" else 1)


ADAPTIVE = ("basins", "retention")


def section_starts(section, sizes, series):
    """Rows one checkpoint of `section` starts from: samples, grid points × σ, restarts, DSM items × draws × σ."""
    data = series.dataset
    return {
        "clocks": sizes["n_samples"],
        "basins": sizes["res"] ** 2 * len(sizes["sigma_start"]),
        "field": sizes["field_res"] ** 2 * len(sizes["sigma_start"]),
        "retention": (min(sizes["retention_items"], len(data.train)) + min(sizes["retention_items"],
                      len(data.heldout))) * sizes["retention_noise"] * len(sizes["retention_sigmas"]),
        "dsm": (len(data.train) + min(sizes["dsm_heldout"], len(data.heldout))) * sizes["dsm_noise"]
               * sizes["dsm_sigmas"],
    }[section]


def checkpoint_seconds(series, step, device="cpu"):
    """Seconds to load the checkpoint at `step` and identify its model (what a store records), timed now."""
    from scoreprobe.sweep import identity
    t0 = time.perf_counter()
    if is_gpt(series):
        series.sampler(step, device=device)
    else:
        identity.model_identity(series.denoiser(step, device=device), series.rule.n_bits)
    return time.perf_counter() - t0


def measure_rate(series, device="cpu", rows=1024, repeats=3):
    """(rows per second, seconds per forward call) of the series' last checkpoint on `device`,
    measured now from batches of `rows` and of 16 rows (~0.5 s idle); for a GPT series, (ancestral
    samples per second, 0)."""
    if is_gpt(series):
        return _sample_rate(series.sampler(series.steps[-1], device=device), max(rows // 4, 1)), 0.0
    D = series.denoiser(series.steps[-1], device=device)
    big = _seconds_per_call(D, rows, series.rule.n_bits, device, repeats)
    small = _seconds_per_call(D, 16, series.rule.n_bits, device, 9, pick=np.min)
    per_row = max(big - small, 1e-12) / (rows - 16)
    return 1.0 / per_row, max(small - 16 * per_row, 0.0)


def _seconds_per_call(D, n, n_bits, device, repeats, pick=np.median):
    """Seconds of one forward on n rows: `pick` (median, or min for the latency) over `repeats` calls
    after a warm-up, so that a call another process delayed moves it little."""
    import torch
    x, sigma = torch.randn(n, n_bits, device=device), torch.ones(n, device=device)
    times = []
    with torch.no_grad():
        D(x, sigma)   # warm-up: the first full-size call allocates
        for _ in range(repeats):
            t0 = time.perf_counter()
            D(x, sigma)
            times.append(time.perf_counter() - t0)
    return float(pick(times))


def _sample_rate(gpt, n):
    """Samples per second of a GPT's `.sample`, after a warm-up draw."""
    gpt.sample(min(n, 8), seed=0)
    t0 = time.perf_counter()
    gpt.sample(n, seed=1)
    return n / max(time.perf_counter() - t0, 1e-9)


def _pilot_steps(todo):
    """Up to PILOT_STEPS checkpoints of `todo`: first, middle, last."""
    idx = np.unique(np.round(np.linspace(0, len(todo) - 1, min(PILOT_STEPS, len(todo)))).astype(int))
    return [todo[i] for i in idx]


def _pilot_inputs(section, plan):
    """[(x0 (B, D) float32 tensor, σ_start)] the pilot integrates: a PILOT_GRID² grid of the plane at each
    σ_start (basins), or PILOT_ITEMS training and held-out items noised at each σ (retention)."""
    import torch
    from scoreprobe.noise import randn_per_sample
    s, z = plan.series, plan.sizes
    if section == "basins":
        from scoreprobe.slices import plane_from_spec
        plane = plane_from_spec(plan.plane_spec, s.dataset, s.rule, seed=z["seed"])
        x = torch.as_tensor(plane.grid(PILOT_GRID)[0], dtype=torch.float32)
        return [(x, float(sig)) for sig in z["sigma_start"]]
    bits = np.concatenate([s.dataset.train[:PILOT_ITEMS], s.dataset.heldout[:PILOT_ITEMS]])
    v = torch.as_tensor(bits, dtype=torch.float32) * 2 - 1
    eps = randn_per_sample(z["seed"], torch.arange(len(v)), v.shape[1], dtype=torch.float32)
    return [(v + float(sig) * eps, float(sig)) for sig in z["retention_sigmas"]]


def adaptive_forwards(section, plan, device="cpu"):
    """(mean forwards per row, forward calls per checkpoint) of the adaptive engine for `section`,
    measured now by the pilot (`_pilot_inputs` at `_pilot_steps` of the section's checkpoints to
    compute; calls: the most forwards of a row at each σ, summed over σ, as the engine runs one batch
    per σ until its last row is decided); the fixed grid's counts when the reports' solver is not
    the adaptive engine."""
    import torch
    from scoreprobe.defaults import DEFAULT_SOLVER
    from scoreprobe.ode.engine import solve
    inputs = _pilot_inputs(section, plan)
    if DEFAULT_SOLVER != "adaptive":
        return float(calls_per_sample(plan.sizes)), len(inputs) * calls_per_sample(plan.sizes)
    nfe, calls = [], []
    with torch.no_grad():
        for step in _pilot_steps(plan.items[section].todo):
            D = plan.series.denoiser(step, device=device)
            runs = [solve(D, x.to(device), sig).nfe for x, sig in inputs]
            nfe += runs
            calls.append(sum(int(r.max()) for r in runs))
    return float(np.mean(np.concatenate(nfe))), float(np.mean(calls))


def oracle_seconds_per_row(series, rows=256):
    """Seconds per row of the memorizer and the rule oracle together (the DSM's references), measured now."""
    import torch
    from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
    x, sigma = torch.randn(rows, series.rule.n_bits), torch.ones(rows)
    oracles = [EmpiricalDenoiser(series.dataset.train)]
    try:
        oracles.append(RuleDenoiser(series.rule))
    except ConfigError:   # no exact rule oracle: the DSM leaves that reference out
        pass
    t0 = time.perf_counter()
    for D in oracles:
        D(x, sigma)
    return (time.perf_counter() - t0) / rows


def gallery_rows(plan):
    """Network rows of the gallery's samples (drawn each time the page is made; samples for a GPT)."""
    if not plan.gallery:
        return 0
    n = min(plan.sizes["gallery"], plan.sizes["n_samples"])
    return len(plan.steps) * n * (1 if is_gpt(plan.series) else calls_per_sample(plan.sizes))


def _section_seconds(section, item, plan, rate, latency, device):
    """Seconds of `item.todo` of one section under the model (module docstring); sets item.rows."""
    z, s, n = plan.sizes, plan.series, len(item.todo)
    if is_gpt(s):
        return item.rows / rate
    starts = section_starts(section, z, s)
    if section == "clocks":
        calls = n * calls_per_sample(z)
    elif section in ADAPTIVE:
        per_row, per_step = adaptive_forwards(section, plan, device)
        item.rows = round(n * starts * per_row)
        return item.rows / rate + n * per_step * latency
    elif section == "field":
        calls = n * len(z["sigma_start"])
    else:
        refs = starts * oracle_seconds_per_row(s)
        return DSM_BATCH_COST * item.rows / rate + refs
    return item.rows / rate + calls * latency


def estimate(plan, device="cpu"):
    """Fill plan.rate (rows per second, measured here), plan.latency (seconds per forward call),
    plan.per_checkpoint (the fixed seconds per section and checkpoint) and plan.seconds (the missing sections and the gallery's samples under the model of the module
    docstring); basins' and retention's `rows` become the pilot's count of forwards."""
    todo = {s: it for s, it in plan.items.items() if it.todo}
    g_rows = gallery_rows(plan)
    if not todo and not g_rows:
        plan.rate, plan.latency, plan.per_checkpoint, plan.seconds = float("nan"), float("nan"), float("nan"), 0.0
        return plan
    plan.rate, plan.latency = measure_rate(plan.series, device)
    first = next(iter(todo.values())).todo[0] if todo else plan.steps[0]
    fixed = plan.per_checkpoint = PER_CHECKPOINT * checkpoint_seconds(plan.series, first, device)
    seconds = sum(_section_seconds(s, it, plan, plan.rate, plan.latency, device) + fixed * len(it.todo)
                  for s, it in todo.items())
    if g_rows:
        calls = 0 if is_gpt(plan.series) else len(plan.steps) * calls_per_sample(plan.sizes)
        seconds += g_rows / plan.rate + calls * plan.latency + fixed / PER_CHECKPOINT * len(plan.steps)   # loads only
    plan.seconds = seconds
    return plan
