"""Defaults shared by the API and the CLI (a leaf module: importing it costs nothing).

Their meaning and how each was chosen: docs/definitions.md.
"""

# The PF-ODE solver of integrate, basins and retention unless told otherwise: "adaptive" is
# scoreprobe.ode.engine (per-row adaptive steps and early decision, its tolerances in
# engine.EngineSettings); "heun" / "euler" the fixed EDM grid of DEFAULT_N_STEPS steps.
# Chosen from bench/bench_basins.py (bench/RESULTS.md; docs/definitions.md, "The adaptive engine").
DEFAULT_SOLVER = "adaptive"
# The solver of sample and clocks: still the fixed grid. The engine from σ_max moves τ_rule / τ_mem of
# the shipped series within their CIs (docs/definitions.md, "Measured sampler bias"), but the shipped
# clocks.json, checkpoints/README.md, the shipped gpt_clocks tables and the README quote Heun 32;
# switching means re-measuring those (sampler="adaptive" / `--sampler adaptive` gives the engine).
DEFAULT_SAMPLE_SOLVER = "heun"

# The engine's settings for sampling from σ_max (`sampler="adaptive"`, `--sampler adaptive`, `Sampler("adaptive")`):
# overrides of engine.EngineSettings. Above σ_k = sigma_knee the tolerance grows as σ/σ_k (an error made
# there shrinks by σ_k/σ on the way down), a first step of h0 = 2 (σ 80 -> 10.8), rtol = atol = 0.02 and a
# controller aiming at safety 0.7 (fewer rejected steps on the network's rough D at large σ). Chosen from
# bench/bench_sampler_bias.py --vs-heun 128 (bench/RESULTS.md, "Sampling from σ_max = 80 at the engine's
# cost"; docs/definitions.md, "The adaptive engine as sampler"). Stores record them (`sampler.engine`).
SAMPLE_ENGINE = {"rtol": 0.02, "atol": 0.02, "h0": 2.0, "sigma_knee": 1.0, "safety": 0.7}

# Fixed-grid Heun steps of every PF-ODE integration unless told otherwise (sample, integrate, clocks, basins,
# retention, the CLI); chosen from bench/bench_sampler_bias.py (docs/definitions.md, "Sampler").
DEFAULT_N_STEPS = 32

# Measured bias of DEFAULT_N_STEPS on the shipped series: how much rule_acc and mem_ratio rise with
# 4x the steps (bench/bench_sampler_bias.py, pooled over 4 checkpoints, 1000 samples; the table is
# in docs/definitions.md). Printed next to the clocks so that nobody reads τ without it.
SAMPLER_BIAS = {"n_steps": DEFAULT_N_STEPS, "vs_n_steps": 4 * DEFAULT_N_STEPS, "rule_acc": 0.0073, "mem_ratio": 0.0010}

# `sp.Monitor`'s defaults (issue 59: at most 10% of a training loop's time, bench/RESULTS.md, "The monitor at its
# defaults"): step 0 and the steps round(first · 10^(k / per_decade)), k = 0, 1, ... (100, 126, 158, ..., 36 000
# after 26: about the density of the shipped checkpoint series, whose τ every study reads off a log axis), each
# sampled with the adaptive engine ("adaptive": SAMPLE_ENGINE, bias against Heun 128 as small as Heun 32's at 2.3x
# fewer evaluations). A loop that passes every= or steps= picks its own schedule, sampler="heun" `clocks`' sampler.
MONITOR_SCHEDULE = {"first": 100, "per_decade": 10}
MONITOR_SAMPLER = "adaptive"

RULE_THRESHOLD = 0.9   # τ_rule: rule_acc reaches this (and τ_novel: this × the oracle's novel_valid)
MEM_THRESHOLD = 0.1    # τ_mem: mem_ratio reaches this

# Version of the endpoint classification and clock definitions (docs/definitions.md). Stores of
# clocks, basins and retention record it, so a store written under other definitions is refused
# (rewrite it with --overwrite) instead of being extended with incomparable steps; a version that changes
# the adaptive engine only joins scoreprobe.store.versions.ENGINE_ONLY (stores that used no engine stay valid); one
# that changes only how τ is read off the stored curves joins READING_ONLY (per-step results stay valid; τ is re-read).
DEFINITIONS_VERSION = 6   # 6: τ = "reliably exceeds" (Wilson lower bound at 2 consecutive checkpoints), joint
                          # resampling of sample indices (5: the engine decides at decide_tol 0.2; 4: 0.05, rtol =
                          # atol = 5e-3, h0 0.7; 3: the engine at rtol = atol = 0.02; 2: 32 fixed Heun steps).
                          # History: scoreprobe.store.versions
DEFAULT_DEFINITION = "reliable"   # how τ is read off a curve from version 6 ("first_crossing" before;
                                  # scoreprobe.stats.crossings); here so the store can check it without stats

# Frames of `animate_basins` / `scoreprobe basins --animate` / `scoreprobe animate`.
ANIMATION_SIZE = (6.2, 4.4)   # inches: the basin map, its legend and a two-line title
ANIMATION_DPI = 160           # 992 x 704 px at ANIMATION_SIZE: sharp on a slide
