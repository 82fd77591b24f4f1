"""The markdown of pairs of trained models on disjoint training sets (`scoreprobe.stats.disjoint_pairs`), from a
study's JSON alone: the headline lines, and a section per N with the members' clocks and, per measured step, the
agreement between the floor (the memorizers), the disjoint-data pairs, the same-data pairs and the ceiling (the
rule oracle with itself). The figure beside it: `scoreprobe.viz.disjoint.plot_disjoint_pairs`.

`s` holds {"pairs": pairs_summary}; `res` the study's "params" (pair_replicates, pair_same_data, pair_width,
pair_depth, pair_batch, pair_steps, pair_lr).
"""
import numpy as np

from scoreprobe.reports.interval_text import never as _f
from scoreprobe.reports.interval_text import triple as _ci


def pairs_findings(s, key="pairs"):
    """The disjoint-pairs headline lines (last measured step, σ = 1) of s[key] (absent: none)."""
    if key not in s:
        return []
    out, ceil = [], s[key]["ceiling"]
    for n, ps in s[key]["by_n"].items():
        last, j = str(ps["steps"][-1]), _j1(ps["sigma"])
        d, fl = ps["disjoint"][last], ps["floor"]
        rule = ("every member reaches τ_rule" if ps["rule_learned"] else "NOT every member reaches τ_rule")
        mem = _mem_words(ps)
        out.append(f"- Disjoint pairs N = {n} at step {last} ({rule}; {mem}): cosine at σ = {ps['sigma'][j]:g} "
                   f"{_ci(d['cosine'][j])} over {d['n_pairs']} pairs, against the memorizers' floor "
                   f"{_ci(fl['cosine'][j])} and the rule oracle's ceiling {ceil['cosine'][j]:.0f}; same sample "
                   f"{_ci(d['sample_same'])} (floor {_ci(fl['sample_same'])}).")
    return out


def _mem_words(ps):
    """'no member reaches τ_mem' / 'every member reaches τ_mem' / 'τ_mem reached by a, b'."""
    got = ps["tau_mem_reached"]
    if not got:
        return "no member reaches τ_mem"
    return "every member reaches τ_mem" if len(got) == len(ps["clocks"]) else f"τ_mem reached by {', '.join(got)}"


def _step_words(ps, step):
    """Where a measured step lies against the members' clocks: how many are past τ_rule and past τ_mem."""
    c = ps["clocks"].values()
    rule = sum(1 for x in c if x["tau_rule"] is not None and x["tau_rule"] <= step)
    mem = sum(1 for x in c if x["tau_mem"] is not None and x["tau_mem"] <= step)
    return f"{rule} of {len(c)} members past their τ_rule, {mem} of {len(c)} past their τ_mem"


def _late_rule(ps):
    """' k of n members reach τ_rule only after their τ_mem: …' (a closed window), or ''."""
    late = [k for k, c in ps["clocks"].items() if c["tau_rule"] is not None and c["tau_mem"] is not None
            and c["tau_rule"] >= c["tau_mem"]]
    if not late:
        return ""
    return (f" {len(late)} of {len(ps['clocks'])} members reach τ_rule only after their τ_mem ({', '.join(late)}): "
            "a closed window, their rule accuracy that of copies of valid training items, not of the rule learned.")


def _j1(sigma):
    return int(np.argmin(abs(np.array(sigma) - 1.0)))


def _clock_table(ps):
    steps = ps["steps"]
    L = ["| member | data seed | init seed | τ_rule | τ_mem | " + " | ".join(f"rule_acc at {s}" for s in steps) + " |",
         "|---|---|---|---|---|" + "---|" * len(steps)]
    L += [f"| {k} | {c['data_seed']} | {c['seed']} | {_f(c['tau_rule'])} | {_f(c['tau_mem'])} | "
          + " | ".join(f"{c['rule_acc_at'][str(s)]:.2f}" for s in steps) + " |" for k, c in ps["clocks"].items()]
    return L


