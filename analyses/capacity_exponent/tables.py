"""The tables of analyses/capacity_exponent (markdown and JSON) and its figure, from the exports only: b of
τ_mem ∝ N^b per DiT size over memorization thresholds, with censoring handled (not dropped)."""
import math
from collections import Counter

import numpy as np

from analyses.capacity_exponent import coverage as cov
from analyses.capacity_exponent import grid as grid_mod
from scoreprobe.reports.study_md import header
from scoreprobe.stats import curves as C
from scoreprobe.stats.censored_slopes import (
    censored_slope_curve,
    difference_text,
    means_difference_text,
    means_slope_difference,
    slope_difference,
)
from scoreprobe.stats.pvalues import adjust_pvalues
from scoreprobe.stats.curves import curves_of
from scoreprobe.stats.seeds import pool_seeds
from scoreprobe.stats.thresholds import MEM_THRESHOLDS
from scoreprobe.stats.verdict import verdict
from scoreprobe.studies import format as F
from scoreprobe.studies import presets
from scoreprobe.studies.divergence import RECOVER, START_LOSS, WINDOW, never_started
from scoreprobe.studies import recipes as scaling_grid
from scoreprobe.studies.format import pooled_cell, slope_cell as b_cell

PAPER_B, FIELD_B = 1.14, 1.0   # the paper's reference DiT (τ_mem ≈ 35·N^1.14); Bonnaire et al. 2025, Favero et al. 2025
PAPER_T = C.PAPER["tau_mem"]
J_PAPER = list(MEM_THRESHOLDS).index(PAPER_T)


def n_of(r):
    return r["meta"]["N"]


def b_curve(rows, curves):
    """b of τ_mem ∝ N^b over every run of one size at each memorization threshold (`censored_slope_curve`: a run
    that did not reach the threshold is censored at its last step, kept, not dropped)."""
    return censored_slope_curve(rows, curves, [r["meta"]["N"] for r in rows], full=True)


def b_verdict(curve, region):
    """sp.verdict of "b lies in `region`" over the memorization thresholds, the paper's 0.1 first."""
    t = [r["threshold"] for r in curve]
    return verdict(t, [r["b"] for r in curve], [r["b_ci"][0] for r in curve], [r["b_ci"][1] for r in curve],
                   region=region, paper_threshold=PAPER_T)


def section_size(size, rows, cache):
    """One DiT size: τ_mem per N pooled over seeds, b over thresholds and its verdicts; the coverage of b's interval
    at this size's design (`cache`: a coverage.Cache)."""
    curves = curves_of(rows)
    Ns = sorted({r["meta"]["N"] for r in rows})
    lines = [f"## DiT {size} ({rows[0]['params']:,} parameters)", "",
             "| N | seeds | steps | τ_mem pooled [95% CI] (per seed) |", "|---:|---:|---:|---|"]
    for N in Ns:
        rs = sorted([r for r in rows if r["meta"]["N"] == N], key=lambda r: r["seed"])
        p = pool_seeds([r["tau_mem"] for r in rs], last_steps=[float(r["steps"]) for r in rs])
        lines.append(f"| {N} | {len(rs)} | {rs[0]['steps']} | {pooled_cell(p)} |")
    curve = b_curve(rows, curves)
    out = {"params": rows[0]["params"], "Ns": Ns, "runs": [r["run"] for r in rows], "b_curve": curve}
    lines += ["", "b of τ_mem ∝ N^b over memorization thresholds (every run's ln τ_mem; a run that did not reach "
              "the threshold censored at its last step):", "", "| memorization threshold | b [95% CI] |", "|---:|---|"]
    lines += [f"| {F.threshold_label(r['threshold'], PAPER_T)} | {b_cell(r)} |" for r in curve]
    if len(Ns) < 2:
        return lines + ["", f"Only N = {Ns[0]} so far: no slope.", ""], out
    x, share, *_ = design = cov.size_design(rows, J_PAPER, n_of)
    out["coverage"] = {"design": cov.describe(x, share), "misfit": cache.get_misfit(x, share)}
    p = C.at(curve, PAPER_T)
    lines += ["", f"Coverage of the 95% interval of b at 0.1 at this size's design (N = {out['coverage']['design']}), "
              "with a random per-N deviation from the line of variance ratio × the run scatter: "
              f"{cov.misfit_text(out['coverage']['misfit'])}. {misfit_line(p)}"]
    field = b_verdict(curve, (FIELD_B, math.inf))
    out["verdict_b_above_1"] = field.word
    lines += ["", f"- b > 1 (the field's b = 1 excluded from above): {field.sentence('{:.3g}')}", ""]
    return lines, out


