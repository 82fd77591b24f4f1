"""Inference over measurements: everything that reads numbers a probe measured (issue 57).

`scoreprobe.probes` measures a denoiser (sampling, the score field, basins, DSM losses, patching) and
imports nothing from here; this package reads what they measured. The data flow one way, probes → stats:
a statistic a probe stores with its measurement lives with the probes (`probes.wilson`,
`probes.dsm_gap`, `inside.ratio`), and a public function that measures and then reads (`sp.clocks`)
composes the two here (`stats.clocks`).

    clocks.py        sp.clocks: measure_clocks, then τ in attrs and data variables
    crossings.py     crossings and windows of fraction curves in (log step, logit)
    taus.py          τ_rule, τ_mem, τ_novel and the window with bootstrap CIs; fit_power_law
    thresholds.py    τ over a range of thresholds (sp.taus, sp.pool_taus)
    tidy.py          τ as data variables; the one-row summary
    families.py      τ of the constraint families with a paired bootstrap
    abruptness.py    how abruptly a clock rises
    seeds.py         pooling over training seeds (t, Welch, two-level, fits, windows)
    intervals.py     the t, Welch, two-level and slope intervals; Welch's p and TOST
    crossed.py       trained models × units: crossed ANOVA, models-and-units, two-level bootstrap
    crossed_arms.py  two arms of a crossed design, their difference and its coverage
    censored.py      censored normal estimates (runs that never crossed)
    pvalues.py       Holm and Benjamini–Hochberg adjustment
    verdict.py       the verdict words over an interval
    misfit.py        a line's lack of fit with replicate runs per x; the slope over the per-x means
    budget_trend.py  where a run that missed a threshold is heading at its budget (rising, or peaked and falling)
    claim_readings.py  a claim's curve of readings from a study's results (what verdict reads)
    claim_tests.py   claims tested one p-value each, Holm over the family, plain verdicts
    timing.py        half-change steps over training
    dsm_stats.py     band means, paired gaps and their correction over σ of DSM cubes
    tau_cross.py     τ_cross with intervals (loss crossover)
    unit_intervals.py      means over units (models, pairs, seeds) with t / Wilson intervals, arrays or triples
    nearest_steps.py       the checkpoint nearest a step of interest, in ln(step + 1)
    circuit_effects.py, circuit_effects_across.py   patching effects per model; models as the units
    decompose_models.py    the decompose calls over several trained models, as JSON
    disjoint_pairs.py      trained models on disjoint data: members, measurement, intervals
    decompose_boot.py, decompose_calls.py  resampling a decompose result; the calls with their tests
    decompose_infer.py     the calls' units of inference: sign flips over points, t over trained models
    compare.py, compare_text.py            runs side by side (sp.compare) and its text

Readings several studies share (a study's own readings live in its folder, analyses/<study>/, issue 74):

    censored_slopes.py         slopes of ln τ on ln x over every run, with censoring; differences of slopes
    curves.py                  every scaling claim as a curve over thresholds, per run and pooled
    extrapolate.py             where a run that did not reach a threshold would reach it
    models_units.py            trained models × units tables per series (the battery over several models)
    paired_states.py           two measurements of one model from the same initial noises
    run_ci_fits.py             ratios and a power law from single runs' τ with their bootstrap CIs
    runs.py                    per-run and per-configuration statistics of exported runs
    seed_grid.py               crossed data seed × training seed grids
"""
