"""The runs of analyses/sampler_scaling (the scaling study's G = 2 N-axis runs) and the sampler they are
re-measured with."""
from analyses.scaling import grid as scaling_grid

SAMPLER = {"name": "edm-stochastic", "s_churn": 40.0, "s_noise": 1.0}   # the largest shift of sampler_clocks.md
LABEL = "edm-stochastic"
PRESETS = {name: {"scaling": name, "jobs": scaling_grid.PRESETS[name]["jobs"]} for name in ("smoke", "cpu", "gpu")}


def plan(preset):
    """The scaling study's parity runs at G = 2 on its N axis, in its order."""
    G = scaling_grid.PRESETS[preset]["N_axis"]["G"]
    return [r for r in scaling_grid.plan(preset, ("N",)) if r.meta["G"] == G]


def run_seconds(run, n_samples):
    """Training plus the stochastic clocks (as many network evaluations as Heun's) plus one checkpoint's check."""
    return scaling_grid.run_seconds(run, n_samples) + scaling_grid.CLOCK_S_PER_CKPT["dit"] * n_samples / 1000