def misfit_line(p):
    """What the lack-of-fit test says at the paper's threshold, and which interval the verdict reads."""
    lof = p.get("lack_of_fit", {})
    if not lof or lof["why"]:
        return f"Lack of fit at 0.1: not read ({lof.get('why', 'no test')})."
    return (f"Lack of fit at 0.1: F({lof['df'][0]}, {lof['df'][1]}) = {lof['F']:.2f}, p = {lof['p']:.3f} (misfit ratio "
            f"≈ {lof['ratio']:.1f}; {lof['how']}): the verdict reads the per-N means' interval, which holds its "
            "coverage under such a misfit where it is defined (above); the runs-as-units interval beside it does not.")


MIN_N, MIN_SEEDS = 3, 2      # a size's b is compared only over this much design


def _ready(rs):
    """At least MIN_N values of N with at least MIN_SEEDS runs each."""
    counts = Counter(r["meta"]["N"] for r in rs)
    return sum(c >= MIN_SEEDS for c in counts.values()) >= MIN_N


def section_question(by, cache):
    """Does b fall toward 1 as the DiT grows? b at the paper's threshold per size over the N every size with a
    slope has (a slope depends on the N range it is read over), then over each size's own N."""
    partial = {size: rs for size, rs in by.items() if not _ready(rs)}
    by = {size: rs for size, rs in by.items() if size not in partial}
    common = sorted(set.intersection(*[{r["meta"]["N"] for r in rs} for rs in by.values()])) if by else []
    lines = ["## Does b fall toward 1 with capacity?", "",
             (f"A size joins the comparison once it has at least {MIN_N} N with at least {MIN_SEEDS} training seeds "
             "each (a slope over fewer reads the seed spread, not N). "
             + ("Still in progress, left out: " + "; ".join(f"{size} ({len(rs)} runs at N = "
                                                               f"{', '.join(map(str, sorted({r['meta']['N'] for r in rs})))})"
                                                               for size, rs in partial.items()) + "."
                if partial else "")).rstrip(), "",
             f"b at memorization 0.1, every size over the same N ({', '.join(map(str, common)) or 'none'}), then over "
             "its own N:", "", "| DiT | parameters | b over the common N [95% CI] | N | b over its own N [95% CI] |",
             "|---|---:|---|---|---|"]
    pts, out = [], {"common_N": common, "sizes": {}, "in_progress": sorted(partial)}
    for size, rs in by.items():
        own = C.at(b_curve(rs, curves_of(rs)), PAPER_T)
        same = [r for r in rs if r["meta"]["N"] in common]
        row = C.at(b_curve(same, curves_of(same)), PAPER_T) if len(common) >= 2 else None
        out["sizes"][size] = {"common": row, "own": own}
        Ns = sorted({r["meta"]["N"] for r in rs})
        lines.append(f"| {size} | {rs[0]['params']:,} | {b_cell(row) if row else '— (fewer than 2 common N)'} | "
                     f"{', '.join(map(str, Ns))} | {b_cell(own)} |")
        if row and math.isfinite(row["b"]):
            pts.append((rs[0]["params"], row))
    lines += [""]
    if len(pts) < 2:
        return lines + ["Fewer than two sizes with a slope over common N: the question is not answered yet.", ""], out
    (p0, first), (p1, last) = pts[0], pts[-1]
    apart = first["b_ci"][0] > last["b_ci"][1]
    out["falls"] = bool(apart)
    sizes = list(by)
    lines += [f"- over N = {', '.join(map(str, common))}, from {p0:,} to {p1:,} parameters b goes {first['b']:.2f} → "
              f"{last['b']:.2f}; " + ("the intervals do not overlap: b falls with capacity" if apart else
                                      "the intervals overlap")
              + f" (the field: b = {FIELD_B:g}; the paper's reference DiT: {PAPER_B}).",
              extremes_line(by, sizes, common, cache, out)]
    return lines + pairwise_lines(by, sizes, common, n_of, cache, out) + [""], out


