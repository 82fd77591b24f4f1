"""The markdown of comparisons Holm-adjusted in named families (analyses/remedies): each variant's τ ratio to its
reference over thresholds (`ratio_cell`, `section_ratios`), the endpoints' differences (`section_endpoints`), every
p under each family of analyses.remedies.holm_families (`section_multiplicity`), and the paired-by-seed comparisons
of trained models (`comparison_lines`, analyses.remedies.paired_seeds). `labels`: {variant: its name in the text}."""
import math

from scoreprobe.stats import curves as C
from analyses.remedies import holm_families as H
from analyses.remedies.variant_ratios import verdict
from scoreprobe.studies.format import ci_text, fmt, threshold_label


def ratio_cell(row):
    """'0.62 [0.41, 0.93] p_H6 0.03 *' (Holm in the planned family, its size in the label), a bound against the
    reference's CI end where a seed is censored, or why nothing is read."""
    if row.get("censored"):
        b = row.get("bound")
        if b is None:
            return "— (censored on both sides)"
        return (f"{b['kind']} {fmt(b['value_ci_end'], 2)} against the other arm's CI end ({b['kind']} {fmt(b['value'], 2)} "
                f"against its point; bound: {b['n_censored']} seed(s) at their budget, {fmt(b['budget'])} steps)")
    if not math.isfinite(row["value"]):
        return "—"
    h = row.get("holm", {}).get("planned")
    p = f"p_H{h['size']} {H.p_text(h['p'])}{' *' if h['significant'] else ''}" if h and math.isfinite(h["p"]) else "p —"
    return f"{fmt(row['value'], 2)} {ci_text(row['ci'], 2)} {p}"


def section_ratios(fam, n, labels):
    """Per clock, every comparison's ratio over thresholds (Holm in the planned family of `n`), and the verdicts."""
    lines = ["## Each variant against its reference, over thresholds", "",
             "variant / reference of the geometric mean τ over training seeds (Welch t interval on ln τ, 95%); "
             f"p_H{n}: Welch's t-test on ln τ, Holm-adjusted over the {n} comparisons of this table at the same clock "
             "and threshold, a comparison without a p there (censored, under-resolved) counted with p = 1 (`*`: below "
             "0.05 in that family; every other family in 'Multiplicity' below). A bound where a seed does not reach: "
             "the censored arm's geometric mean with that seed at its budget over the other arm's 95% CI end (its point "
             "value beside). Curriculum and control: rule accuracy among the samples that break a piece (‡ below); the "
             "others: rule accuracy itself.", ""]
    for key, head, paper in (("tau_rule", "rule threshold", 0.9), ("tau_mem", "memorization threshold", 0.1)):
        comps = fam.get(key, {})
        if not comps:
            continue
        names = [f"{labels[v]} / {labels[ref]}" for v, ref in comps]
        curves = list(comps.values())
        lines += [f"### {'τ_rule' if key == 'tau_rule' else 'τ_mem'}", "", f"| {head} | " + " | ".join(names) + " |",
                  "|---:|" + "---|" * len(names)]
        for j, row in enumerate(curves[0]):
            lines.append(f"| {threshold_label(row['threshold'], paper)} | "
                         + " | ".join(ratio_cell(c[j]) for c in curves) + " |")
        lines += [""] + [f"- {n}: {verdict(c)}; ratio {C.range_text(c)}." for n, c in zip(names, curves)] + [""]
    return lines


def section_endpoints(fam, labels):
    """Per endpoint, every comparison's difference of seed means with its interval and Holm-adjusted p."""
    names = {"peak_rule": "peak rule accuracy ‡", "final_mem": "memorized share at the last checkpoint"}
    lines = ["## Endpoints: peak rule accuracy and the share copied at the end", "",
             "variant − reference of the means over training seeds (Welch t interval, 95%; each seed's value in "
             f"the last two columns); p_Holm: Welch's t-test, Holm-adjusted over the {_n_end(fam)} comparisons at each "
             "endpoint (the curriculum from its switch has the curriculum's endpoints and is not one of them; `*`: below "
             "0.05). "
             "Read where the τ are censored: a peak is the best of the checkpoints (biased up alike for every "
             "variant on the same checkpoint grid).", ""]
    for name, comps in fam.items():
        if not comps:
            continue
        lines += [f"| {names[name]} | difference [95% CI] | p_Holm | reference's seeds | variant's seeds |",
                  "|---|---|---|---|---|"]
        for (v, ref), c in comps.items():
            diff = "—" if not math.isfinite(c["value"]) else f"{c['value']:+.3f} {ci_text(c['ci'], 3)}"
            h = c["holm"]["planned"]
            p = f"{H.p_text(h['p'])}{' *' if h['significant'] else ''}" if math.isfinite(h["p"]) else "—"
            seeds = [" / ".join(f"{x:.3f}" for x in c[k]) for k in ("a", "b")]
            lines.append(f"| {labels[v]} / {labels[ref]} | {diff} | {p} | {seeds[0]} | {seeds[1]} |")
        lines.append("")
    return lines


def _n_end(fam):
    return max((len(c) for c in fam.values()), default=0)


def _holm_cell(h, family):
    """'0.080 *' of a cell's Holm-adjusted p in `family` ('—' where the cell is not in that family)."""
    return f"{H.p_text(h[family]['p'])}{' *' if h[family]['significant'] else ''}" if family in h else "—"


