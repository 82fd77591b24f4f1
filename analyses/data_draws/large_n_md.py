"""The section "G = 3 at larger N" of analyses/data_draws (issue 36 item 5 and issue 54's omitted items): does a
larger N let G = 3 reach the rule, and keep it? τ_rule pooled per N at data seed 0, each seed's rule accuracy from
its peak to its last checkpoint beside its memorized share, and the count of seeds reaching the paper's threshold
compared with the runs of the same data seed at the smaller N (Fisher's exact test)."""
import math

import numpy as np
import scipy.stats

from scoreprobe.stats import curves as C
from scoreprobe.stats.pvalues import adjust_family
from scoreprobe.studies.format import curve_table, pooled_cell
from scoreprobe.stats.curves import curves_of
from scoreprobe.stats.seeds import pool_seeds

PAPER = C.PAPER["tau_rule"]


def groups_of(rows, p):
    """{N: G = 3 rows at data seed 0, by training seed} over the preset's G = 3 configurations and large N."""
    Ns = sorted({N for G, N in p["large_N"]} | {N for G, N in p["configs"] if G == 3})
    groups = {N: sorted([r for r in rows if r["meta"]["G"] == 3 and r["meta"]["N"] == N and r["meta"]["data_seed"] == 0],
                        key=lambda r: r["seed"]) for N in Ns}
    return Ns, {N: rs for N, rs in groups.items() if rs}


def section(rows, p):
    """(lines, JSON-able dict) of G = 3 at every N of the preset, data seed 0."""
    Ns, groups = groups_of(rows, p)
    lines = ["## G = 3 at larger N (data seed 0)", "", "Does a larger N let G = 3 reach the rule reliably? (the paper "
             "reports it for large G at large N.) Budgets: the recipe's 12 000 views per image.", "",
             "| N | seeds | steps | τ_rule pooled [95% CI] (per seed) | peak rule_acc (per seed) | τ_mem pooled (per seed) "
             "| window |", "|---:|---:|---:|---|---|---|---|"]
    out = {}
    for N, rs in groups.items():
        pr, pm = (pool_seeds([r[k] for r in rs], last_steps=[float(r["steps"]) for r in rs]) for k in ("tau_rule", "tau_mem"))
        out[N] = {"tau_rule": pr, "tau_mem": pm, "rule_curve": C.pooled_curve(rs, curves_of(rs), "tau_rule"),
                  "late": [late_fall(r) for r in rs]}
        peaks = " / ".join(f"{r['peak_rule_acc']:.3f}" for r in rs)
        status = "; ".join(f"s{r['seed']}: {r['window_status']}" for r in rs)
        lines.append(f"| {N} | {len(rs)} | {rs[0]['steps']} | {pooled_cell(pr)} | {peaks} | {pooled_cell(pm)} | {status} |")
    if len(groups) >= 2:
        lines += ["", "τ_rule over rule thresholds, pooled over seeds per N (where a seed does not reach it: the "
                  "censored-normal estimate where some seed crosses, else a bound at the budget):", ""]
        lines += curve_table("rule threshold", [(f"N = {N}", out[N]["rule_curve"]) for N in groups], PAPER)
    lines += [""] + late_lines(groups, out)
    count, out["count_test"] = count_lines(rows, groups)
    lines += count or [""]
    draws, out["data_seeds"] = draw_lines(rows, p)
    lines += draws
    missing = [N for N in Ns if N not in groups]
    if missing:
        lines += [f"No export yet (not run, or still training): N = {', '.join(map(str, missing))}.", ""]
    return lines, out


def late_fall(r):
    """One run's rule accuracy from its peak to its last checkpoint, and its memorized share there."""
    step, acc = np.asarray(r["curve"]["step"]), np.asarray(r["curve"]["rule_acc"], dtype=float)
    k = int(np.argmax(acc))
    return {"seed": r["seed"], "peak": float(acc[k]), "peak_step": int(step[k]), "last": float(acc[-1]),
            "last_step": int(step[-1]), "final_mem": float(r["final_mem_ratio"])}