def extremes_line(by, sizes, common, cache, out):
    """The smallest and largest sizes' b difference with every run a unit (out["difference"]) and its coverage at
    its design (no misfit)."""
    diff = out["difference"] = slope_difference(by[sizes[0]], by[sizes[-1]], common, n_of)
    cover = ""
    if math.isfinite(diff["value"]):
        pair = [[r for r in by[s] if n_of(r) in common] for s in (sizes[0], sizes[-1])]
        x, share, *_ = design = cov.difference_design(*pair, J_PAPER, n_of)
        diff["coverage"] = {"design": f"{sizes[0]}: {cov.describe(x[:len(pair[0])], share[:len(pair[0])])}; "
                                      f"{sizes[-1]}: {cov.describe(x[len(pair[0]):], share[len(pair[0]):])}",
                            **cache.get(*design)}
        cover = (f" Its interval's coverage at this design (N = {diff['coverage']['design']}): "
                 f"{cov.text(diff['coverage'])}.")
    return (f"- the difference b({sizes[-1]}) − b({sizes[0]}) over the common N, every run a unit: "
            f"{difference_text(diff)}.{cover}")


def pairwise_lines(by, sizes, common, n_of, cache, out):
    """Every pair of sizes' b difference over the common N with the per-N means as units, Holm over the pairs,
    and the coverage of those intervals at each pair's design under misfit ratios (out["pairwise"])."""
    pairs = [(a, b) for i, a in enumerate(sizes) for b in sizes[i + 1:]]
    rows = {s: [r for r in by[s] if n_of(r) in common] for s in sizes}
    diffs = [means_slope_difference(rows[a], rows[b], common, n_of) for a, b in pairs]
    holm = adjust_pvalues([d["p"] for d in diffs])
    out["pairwise"] = []
    L = [f"- every pair of sizes over the common N with the per-N means as units (each size's mean ln τ_mem per N; "
         f"Holm over the {len(pairs)} pairs):"]
    for (a, b), d, ph in zip(pairs, diffs, holm):
        x_a, sh_a = cov.size_design(rows[a], J_PAPER, n_of)[:2]
        x_b, sh_b = cov.size_design(rows[b], J_PAPER, n_of)[:2]
        c = cache.get_misfit_difference(x_a, x_b, sh_a, sh_b) if math.isfinite(d["value"]) else None
        out["pairwise"].append({"a": a, "b": b, **d, "p_holm": None if np.isnan(ph) else float(ph),
                                "coverage_misfit": c})
        L.append(f"  - b({b}) − b({a}): {means_difference_text(d)}"
                 + (f"; p_Holm {ph:.2g}" if np.isfinite(ph) else "")
                 + (f"; coverage at this design {cov.difference_misfit_text(c)}" if c else "") + ".")
    return L


INTRO = ("Parity G = 2, the scaling study's recipe (12 000 views per training image, 20 log-spaced checkpoints, 1000 "
         "samples each, data seed 0), DiT width × depth as named; τ_mem in training steps, reliably exceeds (definitions "
         "version 6, docs/definitions.md), over memorization thresholds 0.01–0.2 (the paper's 0.1 in bold). b: slope of "
         "ln τ_mem on ln N with the per-N means as the units (`scoreprobe.stats.misfit.means_slope`: each N's mean ln "
         "τ_mem — a normal likelihood with right-censoring at each run's budget and one s where runs are censored — "
         "then least squares over the N with the t interval on (number of N − 2) df), so that an N-specific deviation "
         "from the line widens the interval instead of being read as a slope; beside it every run as a unit "
         "(`scoreprobe.stats.censored.censored_fit`, n − 2 df), and the pure-error lack-of-fit test "
         "(`scoreprobe.stats.misfit.lack_of_fit`). An N whose runs are all censored has no mean: b is then undefined "
         "(the runs' fit beside it, never read for a verdict). Each interval's coverage is simulated at the design it "
         "was read on (its runs per N, each N's share censored at 0.1; `analyses/capacity_exponent/coverage.py`) and "
         "quoted beside it.")
RUNS = [F.RUN, F.col("params", lambda r: f"{r['params']:,}"), F.STEPS, F.tau_col("tau_mem"), F.PEAK, F.FINAL_MEM,
        F.TRAIN_S]


