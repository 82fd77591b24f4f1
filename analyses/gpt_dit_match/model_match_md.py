"""The markdown of models matched per step and per training FLOP (analyses/gpt_dit_match): the training compute,
the learning-rate sweep and its choice (analyses.gpt_dit_match.lr_choice), each model at its chosen rate, the
dense-checkpoint replication, every model against the reference over thresholds (analyses.gpt_dit_match.model_match),
and which sampler each model's clocks were read with. Models are named by `labels` ({model: words})."""
import math

from scoreprobe.models.build import param_count
from scoreprobe.models.flops import counted_flops, forward_flops, n_tokens, step_flops
from scoreprobe.stats import curves as C
from analyses.gpt_dit_match import model_match as S
from scoreprobe.studies.format import ci_text, curve_table, fmt, pooled_cell


def _g(v):
    return "—" if v is None or not math.isfinite(v) else f"{v:.3g}"


def section_flops(runs, labels):
    """Per model of `runs` ({model: one of its runs}): parameters, forward FLOPs per item (formula and
    FlopCounterMode), per step, budget; (lines, {model: numbers})."""
    lines = ["## Training compute", "", "Matmul FLOPs (2 per multiply-add) of one forward pass on one training item from "
             "the architecture (scoreprobe.models.flops; attention as full T × T products), the same count by torch's "
             "FlopCounterMode on the built model, and a training step = 3 × forward × batch.", "",
             "| model | parameters | tokens | forward FLOPs per item (formula) | FlopCounterMode | per step | "
             "steps | budget (FLOPs) |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    out = {}
    for m, r in runs.items():
        f, counted, per_step, tokens = forward_flops(r.cfg), counted_flops(r.cfg), step_flops(r.cfg), n_tokens(r.cfg)
        out[m] = {"params": param_count(r.cfg), "forward_flops": f, "counted": counted, "step_flops": per_step,
                  "steps": r.steps, "budget_flops": per_step * r.steps}
        lines.append(f"| {labels[m]} | {out[m]['params']:,} | {tokens} | {f:,} | {counted:,.0f} | {_g(per_step)} | "
                     f"{r.steps} | {_g(per_step * r.steps)} |")
    return lines + [""], out


def section_sweep(chosen, p, threshold, labels):
    """The sweep of every model ({model: (lr, rows)}, analyses.gpt_dit_match.lr_choice.choices) and its choice at
    `threshold`; p: the preset (tune_data_seed, tune_seed)."""
    lines = ["## The learning-rate sweep (tuning split)", "",
             f"Data seed {p['tune_data_seed']} (its own training and held-out images), training seed {p['tune_seed']}. "
             f"Criterion, fixed before the runs (analyses.gpt_dit_match.lr_choice): the earliest τ_rule at rule accuracy "
             f"{threshold:g}; a rate that never reaches it ranks after those that do, by peak rule accuracy. "
             "The evaluation split enters no part of it.", "",
             "| model | lr | τ_rule at the criterion | peak rule_acc | chosen |", "|---|---:|---:|---:|---|"]
    for m, (_, rows) in chosen.items():
        for r in rows:
            tau = fmt(r["tau"]) if math.isfinite(r["tau"]) else "not reached"
            lines.append(f"| {labels[m]} | {r['lr']:g} | {tau} | {r['peak']:.3f} | {'**chosen**' if r['chosen'] else ''} |")
    return lines + [""]


def section_models(rows_by, curves, labels):
    """Each model at its chosen rate ({model: evaluation rows}): τ per step and per FLOP, the common-band abruptness."""
    lines = ["## Each model at its chosen rate (evaluation split)", "",
             "Pooled over training seeds (t interval on ln τ; '> x at a budget': a seed does not reach it). FLOPs: τ in "
             "steps × the model's FLOPs per step. Abruptness: slope of logit(memorized share) per decade of steps over "
             f"the checkpoints whose memorized share lies in {S.COMMON_BAND[0]:g}–{S.COMMON_BAND[1]:g}, the same band for "
             "every model (per decade of FLOPs it is the same number: FLOPs ∝ steps).", "",
             "| model | lr | seeds | τ_rule at 0.9 [steps] | τ_mem at 0.1 [steps] | τ_rule at 0.9 [FLOPs] | "
             "τ_mem at 0.1 [FLOPs] | abruptness, common band |", "|---|---:|---:|---|---|---|---|---|"]
    out = {}
    for m, rs in rows_by.items():
        f = rs[0]["step_flops"]
        rule, mem = S.pooled_at(rs, curves, "tau_rule", 0.9), S.pooled_at(rs, curves, "tau_mem", 0.1)
        ab = S.abrupt_pooled(rs)
        out[m] = {"lr": rs[0]["lr"], "tau_rule": rule, "tau_mem": mem, "abruptness": ab, "step_flops": f}
        ab_cell = (f"{fmt(ab['pooled'], 2)} {ci_text(ab['ci'], 2)}" if math.isfinite(ab["pooled"]) else "—") + \
            " (checkpoints in the band: " + " / ".join(str(r["abrupt_common"]["n_band"]) for r in rs) + \
            (f"; {ab['n_unmeasured']} seed(s) with < 2 left out" if ab["n_unmeasured"] else "") + ")"
        lines.append(f"| {labels[m]} | {rs[0]['lr']:g} | {len(rs)} | {pooled_cell(rule).split(' (')[0]} | "
                     f"{pooled_cell(mem).split(' (')[0]} | {_flop_cell(rule, f)} | {_flop_cell(mem, f)} | {ab_cell} |")
    return lines + [""], out


def _flop_cell(p, f):
    if p["lower_bound"]:
        return f"> {_g(p['pooled'] * f)}"
    return f"{_g(p['pooled'] * f)} [{_g(p['ci'][0] * f)}, {_g(p['ci'][1] * f)}]"


def section_dense(dense_by, rows_by, curves, n, n_eval, labels):
    """The dense-checkpoint runs of every model: their common-band abruptness per seed and pooled, and their τ beside
    the evaluation runs' (the same configurations trained again: a replication of the clocks)."""
    if not dense_by:
        return [], {}
    lines = ["## Abruptness with dense checkpoints", "",
             f"The evaluation runs trained again with {n} checkpoints instead of {n_eval}, read for the common-band "
             "abruptness (the comparison below uses a model's dense runs once every seed of them is done). Their τ "
             "beside the evaluation runs' is a replication of the clocks with the same TrainConfig but for the checkpoints.",
             "", "| model | seeds | abruptness, common band (checkpoints in it) | τ_rule at 0.9, dense / evaluation runs "
             "| τ_mem at 0.1, dense / evaluation runs |", "|---|---:|---|---|---|"]
    out = {}
    for m, rs in dense_by.items():
        ab = S.abrupt_pooled(rs)
        taus = {k: (S.pooled_at(rs, curves, k, t), S.pooled_at(rows_by.get(m, []), curves, k, t) if rows_by.get(m) else None)
                for k, t in (("tau_rule", 0.9), ("tau_mem", 0.1))}
        out[m] = {"abruptness": ab, **{k: {"dense": d, "evaluation": e} for k, (d, e) in taus.items()}}
        ab_cell = (f"{fmt(ab['pooled'], 2)} {ci_text(ab['ci'], 2)}" if math.isfinite(ab["pooled"]) else "—") + \
            " (" + " / ".join(str(r["abrupt_common"]["n_band"]) for r in rs) + ")"
        cells = [" / ".join(pooled_cell(x).split(" (")[0] if x else "—" for x in pair) for pair in taus.values()]
        lines.append(f"| {labels[m]} | {len(rs)} | {ab_cell} | {cells[0]} | {cells[1]} |")
    return lines + [""], out


def ahead_lines(vs, key, labels):
    """Per GPT order, per training FLOP: the thresholds where it is earlier than the DiT (CI below 1) with each value
    and interval, and where it is not, plainly."""
    out = []
    for m, v in vs.items():
        curve = v[key]["flop"]
        rel, grid = C.relation(curve, 1.0), [r["threshold"] for r in curve]
        ahead = ", ".join(f"{t:g}: {fmt(C.at(curve, t)['value'], 2)} {ci_text(C.at(curve, t)['ci'], 2)}"
                          for t in rel["below"]) or "at no threshold"
        rest = "; ".join(f"{what} at {C.span(rel[k], grid)}" for k, what in (
            ("includes", "CI includes 1"), ("above", "behind (CI above 1)"), ("censored", "censored"),
            ("under_resolved", "under-resolved")) if rel[k])
        out.append(f"- Per FLOP, {labels[m]} earlier than the DiT ({'τ_rule' if key == 'tau_rule' else 'τ_mem'}, CI below "
                   f"1): {ahead}" + (f"; {rest}" if rest else "") + ".")
    return out


def section_versus(vs, labels):
    """Every model against the reference over thresholds (S.versus_dit), per step and per FLOP, and the abruptness."""
    lines = ["## Every GPT order against the DiT, over thresholds", "",
             "GPT / DiT of the geometric-mean τ over training seeds (Welch t interval on ln τ, 95%), per training step and "
             "per training FLOP (the step ratio × the GPT's FLOPs per step / the DiT's); censored where a seed does not "
             "reach the threshold.", ""]
    words = {"below": "the GPT earlier", "includes": "CI includes 1", "above": "the GPT later"}
    for key, head, paper in (("tau_rule", "rule threshold", 0.9), ("tau_mem", "memorization threshold", 0.1)):
        cols = [(f"{labels[m]} / DiT per {'step' if unit == 'step' else 'FLOP'}", v[key][unit]) for m, v in vs.items()
                for unit in ("step", "flop")]
        if not cols:
            continue
        lines += curve_table(head, cols, paper) + [""]
        lines += [f"- {label}: {C.robust(c, 1.0, words)}; ratio {C.range_text(c)}." for label, c in cols] + [""]
        lines += ahead_lines(vs, key, labels) + [""]
    for m, v in vs.items():
        d = v["abruptness"]
        if d.get("censored"):
            text = "not measured (a seed of either has fewer than 2 checkpoints in the band)"
        else:
            verdict = "more abrupt" if d["ci"][0] > 0 else "less abrupt" if d["ci"][1] < 0 else "not distinguishable"
            text = f"{fmt(d['value'], 2)} {ci_text(d['ci'], 2)} logit per decade (Welch t): {verdict}"
        runs = "; ".join(f"{who}: {'dense-checkpoint' if v.get(key) == 'dense' else 'evaluation'} runs"
                         for who, key in (("GPT", "abruptness_from"), ("DiT", "dit_abruptness_from")))
        lines.append(f"- abruptness {labels[m]} − DiT over the common band ({runs}): {text}; the GPT's FLOPs per step are "
                     f"{fmt(v['flop_factor'], 2)}× the DiT's.")
    return lines + [""]


def samplers_text(rows, labels):
    """Which sampler each model's clocks were read with (every run's export), and what that means for the match."""
    by = {}
    for r in rows:
        by.setdefault(labels[r["match_model"]], set()).add(r["sampler"])
    kinds = "; ".join(f"{m}: {' / '.join(sorted(v))}" for m, v in by.items())
    differ = len({frozenset(v) for v in by.values()}) > 1
    return (f"**Samplers** (each run's export, its clocks settings): {kinds}. " + (
        "The models are not read with one sampler, and how many samples copy depends on the sampler (analyses/README.md, "
        "'Memorization depends on the sampler'), so a GPT − DiT difference in τ_mem or in copy rates holds for these "
        "samplers, not for the architectures alone." if differ else "One sampler for every model."))


def by_model(rows, split, models):
    """{model: its rows of `split`, by training seed} for the models that have any."""
    by = {m: sorted([r for r in rows if r["split"] == split and r["match_model"] == m], key=lambda r: r["seed"])
          for m in models}
    return {m: rs for m, rs in by.items() if rs}