def late_lines(groups, out):
    """Per N: each seed's peak rule accuracy (step), its last value and its memorized share at the end."""
    lines = ["Rule accuracy from its peak to the last checkpoint, per seed (memorized share at the last checkpoint):", "",
             "| N | seed | peak rule_acc (step) | last rule_acc (step) | memorized share at the end |",
             "|---:|---:|---|---|---:|"]
    for N in groups:
        for f in out[N]["late"]:
            lines.append(f"| {N} | s{f['seed']} | {f['peak']:.3f} ({f['peak_step']}) | {f['last']:.3f} ({f['last_step']}) "
                         f"| {f['final_mem']:.3f} |")
    lines.append("")
    for N in groups:
        fs, rs = out[N]["late"], groups[N]
        peaks, lasts = (" / ".join(f"{f[k]:.3f}" for f in fs) for k in ("peak", "last"))
        text = (f"- N = {N}: rule accuracy peaks at {peaks} and is {lasts} at step {fs[0]['last_step']}, with at most "
                f"{100 * max(f['final_mem'] for f in fs):.1f}% of samples copies at the end")
        reached = all(math.isfinite(r["tau_rule"]) for r in rs)
        if reached and all(f["last"] < PAPER for f in fs):
            text += (f": every seed reliably exceeds {PAPER:g} and every seed ends below it, not by copying. N lets "
                     "G = 3 reach the rule, not keep it.")
        elif reached and all(f["last"] >= PAPER for f in fs):
            text += f": every seed reliably exceeds {PAPER:g} and is still above it at its last checkpoint."
        else:
            text += (f"; {sum(math.isfinite(r['tau_rule']) for r in rs)} of {len(rs)} seeds reliably exceed {PAPER:g}, "
                     f"{sum(f['last'] < PAPER for f in fs)} of {len(fs)} end below it.")
        lines.append(text)
    return lines + across_n(out, groups)


def across_n(out, groups):
    """Where there are several N: each N's mean last rule accuracy (and step) beside its largest copied share, with
    the confound stated (the budget is 12 000 views per image, so a larger N also trains longer)."""
    if len(groups) < 2:
        return []
    cells = [f"{np.mean([f['last'] for f in out[N]['late']]):.3f} (N = {N}, step {out[N]['late'][0]['last_step']}, "
             f"at most {100 * max(f['final_mem'] for f in out[N]['late']):.1f}% copies)" for N in groups]
    return [f"- Across N, rule accuracy at the last checkpoint (mean over seeds): {', '.join(cells)}. The budget is "
            "12 000 views per image, so a larger N also trains longer: N and training length are not separated here."]


def count_lines(rows, groups):
    """Seeds reaching the paper's threshold at each larger N against the same data seed's runs at the smallest N
    (one-sided Fisher exact; Holm over the family of these comparisons where there are several), and what the count
    against every run of the smaller N would wrongly add."""
    if len(groups) < 2:
        return [], {}
    n_small = min(groups)
    small, bigs = groups[n_small], [N for N in groups if N != n_small]
    every = [r for r in rows if r["meta"]["G"] == 3 and r["meta"]["N"] == n_small]
    tests = [_count_test(groups[N], small, every, N, n_small) for N in bigs]
    holm = adjust_family([t["p_same_data_seed"] for t in tests])
    for t, ph in zip(tests, holm):
        t["p_holm"] = float(ph)
    return [_count_text(t, len(every), len(tests)) for t in tests] + [""], {"family": len(tests), "tests": tests}


def _count_test(big, small, every, n_big, n_small):
    """The counts and one-sided Fisher p of `big` against `small` (same data seed) and against `every` run at N small."""
    (k_b, k_s, k_e), (m_b, m_s, m_e) = ([sum(math.isfinite(r["tau_rule"]) for r in rs) for rs in (big, small, every)],
                                        [len(big), len(small), len(every)])
    return {"N": [n_small, n_big], "data_seed": 0, "reached": [k_s, k_b], "n": [m_s, m_b],
            "p_same_data_seed": fisher(k_b, m_b, k_s, m_s), "n_every": m_e, "reached_every": k_e,
            "p_every_data_seed": fisher(k_b, m_b, k_e, m_e)}


def _count_text(t, n_every, family):
    """One comparison of `_count_test` in words, its Holm-adjusted p where the family has several."""
    (n_small, n_big), (k_s, k_b), (m_s, m_b) = t["N"], t["reached"], t["n"]
    holm = (f"; Holm-adjusted over the {family} comparisons against N = {n_small}: p = {t['p_holm']:.3f}"
            if family > 1 else "")
    line = (f"- seeds reliably exceeding {PAPER:g}: {k_b} of {m_b} at N = {n_big} against {k_s} of {m_s} at N = "
            f"{n_small} with the same data seed (0): one-sided Fisher exact p = {t['p_same_data_seed']:.3f} (the "
            f"smallest p {m_b} against {m_s} runs can give is {fisher(m_b, m_b, 0, m_s):.3f}{holm}).")
    if n_every > m_s:
        line += (f" Against all {n_every} N = {n_small} runs ({t['reached_every']} reached) it would read p = "
                 f"{t['p_every_data_seed']:.4f}, but {n_every - m_s} of them are at data seeds N = {n_big} was not run "
                 "at, and runs that share seeds are not independent: that is not the comparison.")
    return line