def report(args, runs):
    """(markdown, JSON-able report, rows by size)."""
    rows, missing = presets.collect_stats(args, runs, grid_mod.export_folder)
    sizes = [f"{w}x{d}" for w, d in grid_mod.PRESETS[args.preset]["sizes"]]
    never = [r for r in rows if never_started(r)]   # they read an untrained network
    out = {r["run"] for r in never}
    by = {s: [r for r in rows if r["meta"]["size"] == s and r["run"] not in out] for s in sizes}
    by = {s: rs for s, rs in by.items() if rs}
    lines = header("τ_mem ∝ N^b per model size", "capacity_exponent", args, len(rows), len(runs),
                   INTRO)
    todo = [r for r in runs if r.name in missing]
    hours = sum(scaling_grid.run_seconds(r, args.n_samples) for r in todo) / 3600
    gpu = ("the GPU preset (`--preset gpu`: N = 32…512, four sizes up to 5.0M, 5 seeds, the scaling GPU recipe) is the "
           "extension, not run here (no GPU).")
    lines += [(f"Not done: {len(todo)} runs ({_todo_text(todo)}), {hours:.1f} thread-hours at the one-thread idle "
               "rates of scoreprobe/studies/recipes.py (`--plan`; runs took ≈ 1.7× those rates with two runs and other "
               f"work on 2 cores). A session finishes only the runs it starts (`--hours`); {gpu}") if todo else
              f"Every planned run is done; {gpu}", ""]
    diverged = grid_mod.DIVERGED.get(args.preset, {})
    lines += [f"Diverged, not planned again and excluded from every fit: {name}, {why}." for name, why in diverged.items()]
    lines += [""] if diverged else []
    text, spikes = spike_lines(by)
    lines += text
    text, starts = start_lines(by, never)
    lines += text
    per_size, cache = {}, cov.Cache(args.results / f"capacity_exponent_{args.preset}_coverage.json", args.preset)
    for s, rs in by.items():
        text, per_size[s] = section_size(s, rs, cache)
        lines += text
    text, question = section_question(by, cache)
    cache.store()
    design = design_lines(by, runs)
    question["design"] = design[0][2:]   # the findings page quotes it
    lines += text + design + F.runs_section(rows, missing, RUNS)
    rep = presets.report_json(args, runs, missing, rows, sizes=per_size,
                              todo_thread_hours=round(hours, 2), question=question, diverged=diverged,
                              recovered_spikes=spikes, training_start=starts)
    return "\n".join(lines) + "\n", rep, by


def spike_lines(by):
    """The runs whose training loss spiked and recovered (row "loss_spikes", `scoreprobe.studies.divergence`):
    kept in every fit, named, and b at the paper's threshold of their size over its own N without them beside it."""
    lines, out = [], {}
    for size, rs in by.items():
        spiked = [r for r in rs if r.get("loss_spikes")]
        if not spiked:
            continue
        kept = [r for r in rs if r not in spiked]
        with_, without = (C.at(b_curve(x, curves_of(x)), PAPER_T) for x in (rs, kept))
        out[size] = {"runs": {r["run"]: r["loss_spikes"] for r in spiked}, "b_with": with_, "b_without": without}
        named = "; ".join(f"{r['run']} at step {s['step']:,} (loss {s['loss']:.3g}, {s['loss'] / s['median']:.0f}× the "
                          f"median of the lines before; back within {RECOVER:g}× by step {s['back_at']:,})"
                          for r in spiked for s in r["loss_spikes"])
        lines += [f"Training-loss spikes that recovered (some {WINDOW} consecutive logged losses after a spike with a "
                  f"median within {RECOVER:g}× the one before), kept in every fit: leaving a run out would select on its "
                  "outcome. "
                  f"{named}. b({size}) at 0.1 over its own N: {b_cell(with_)} with them, {b_cell(without)} without.", ""]
    return lines, out


