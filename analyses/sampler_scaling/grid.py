"""The runs of analyses/sampler_scaling (the scaling study's G = 2 N-axis runs) and the sampler they are
re-measured with."""
from scoreprobe.studies import recipes as scaling_grid

SAMPLER = {"name": "edm-stochastic", "s_churn": 40.0, "s_noise": 1.0}   # the largest shift of sampler_clocks.md
LABEL = "edm-stochastic"
# the scaling study's N axis at G = 2 (its runs: same recipe, same names, so their runs are reused)
AXIS = {"smoke": dict(Ns=[8, 16], seeds=[0]), "cpu": dict(Ns=[30, 60, 120, 240], seeds=[0, 1, 2]),
        "gpu": dict(Ns=[32, 64, 128, 256, 512, 1024], seeds=[0, 1, 2, 3, 4])}
PRESETS = {name: {"scaling": name, "jobs": scaling_grid.RECIPES[name]["jobs"], "G": 2, **AXIS[name]}
           for name in ("smoke", "cpu", "gpu")}


def plan(preset):
    """The parity runs at G = 2 on the N axis, seed by seed, in the scaling study's order."""
    p, args = PRESETS[preset], scaling_grid.base_args(preset)
    runs = [scaling_grid.parity_run(args, p["G"], N, s) for s in p["seeds"] for N in p["Ns"]]
    for r in runs:
        r.axes = ("N",)
    return runs


def run_seconds(run, n_samples):
    """Training plus the stochastic clocks (as many network evaluations as Heun's) plus one checkpoint's check."""
    return scaling_grid.run_seconds(run, n_samples) + scaling_grid.CLOCK_S_PER_CKPT["dit"] * n_samples / 1000