def _agreement_table(ps, step, ceil):
    """Rows per σ (cosine), then same sample and same basin: floor, disjoint pairs, same-data pairs, ceiling."""
    d, fl, sd = ps["disjoint"][step], ps["floor"], ps["same_data"][step]
    def row(name, cells):
        return "| " + " | ".join([name, *cells]) + " |"
    L = [row("measure", ["floor: memorizers (over pairs)", "network, disjoint data (over pairs)",
                         *(f"network, same data ({r})" for r in sd), "ceiling: rule oracle"]),
         "|---|---|---|" + "---|" * len(sd) + "---|"]
    for j, sg in enumerate(ps["sigma"]):
        L.append(row(f"cosine σ = {sg:g}", [_ci(v, "{:.3f}") for v in (fl["cosine"][j], d["cosine"][j],
                                                                         *(x["cosine"][j] for x in sd.values()))]
                     + [f"{ceil['cosine'][j]:.3f}"]))
    L.append(row("same sample", [_ci(v) for v in (fl["sample_same"], d["sample_same"],
                                                   *(x["sample_same"] for x in sd.values()))]
                 + [f"{ceil['sample_same']:.2f}"]))
    for j, s0 in enumerate(ps["sigma_start"]):
        L.append(row(f"same basin from σ = {s0:g}", [_ci(v) for v in (fl["basin_same"][j], d["basin_same"][j],
                                                                      *(x["basin_same"][j] for x in sd.values()))]
                     + [f"{ceil['basin_same'][j]:.2f}"]))
    return L


def _per_pair_lines(ps, step):
    j = _j1(ps["sigma"])
    return [f"- pair {r}: cosine at σ = {ps['sigma'][j]:g} {_ci(x['cosine'][j], '{:.3f}')} (t over the points), same "
            f"sample {_ci(x['sample_same'])} (Wilson)" for r, x in ps["disjoint_per_pair"][step].items()]


def pairs_section(res, s, prefix):
    """Section 3: pairs on disjoint training sets where the rule is learned, between floor and ceiling; the figure
    is <prefix>decompose_disjoint.png."""
    p, pz = res["params"], s["pairs"]
    L = ["## 3. Disjoint training sets, at N where the rule is learned", "",
         f"Per N, {p['pair_replicates']} replicate pairs: members a and b of a pair are trained on disjoint training "
         "sets (different data seeds; every training set of one N is disjoint from every other, checked: the most "
         "images any two share is given below) with different init seeds, and replicates differ in both; for "
         f"replicate(s) {p['pair_same_data']} a member c is trained on a's data with a third init seed (a same-data "
         f"pair). Recipe: DiT width {p['pair_width']}, depth {p['pair_depth']}, batch {p['pair_batch']}, lr "
         f"{p.get('pair_lr', 2e-3):g}, {p['pair_steps']} steps (the shipped recipe's network and optimizer, stopped "
         "early: whether each member has reached τ_rule is in its clock table).", "",
         "**Floor**: the two training sets' memorizers compared the same way — their samples are their own training "
         "items, so for disjoint sets their same-sample share is 0 by construction, while their cosine is not small "
         "at large σ. **Ceiling**: the rule oracle compared with itself — 1 for every measure by construction (a "
         "check of the measurement, not a result); the same-data pair is the informative ceiling (two inits, one "
         "training set). Agreement is read beside the members' rule clock, not as its proxy: agreement and rule "
         "recovery are separate transitions (Maillard & Goldt 2026). Intervals: 95%, t over the replicate pairs "
         "(2 df) or, for one pair, t over the points (cosine) and Wilson (shares).", "",
         *_small_n_note(s), ""]
    L += _n_blocks(pz)
    L += ["Step 0 is not measured: the DiT's output layer starts at zero, so D = c_skip·x for every "
          "initialization and any two members agree exactly there.", "", f"![pairs]({prefix}decompose_disjoint.png)", ""]
    return L + mem_pairs_section(res, s, prefix)