def start_lines(by, never=()):
    """When each size's training started (row "train_start", `scoreprobe.studies.divergence.training_start`, from the
    runs' logs where kept) and, where it varies, b at the paper's threshold over τ_mem − start (the clock counted from
    the start) beside b over τ_mem, both over the runs with a recorded start; `never`: rows whose training never
    started, left out of `by` (named here)."""
    out, parts = {}, []
    for size, rs in by.items():
        known = [r for r in rs if r.get("train_start") is not None]
        if not known:
            parts.append(f"{size}: no run's log kept")
            continue
        st = sorted(r["train_start"] for r in known)
        row = {"runs": {r["run"]: r["train_start"] for r in known}, "min": st[0], "max": st[-1]}
        parts.append(f"{size}: steps {st[0]}–{st[-1]} (median {np.median(st):g}; {len(known)} of {len(rs)} runs)")
        if len(known) >= 3 and st[-1] > st[0]:
            shifted = [{**r, "steps": r["steps"] - r["train_start"], "curves": {**r["curves"], "tau_mem": [
                t - r["train_start"] for t in r["curves"]["tau_mem"]]}} for r in known]
            row["b"], row["b_from_start"] = (C.at(b_curve(x, curves_of(x)), PAPER_T) for x in (known, shifted))
            parts[-1] += (f"; b at 0.1 over them {b_cell(row['b'])}, counted from each run's start "
                          f"{b_cell(row['b_from_start'])}")
        out[size] = row
    lines = [f"When training started (the first logged loss below {START_LOSS:g}; an untrained network's is ≈ 1, the "
             f"0.51M DiT of the shipped recipe is below it by step 200): " + "; ".join(parts) + ". A late start delays "
             "every clock of its run by about as much, more of a small N's τ_mem than of a large N's."]
    moved = [(size, r["b"]["b"], r["b_from_start"]["b"]) for size, r in out.items() if "b" in r]
    undefined = [size for size, b0, b1 in moved if not (math.isfinite(b0) and math.isfinite(b1))]
    if undefined:
        lines[0] += (f" b is undefined for {', '.join(undefined)} (an N whose runs are all censored): counted from the "
                     "start or from step 0 is not compared there.")
        moved = [m for m in moved if m[0] not in undefined]
    if moved:
        up = all(b1 > b0 for _, b0, b1 in moved)
        lines[0] += (" Counted from each run's start, b is " + ("higher" if up else "not higher") + " for "
                     + ("every size" if up else "some size") + " whose starts vary ("
                     + ", ".join(f"{size} {b0:.2f} → {b1:.2f}" for size, b0, b1 in moved) + ")"
                     + (": late starts lower b; they do not make it exceed 1." if up else "."))
    if never:
        lines[0] += (f" Training never started in {', '.join(map(_never_text, never))}: its τ would read an untrained "
                     "network (a τ_mem censored at the budget), so it is left out of every fit.")
    return lines + [""], out


def _never_text(r):
    """'w192d4-g2-n240-s2 (lowest logged loss 0.83 at step 1,100; 0.99 at step 30,000)': the run and, where its
    export records them (`divergence.log_meta`), how close its loss came to the start and where it ended."""
    low, last = r.get("lowest_loss"), r.get("last_loss")
    if not low:
        return r["run"]
    return (f"{r['run']} (lowest logged loss {low['loss']:.2f} at step {low['step']:,}; {last['loss']:.2f} at step "
            f"{last['step']:,})")


def _todo_text(todo):
    """'192x4 at N = 120 (1 seed), 128x4 at N = 240 (3 seeds)': the runs not done, by size and N."""
    return F.todo_text(todo, lambda r: (r.meta["size"], r.meta["N"]), lambda k: f"{k[0]} at N = {k[1]}")


def design_lines(by, runs):
    """What the size comparison cannot separate: one learning rate for every size (read from the planned configs),
    and each N where a larger DiT memorizes later than a smaller one (pooled τ_mem at 0.1, every seed reached)."""
    lrs = sorted({r.cfg.lr for r in runs})
    j = J_PAPER
    later = []
    for N in sorted({r["meta"]["N"] for rs in by.values() for r in rs}):
        pooled = []
        for size, rs in by.items():
            t = [r["curves"]["tau_mem"][j] for r in rs if r["meta"]["N"] == N]
            if len(t) >= 2 and all(v is not None and math.isfinite(v) for v in t):
                pooled.append((rs[0]["params"], size, math.exp(np.mean(np.log(t)))))
        pooled.sort()
        if any(b[2] > a[2] for a, b in zip(pooled, pooled[1:])):
            later.append(f"N = {N}: " + ", ".join(f"{size} {tau:.0f}" for _, size, tau in pooled))
    lr = " and ".join(f"{v:g}" for v in lrs)
    text = (f"- Design: every size trains at lr {lr} (the recipe's; not tuned per width), so size is confounded with "
            "optimization")
    text += (": a larger DiT memorizes *later* than a smaller one at " + "; ".join(later) + " (pooled τ_mem at 0.1, "
             "steps). b per size is this recipe's exponent, not capacity alone." if later else
             "; no N shows a larger DiT memorizing later than a smaller one (pooled τ_mem at 0.1).")
    return [text, ""]


def write_all(args, runs):
    """Write <results>/capacity_exponent_<preset>.md, .json and .png; returns the .md path."""
    from analyses.capacity_exponent.figures import figure
    text, rep, by = report(args, runs)
    return presets.write_tables(args.results, f"capacity_exponent_{args.preset}", text, rep,
                                lambda png: figure(by, rep["sizes"], png))
