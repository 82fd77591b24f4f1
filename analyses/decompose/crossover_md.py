"""The markdown of the loss crossover (`scoreprobe.probes.crossover`, `scoreprobe.stats.tau_cross`,
`analyses.decompose.crossover_summary`), from a study's JSON alone: the headline lines and a section with τ_cross
and its intervals over noise draws and over trained models, the share of the generalizer's excess closed, and the
excess by N. The figure beside it: `crossover_figure.plot_crossover`.

`res` holds "taus" (the series' clocks), "crossover" (crossover_json), "excess_by_n" (excess_by_n, with
"tau_mem_measured" where known) and optionally "cross_ci" / "cross_ci_data" (τ_cross per model with intervals);
`s` the study's summary ("tau_cross", "tau_cross_sigma", "gap_closed", "excess_slopes", "tau_mem_slope_N").
"""
from scoreprobe.reports.interval_text import never as _f
from scoreprobe.reports.interval_text import triple as _ci


def cross_findings(res, s):
    """The crossover headline lines."""
    t, out = res["taus"], []
    tc, ci = s["tau_cross"], res.get("cross_ci")
    if tc:
        g = s["gap_closed"]["at"]
        out.append(f"- Loss crossover, shipped series: τ_cross = {tc:.0f} (τ_rule = {t['tau_rule']:.0f}, τ_mem = "
                   f"{t['tau_mem']:.0f}); the network has closed {g['tau_mem']:.0%} of the generalizer's excess at "
                   f"τ_mem, {g['tau_rule']:.0%} at τ_rule.")
    for c, who in ((ci, "trained model (training seeds, one training set)"),
                   (res.get("cross_ci_data"), "data seed (training seed 0)")):
        if c and c["series"]:
            per = ", ".join(f"{_f(v)} [{_f(lo)}, {_f(hi)}]" for v, lo, hi in zip(c["tau_cross"], c["lo"], c["hi"]))
            over = (f"; mean over the {len(c['series'])} models {_ci([c['mean'], c['mean_lo'], c['mean_hi']], '{:.0f}')}"
                    if len(c["series"]) > 1 else "")
            out.append(f"- τ_cross per {who} (95% bootstrap over noise draws): {per}{over}.")
    es = s["excess_slopes"]
    out.append(f"- The generalizer's σ-averaged excess over the memorizer scales as N^{_ci(es['interval'])} over N = "
               f"{res['excess_by_n']['N'][0]}…{res['excess_by_n']['N'][-1]} (mean and 95% t interval over data seeds "
               f"{', '.join(map(str, es['seeds']))}); the measured τ_mem as N^{_f(s.get('tau_mem_slope_N'), '{:.2f}')}.")
    return out


def _cross_table(ci, group):
    """The τ_cross table of one group of models, with its over-models interval."""
    if not ci:
        return []
    L = [f"τ_cross with intervals over {group}: per model, a 95% percentile bootstrap over the (training item, noise "
         f"draw) cells ({ci['n_draws']} draws per item, {ci['n_boot']} resamples, the same cells at every "
         "checkpoint); over models, a t interval (models as units).", "",
         "| model | last step | τ_cross | 95% interval | resamples never crossing |", "|---|---|---|---|---|"]
    L += [f"| {m} | {ls} | {_f(v)} | [{_f(lo)}, {_f(hi)}] | {nv:.3f} |" for m, ls, v, lo, hi, nv in
          zip(ci["series"], ci["last_step"], ci["tau_cross"], ci["lo"], ci["hi"], ci["boot_never"])]
    return L + ["", f"Mean over models: {_ci([ci['mean'], ci['mean_lo'], ci['mean_hi']], '{:.0f}')}"
                + (f"; left out (still training when measured): {', '.join(ci['skipped_unfinished'])}"
                   if ci.get("skipped_unfinished") else "") + ".", ""]


def crossover_section(res, s, t, prefix):
    """Section 2: τ_cross (with intervals), the share of the generalizer's excess closed, the excess by N; the
    figure is <prefix>decompose_crossover.png."""
    L = ["## 2. The loss crossover", "",
         f"τ_cross (the network's σ-averaged weighted training loss stays below the rule oracle's from this step), "
         f"shipped series: **{_f(s['tau_cross'])}** vs τ_mem = {t['tau_mem']:.0f}. Per σ: "
         + ", ".join(f"σ {k}: {_f(v)}" for k, v in s["tau_cross_sigma"].items()) + ".", ""]
    L += _cross_table(res.get("cross_ci"), "training seeds 0, 1, 2 on the shipped training set")
    cd = res.get("cross_ci_data")
    if cd:
        L += _cross_table(cd, f"data seeds {', '.join(map(str, cd['data_seeds']))} (training seed 0; read over the "
                              f"checkpoints up to step {cd['up_to_step']}: the data-seed models are trained that far)")
    L += ["Share of the generalizer's excess over the memorizer closed by the network's σ-averaged training loss, "
          "(L_rule − L_net)/(L_rule − L_mem), shipped series: "
          f"{s['gap_closed']['at']['tau_rule']:.2f} at τ_rule, {s['gap_closed']['at']['tau_mem']:.2f} at τ_mem, "
          f"{list(s['gap_closed']['per_step'].values())[-1]:.2f} at the last checkpoint.", ""]
    ex, es = res["excess_by_n"], s["excess_slopes"]
    meas = ex.get("tau_mem_measured") or {}
    L += [f"Excess by N (data seed {es['seeds'][0]}; the slope below is over all seeds):", "",
          "| N | L_rule | L_mem | excess | τ_mem measured |", "|---|---|---|---|---|"]
    L += [f"| {n} | {r:.4f} | {m:.4f} | {e:.4f} | {_f(meas[str(n)]) if str(n) in meas else 'not measured'} |"
          for n, r, m, e in zip(ex["N"], ex["rule"], ex["memorizer"], ex["excess"])]
    L += ["", "log-log slope of the excess in N per data seed: "
          + ", ".join(f"seed {k}: {_f(v, '{:.3f}')}" for k, v in zip(es["seeds"], es["per_seed"]))
          + f"; mean {_ci(es['interval'], '{:.3f}')} (95% t over seeds). Of the measured τ_mem in N (one run per N): "
          f"{_f(s.get('tau_mem_slope_N'), '{:.2f}')}.", "", f"![crossover]({prefix}decompose_crossover.png)", ""]
    return L