def _small_n_note(s):
    """Why N = 8, 16 are not in this section (section 3b, when measured, has them past τ_mem)."""
    where = ("section 3b measures them" if "pairs_mem" in s else "they are not measured in this json")
    floors = ""
    if "pairs_mem" in s:
        fl = [(n, ps["floor"]["cosine"][_j1(ps["sigma"])]) for n, ps in s["pairs_mem"]["by_n"].items()]
        floors = (" (the memorizers' cosine floor at σ = 1: "
                  + ", ".join(f"{_ci(v, '{:.2f}')} at N = {n}" for n, v in fl) + ", below this section's)")
    return ["An earlier version of this section paired models at N = 8 and 16, where no member learns the rule, "
            "and read their agreement as a generalization test; it was not one, since no member generalizes. The "
            "reason it gave for dropping them — that two memorizers already agree strongly there — was wrong: the "
            f"floor is lower at small N{floors}. At small N the pairs answer another question: whether agreement "
            f"falls when the members memorize; {where}, trained past τ_mem."]


def mem_pairs_section(res, s, prefix):
    """Section 3b: pairs at small N trained past τ_mem (res["pairs_mem"]; absent: nothing)."""
    if "pairs_mem" not in s:
        return []
    q = dict(res["params"], **res["params"]["mem_pairs"])
    L = ["## 3b. Disjoint training sets across the memorization boundary (small N)", "",
         f"As section 3 (the same recipe, floor, ceiling and intervals) at N = {', '.join(map(str, q['pair_Ns']))}, "
         f"{q['pair_steps']} steps, {q['pair_checkpoints']} checkpoints from step {q['pair_first']}: every member "
         "is meant to pass its τ_mem within the run (the clock table says whether it does), so agreement is read "
         "before and after memorization. A disjoint pair whose members both memorize tends to the floor (the two "
         "training sets' memorizers); a same-data pair whose members both memorize tends to agree fully.", ""]
    L += _n_blocks(s["pairs_mem"])
    return L + [f"![pairs past τ_mem]({prefix}decompose_disjoint_mem.png)", ""] + long_pairs_section(res, s, prefix)


def long_pairs_section(res, s, prefix):
    """Section 3c: pairs at N where the rule is learned, trained past τ_mem (res["pairs_long"]; absent: nothing)."""
    if "pairs_long" not in s:
        return []
    subs = [dict(res["params"], **q) for q in res["params"]["long_pairs"]]
    runs = "; ".join(f"N = {', '.join(map(str, q['pair_Ns']))}: {q['pair_replicates']} disjoint pair"
                     f"{'s' if q['pair_replicates'] > 1 else ''}"
                     + (f" and a same-data member for replicate(s) {q['pair_same_data']}" if q["pair_same_data"] else
                        ", no same-data member") + f", {q['pair_steps']} steps, {q['pair_checkpoints']} checkpoints "
                     f"from step {q['pair_first']}" for q in subs)
    L = ["## 3c. Disjoint training sets across the memorization boundary (N where the rule is learned)", "",
         f"As section 3 (the same recipe, floor, ceiling and intervals), trained past τ_mem: {runs}. Section 3 "
         "stops before memorization, section 3b at N where the rule is never learned; here both transitions lie "
         "inside the run, so agreement is read before τ_rule, in the window and past τ_mem, beside each member's "
         "clocks. With one pair, the intervals are over the points (cosine, t) and the samples (shares, Wilson): "
         "they hold the pair fixed, and say nothing of how another pair would agree.", ""]
    L += _n_blocks(s["pairs_long"])
    return L + [f"![pairs past τ_mem at large N]({prefix}decompose_disjoint_long.png)", ""]


def _n_blocks(pz):
    """Per N: the shared-image check, the clock table, and per measured step the agreement table and per-pair lines."""
    L = []
    for n, ps in pz["by_n"].items():
        L += [f"### N = {n} per member", "",
              f"Training sets shared by two disjoint-data members: at most {ps['shared_train_max']} images. "
              + ("Every member reaches τ_rule." if ps["rule_learned"] else "**Not every member reaches τ_rule**: "
                 "agreement here is not measured where the rule is learned.")
              + (" No member reaches τ_mem within the run." if not ps["tau_mem_reached"] else
                 " " + _mem_words(ps).replace("every", "Every") + ".") + _late_rule(ps), "", *_clock_table(ps), ""]
        for step in map(str, ps["steps"]):
            L += [f"Agreement at step {step} ({_step_words(ps, int(step))}):", "",
                  *_agreement_table(ps, step, pz["ceiling"]), "", *_per_pair_lines(ps, step), ""]
    return L