def draw_lines(rows, p):
    """The first large N at training seed 0 over data seeds (the preset's `large_N_draws`), each beside the same data
    seed and training seed at G = 3's grid N: does the larger N's answer hold beyond data seed 0?"""
    draws = p.get("large_N_draws", [])
    if not draws:
        return [], {}
    (G, N), small = draws[0][:2], max(N for G_, N in p["configs"] if G_ == 3)
    seeds = [0] + [d for G_, N_, d in draws if (G_, N_) == (G, N)]
    lines = [f"G = {G} at N = {N} over data seeds (training seed 0), beside the same seeds at N = {small}:", "",
             f"| data seed | N = {N}: τ_rule | peak → last rule_acc | N = {small}: τ_rule | peak → last rule_acc |",
             "|---:|---|---|---|---|"]
    runs = {d: (_seed_run(rows, G, N, d), _seed_run(rows, G, small, d)) for d in seeds}
    out = {d: {"big": _summary(big), "small": _summary(sm)} for d, (big, sm) in runs.items()}
    for d, (big, sm) in runs.items():
        lines.append(f"| {d} | " + " | ".join(_seed_cells(big, out[d]["big"]) + _seed_cells(sm, out[d]["small"])) + " |")
    done = [v["big"] for v in out.values() if v["big"] is not None]
    if len(done) < len(seeds):
        return lines + ["", f"- {sum(b['reached'] for b in done)} of {len(done)} data seeds exported at N = {N} reliably "
                        f"exceed {PAPER:g} (training seed 0; {len(seeds) - len(done)} not yet exported): the question "
                        "is open until they are.", ""], out
    return lines + ["", "- " + _draws_text(out, N, small), ""], out


def _draws_text(out, N, small):
    """Every data seed exported: how many reach the paper's threshold at N and at `small` with the same seeds (one-sided
    Fisher exact p), and the late fall at N with the copied share (None where the small N's run is missing)."""
    big = [v["big"] for v in out.values()]
    sm = [v["small"] for v in out.values() if v["small"] is not None]
    k = sum(b["reached"] for b in big)
    text = f"{k} of {len(big)} data seeds at N = {N} reliably exceed {PAPER:g} (training seed 0)"
    if len(sm) == len(big):
        k_s = sum(b["reached"] for b in sm)
        text += (f", against {k_s} of {len(sm)} at N = {small} with the same data seeds: one-sided Fisher exact p = "
                 f"{fisher(k, len(big), k_s, len(sm)):.3f} (the smallest {len(big)} against {len(sm)} runs can give is "
                 f"{fisher(len(big), len(big), 0, len(sm)):.3f}; the data-seed-0 pair is also in the training-seed test "
                 "above, so the two tests are not independent)")
    return text + (f". Rule accuracy falls late at N = {N} for every data seed (peak {min(b['peak'] for b in big):.3f}–"
                   f"{max(b['peak'] for b in big):.3f} → last {min(b['last'] for b in big):.3f}–"
                   f"{max(b['last'] for b in big):.3f}) with at most {max(b['final_mem'] for b in big):.1%} of samples "
                   "copies at the end: across data draws too, N lets G = 3 reach the rule, not keep it."
                   if all(b["last"] < PAPER <= b["peak"] for b in big) else ".")


def _seed_run(rows, G, N, data_seed):
    """The row of the run at (G, N, data seed, training seed 0); None if not exported."""
    return next((r for r in rows if (r["meta"]["G"], r["meta"]["N"], r["meta"]["data_seed"], r["seed"])
                 == (G, N, data_seed, 0)), None)


def _summary(r):
    """`late_fall` of a run with "reached" (its τ_rule is finite); None for no run."""
    return None if r is None else late_fall(r) | {"reached": bool(math.isfinite(r["tau_rule"]))}


def _seed_cells(r, summary):
    """[τ_rule cell, peak → last cell] of a run and its `_summary`."""
    if r is None:
        return ["no export yet", "—"]
    tau = f"{r['tau_rule']:.0f}" if summary["reached"] else f"> {r['steps']} (not reached)"
    return [tau, f"{summary['peak']:.3f} → {summary['last']:.3f}"]


def fisher(k_a, n_a, k_b, n_b):
    """One-sided Fisher exact p that a (k_a of n_a) reaches more often than b (k_b of n_b)."""
    return float(scipy.stats.fisher_exact([[k_a, n_a - k_a], [k_b, n_b - k_b]], alternative="greater")[1])
