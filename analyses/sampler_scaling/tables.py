"""The tables of analyses/sampler_scaling, from the exports only: per N, τ_mem and τ_rule under the Heun PF-ODE
(the scaling study's exports, or the run's own where the regenerated model differed) and under the stochastic
sampler, paired per run; τ_mem = a·N^b per sampler over thresholds, and b_stochastic − b_heun from the paired
ratios (least squares of ln(τ_stochastic / τ_heun) on ln N over every seed, t interval): the sections of
analyses.sampler_scaling.two_samplers_md."""
from analyses.sampler_scaling.grid import SAMPLER
from scoreprobe.reports.study_report import regenerate_command, runs_json, write_study
from analyses.sampler_scaling.two_samplers_md import section_N, section_b, section_identity
from scoreprobe.studies.format import not_done
from analyses.sampler_scaling.remeasure import collect_pairs

def write_all(args, runs):
    """Write <results>/sampler_scaling_<preset>.md and .json; returns the .md path."""
    rows, identity, missing = collect_pairs(runs, args.exports, args.scaling_exports)
    cmd = regenerate_command("sampler_scaling", args.preset)
    lines = ["# τ_mem's exponent in N under the stochastic sampler", "",
             f"Regenerate: `{cmd}`. {len(rows['heun'])} of {len(runs)} runs done. Sampler: EDM stochastic "
             f"(S_churn {SAMPLER['s_churn']:g}, S_noise {SAMPLER['s_noise']:g}, S_tmin 0, S_tmax ∞) against the "
             "default Heun PF-ODE, the same 1000 initial noises, 32 steps. τ reliably exceeds (definitions version 6); "
             "95% CIs: t intervals over training seeds (data seed 0 everywhere).", ""]
    lines += section_identity(identity)
    text, rep_n = section_N(rows)
    lines += text
    text, rep_b = section_b(rows)
    lines += text
    lines += [not_done(missing)]
    rep = {"preset": args.preset, "identity": identity, "per_N": rep_n, "b": rep_b, "missing": missing,
           "runs": {s: runs_json(rs) for s, rs in rows.items()}}
    return write_study(args.results, f"sampler_scaling_{args.preset}", lines, rep)