def section_multiplicity(fam, ends, sizes, labels):
    """Every test with p < 0.05 before adjustment under each family (analyses.remedies.holm_families), the count that survives in
    each, and the copying effects (τ_mem, the last memorized share) said family by family."""
    cells = [(f"τ_{key[4:]} at {r['threshold']:g}", f"{labels[v]} / {labels[ref]}", r, ci_text(r["ci"], 2), 2)
             for key, comps in fam.items() for (v, ref), rs in comps.items() for r in rs]
    names = {"peak_rule": "peak rule accuracy ‡", "final_mem": "memorized share at the last checkpoint"}
    cells += [(names[n], f"{labels[v]} / {labels[ref]}", c, ci_text(c["ci"], 3), 3)
              for n, comps in ends.items() for (v, ref), c in comps.items()]
    tested = [c for c in cells if math.isfinite(H.p_of(c[2]))]
    lines = ["## Multiplicity: every p under each family", "",
             f"A Holm adjustment holds for the family it is computed over, so each is named with its size. τ ratios: "
             f"the readable comparisons at the same clock and threshold (their number varies: a censored comparison has "
             f"no p); the {sizes['planned']} comparisons of the tables at that clock and threshold (the headline: fixed "
             f"before the runs, a censored one counted with p = 1); the {sizes['tau_tests']} readable τ-ratio tests of "
             f"this study; all {sizes['all_tests']} readable tests of this study (the τ ratios and the "
             f"{sum(sizes['endpoint'].values())} endpoint comparisons). Endpoints: the "
             f"{_n_end(ends)} comparisons at each endpoint, and all {sizes['all_tests']} tests.", "",
             "| test | comparison | estimate [95% CI] | p | Holm: readable here (size) | Holm: the comparisons here (size) "
             f"| Holm: {sizes['tau_tests']} τ tests | Holm: all {sizes['all_tests']} tests |", "|---|---|---|---:|---|---|---:|---:|"]
    small = [c for c in tested if H.p_of(c[2]) < H.ALPHA]
    for test, name, c, ci, d in small:
        h = c["holm"]
        lines.append(f"| {test} | {name} | {fmt(c['value'], d)} {ci} | {H.p_text(H.p_of(c))} | {_holm_cell(h, 'readable')} "
                     f"({h['readable']['size']}) | {_holm_cell(h, 'planned')} ({h['planned']['size']}) | "
                     f"{_holm_cell(h, 'tau_tests')} | {_holm_cell(h, 'all_tests')} |")
    count = {f: sum(1 for c in tested if c[2]["holm"].get(f, {}).get("significant")) for f in H.FAMILIES}
    lines += ["", f"{len(small)} of the {len(tested)} tests have p < 0.05 before adjustment (`*`: below 0.05 after). "
              f"Below 0.05 after Holm: {count['readable']} in their readable family, {count['planned']} among the "
              f"comparisons at their clock and threshold or endpoint, {count['tau_tests']} of the {sizes['tau_tests']} "
              f"τ tests, {count['all_tests']} of all {sizes['all_tests']} tests.", ""]
    copying = [c for c in small if c[0].startswith("τ_mem") or c[0].startswith("memorized")]
    lines += [f"- Copying, {name}, {test}: {fmt(c['value'], d)} {ci}, p {H.p_text(H.p_of(c))}; Holm "
              + "; ".join(H.family_text(c, f, not test.startswith("τ")) for f in H.FAMILIES
                          if f in c["holm"] and not (f == "planned" and not test.startswith("τ"))) + "."
              for test, name, c, ci, d in copying]   # an endpoint's planned family is its readable one
    return lines + ([""] if copying else [])


def _num(v, q, log_quantities):
    if not (isinstance(v, float) and math.isfinite(v)):
        return "—"
    return f"×{math.exp(v):.3f}" if q in log_quantities else f"{v:+.3f}"


def comparison_lines(cmp, n_family, labels, log_quantities=("log_tau_mem",), alpha=0.05):
    """The markdown section of `analyses.remedies.paired_seeds.comparisons`: labels {quantity: its name}; a quantity
    in `log_quantities` is a log difference, shown as the ratio (×exp)."""
    def num(v, q):
        return _num(v, q, log_quantities)
    lines = ["", "## Variants against their baseline, across trained models", "",
             ("Each run is one trained model; a comparison pairs the two runs of the same seed (same initialisation "
              "seed and training data). Interval: Student t over the seeds' differences (n − 1 degrees of freedom; "
              "with 2 seeds t = 12.7, with 3 t = 4.3), p: paired t-test, **Holm over the whole family of "
              f"{n_family} comparisons** (α = {alpha}). A τ not reached within a run's budget is a bound and enters no "
              "difference (its seed is named). Within a run, the sampling CIs above are far narrower: they say how "
              "well one model was measured, not how the next seed would train."), "",
             "| variant − reference | quantity | seeds | per seed | mean [95% t CI] | p | p (Holm) |",
             "|---|---|---|---|---|---|---|"]
    for c in cmp:
        q = c["quantity"]
        per = ", ".join(num(d, q) if math.isfinite(d) else "bound" for d in c["differences"])
        ci = f"{num(c['mean'], q)} [{num(c['lo'], q)}, {num(c['hi'], q)}]"
        p = "—" if not math.isfinite(c["p"]) else f"{c['p']:.3g}"
        ph = "—" if not math.isfinite(c["p_holm"]) else f"{c['p_holm']:.3g}" + (" *" if c["significant"] else "")
        lines.append(f"| {c['variant']} − {c['reference']} | {labels[q]} | {','.join(map(str, c['seeds']))} | "
                     f"{per} | {ci} | {p} | {ph} |")
    lines += ["", "`*`: significant after Holm over the family. τ_mem ratio: variant / reference (exp of the mean "
              "log difference)."]
    return lines
