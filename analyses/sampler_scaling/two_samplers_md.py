"""The markdown of two measurements of the same runs (analyses/sampler_scaling: Heun and a stochastic sampler):
τ_mem and τ_rule per N under both with the paired ratio, the exponent b of τ_mem = a·N^b per sampler and its
difference from the paired ratios (analyses.sampler_scaling.two_samplers), and whether the regenerated runs are the
shipped ones. rows: {"heun": rows, "stochastic": rows} (scoreprobe.stats.runs.run_stats, paired by run)."""
from scoreprobe.stats import curves as C
from scoreprobe.stats.curves import curves_of
from analyses.sampler_scaling.two_samplers import by_N, ratio_curves
from scoreprobe.studies.format import curve_table, fmt, pooled_cell


def section_N(rows):
    """Per N and seed-pooled: τ_mem and τ_rule under both samplers and the paired ratio at the paper's thresholds."""
    h, s = by_N(rows["heun"]), by_N(rows["stochastic"])
    lines = ["## τ_mem and τ_rule per N under both samplers (G = 2)", "", "| N | seeds | τ_mem Heun | τ_mem stochastic | "
             "τ_mem stochastic / Heun (paired) | τ_rule Heun | τ_rule stochastic |", "|---:|---:|---|---|---|---|---|"]
    out = {}
    for N in h:
        rc = ratio_curves(h[N], s[N])
        paired = C.pooled_curve([dict(r) for r in h[N]], rc, "tau_mem")
        at = C.at(paired, 0.1)
        out[N] = {"paired_tau_mem": paired}
        cells = [pooled_cell(C.at(C.pooled_curve(g[N], curves_of(g[N]), k), C.PAPER[k])).split(" (")[0]
                 for g, k in ((h, "tau_mem"), (s, "tau_mem"))]
        rule = [pooled_cell(C.at(C.pooled_curve(g[N], curves_of(g[N]), "tau_rule"), 0.9)).split(" (")[0] for g in (h, s)]
        ratio = "censored (a seed does not reach 0.1 under one sampler)" if at["lower_bound"] else \
            f"{fmt(at['pooled'], 2)} [{fmt(at['ci'][0], 2)}, {fmt(at['ci'][1], 2)}]"
        lines.append(f"| {N} | {len(h[N])} | {cells[0]} | {cells[1]} | {ratio} | {rule[0]} | {rule[1]} |")
    return lines + [""], out


def section_b(rows):
    """b per sampler over memorization thresholds, and b_stochastic − b_heun from the paired ratios."""
    h, s = by_N(rows["heun"]), by_N(rows["stochastic"])
    Ns = [N for N in h if len(h[N]) and N in s]
    if len(Ns) < 2:
        return ["## The exponent b of τ_mem = a·N^b", "", "Fewer than two N done.", ""], {}
    ch, cs = curves_of(rows["heun"]), curves_of(rows["stochastic"])
    rc = ratio_curves(rows["heun"], rows["stochastic"])
    fits = {"heun": C.fit_curve([h[N] for N in Ns], Ns, ch, "tau_mem", "power"),
            "stochastic": C.fit_curve([s[N] for N in Ns], Ns, cs, "tau_mem", "power"),
            "difference": C.fit_curve([h[N] for N in Ns], Ns, rc, "tau_mem", "power")}
    words = {"above": "steeper under the stochastic sampler", "below": "shallower under the stochastic sampler",
             "includes": "no difference excluded"}
    lines = ["## The exponent b of τ_mem = a·N^b under each sampler", "",
             f"N = {', '.join(map(str, Ns))}; least squares of every seed's ln τ_mem on ln N, t interval on b (an N with a "
             "censored seed is left out at that threshold). The difference column fits the paired ratios "
             "τ_stochastic / τ_heun of each run (same checkpoints): its slope is b_stochastic − b_heun.", ""]
    lines += curve_table("memorization threshold", [("b, Heun", fits["heun"]), ("b, stochastic", fits["stochastic"]),
                                                    ("b_stochastic − b_heun", fits["difference"])], 0.1)
    lines += ["", f"- b_stochastic − b_heun: {C.range_text(fits['difference'])}; "
              f"{C.robust(fits['difference'], 0.0, words)}.", ""]
    return lines, fits


def section_identity(identity):
    """One row per run: the share of its last checkpoint's states equal to the shipped export's."""
    lines = ["## Are the regenerated runs the shipped ones?", "", "The last checkpoint re-measured with the default "
             "sampler after regenerating the run from its TrainConfig: the share of its sample states equal to the "
             "shipped export's (1.000 of 1000: the same model).", "", "| run | N | training seed | data seed | equal "
             "states | Heun result from |", "|---|---:|---:|---:|---|---|"]
    for i in identity:
        lines.append(f"| {i['run']} | {i['N']} | {i['seed']} | 0 | {i['identity_share']:.3f} of {i['identity_n']} | "
                     f"{i['heun_from']} |")
    return lines + [""]
