"""The markdown of analyses/mechanism_seeds, from the report dict alone (every number is in the json)."""
import math

from scoreprobe.studies.format import sigma_runs
from analyses.mechanism_seeds.claims import CLAIMS
from scoreprobe.stats.crossed import CROSSED_METHOD, MODELS_UNITS_METHOD

NR = "not reached"
BASIN_COLUMNS = ("off-vertex (local planes)", "off-vertex (reach planes)", "valid basin", "violating basin",
                 "held-out basin", "training basin", "t − h basin (symmetric planes)")


def _ok(v):
    return isinstance(v, (int, float)) and math.isfinite(v)


def _f(v, d=3):
    return f"{v:.{d}f}" if _ok(v) else "—"


def _s(v):
    return f"{v:.0f}" if _ok(v) else NR


def _cell(c, i, d=3):
    """'mean [lo, hi]' of a curve at step index i."""
    if c is None or not _ok(c["mean"][i]):
        return "—"
    return f"{_f(c['mean'][i], d)} [{_f(c['lo'][i], d)}, {_f(c['hi'][i], d)}]"


def _tau(r, key):
    ci = r.get(key + "_ci") or [None, None]
    return _s(r[key]) if not _ok(r[key]) else f"{_s(r[key])} [{_s(ci[0])}, {_s(ci[1])}]"


def _window(r):
    if not r.get("window_open"):
        return "closed"
    return " ∪ ".join(f"{_s(a)}–{_s(b)}" for a, b in r.get("window_intervals") or [])


def intro(report):
    s, p = report["settings"], report["preset"]
    cmd = "python analyses/mechanism_seeds" + ("" if p == "cpu" else f" --preset {p}") + " --from-results"
    pr = s["probes"]
    return [f"# The mechanism on trained seeds (preset {p})", "",
            f"Regenerate: `{cmd}` (from the per-model exports in `{report['exports']}/`). {report['n_done']} of "
            f"{report['n_planned']} planned models done" + (f"; not done: {', '.join(report['missing'])}."
                                                             if report["missing"] else "."), "",
            f"Each series is trained with training seeds {s['seeds']} (weights, minibatches, training noise) at data "
            "seed 0 (one training set per series: the data draw is not varied here), with the early checkpoints "
            f"{s['extra']} beside its log grid. Every model is measured with the same probe seeds {s['probe_seeds']} "
            "(which draw the planes, the retention items with their restart noise and the DSM noise banks), so it "
            "sees the same units: trained models and units are **crossed**. Basins: planes of three kinds drawn "
            f"({pr['n_planes']} per kind and probe seed, {pr['res']}² grids, σ_start {pr['sigma_starts']}) plus the "
            f"symmetric planes on the noise-reach grid (σ {pr['reach_sigmas']}); retention {pr['ret_items']} training "
            f"+ {pr['ret_items']} held-out items per probe seed × {pr['ret_noise']} restarts at σ {pr['ret_sigmas']}; "
            f"DSM over {pr['dsm_sigmas']} σ, {pr['dsm_noise']} noise draws per item. One unit per independent thing "
            "(a plane drawn twice counts once; symmetric planes sharing a training/held-out pair are averaged "
            "into one unit; a retention item once; a DSM pair once).", "",
            f"Intervals (95%), docs/definitions.md \"Trained models and units\": a mean over models and units — "
            f"{CROSSED_METHOD}; it counts the model × unit residual twice (conservative). A statistic computed per "
            f"model (a half-change step, its ratio to the model's own τ, a ratio of means, a difference of two unit "
            f"sets) — {MODELS_UNITS_METHOD} (the units resampled once per replicate for all models: a nested "
            "resampling would divide the shared unit variance by the number of models). Not a percentile bootstrap "
            "over models: with 3 models it is close to [min, max] of them. `one-model ×` is how many times too "
            "narrow an interval over the units of one model is for the next trained model; `models' share` the "
            "part of the mean's variance that comes from the models.", "",
            "**This study is the evidence for the mechanism's claims.** The one-model study (`mechanism.md`, "
            "`mechanism_remeasured.md`: one trained model per series, intervals over its units only) reads the same "
            "quantities as point estimates of one model; where its readings say more than the verdicts below, these "
            "verdicts stand (`mechanism.md` lists both side by side).", ""]


def models_table(report):
    lines = ["## Models", "", "| series | model | training seed | data seed | steps | checkpoints | measured steps | "
             "τ_rule [95% CI] | τ_mem [95% CI] | window | peak rule acc | final mem | seconds train / clocks / probes |",
             "|---|---|---:|---:|---:|---:|---|---|---|---|---:|---:|---|"]
    for name, rep in report["series"].items():
        for r in rep["models"]:
            sec = " / ".join(_f(r["seconds"].get(k), 0) for k in ("train", "clocks", "probes"))
            sec += " (resumed: the last invocation's only)" if r.get("resumed") else ""
            lines.append(f"| {name} | {r['name']} | {r['training_seed']} | {r['data_seed']} | {r['steps']} | "
                         f"{r['checkpoints']} | {len(r['measured'])} ({r['measured'][0]}–{r['measured'][-1]}) | "
                         f"{_tau(r, 'tau_rule')} | {_tau(r, 'tau_mem')} | {_window(r)} | {_f(r['peak_rule_acc'])} | "
                         f"{_f(r['final_mem_ratio'])} | {sec} |")
    return lines + [""]


CENSORED = {"before": "before the first step fitted", "after": "after the last step fitted",
            "too few": "too few steps up to its extreme"}


def claim_statistic(c):
    if "at_paper" in c:
        clock = "τ_rule" if c["test"][1] == "tau_rule" else "τ_mem"
        a = c.get("at_paper")
        head = f"half-change {_s(c['half_change'])} / {clock}"
        if c["censored_models"]:
            return f"half-change / {clock}", f"censored in {len(c['censored_models'])} model(s): " + \
                ", ".join(CENSORED[x] for x in c["censored_models"])
        if a is None or a["censored"]:
            return f"{head} at {a['threshold'] if a else '—'}", f"{clock} not reached in some model"
        rng = f"{_f(c['range'][0], 2)}–{_f(c['range'][1], 2)} over {len(c['readable'])} thresholds"
        return f"{head} at {a['threshold']:g}", f"{_f(a['value'], 2)} [{_f(a['ci'][0], 2)}, {_f(a['ci'][1], 2)}]; {rng}"
    if "value" not in c:
        return f"at step {c.get('step', '—')}", c.get("note", "—")
    per = " / ".join(_f(v) for v in c["per_model"])
    return f"mean at step {c['step']}", f"{_f(c['value'])} [{_f(c['ci'][0])}, {_f(c['ci'][1])}] (models: {per})"


def _interim(n):
    """A line when some claims cannot be tested yet: Holm is over the testable ones only, so it will tighten."""
    if n >= len(CLAIMS):
        return []
    return ["", f"**Interim:** {n} of the study's {len(CLAIMS)} claims are testable now (a series needs 2 trained "
            "models); Holm is over these, so every adjusted p grows (and a verdict may change) when the rest are "
            "added."]


def claims_table(report):
    rows = report["claims"]
    lines = [f"## Claims ({len(rows)}; Holm over all of them, family-wise error 0.05)", "",
             "Tests (module claims.py): \"before\" / \"after\" a clock = half-change / τ < 1 / > 1, \"near\" = within a "
             "factor 2 (TOST), each at every readable threshold of the clock, p = the largest (a claim holds only "
             "where it holds at every readable threshold); a claim at one step = the crossed mean there, one-sided.",
             *_interim(len(rows)), "", "| # | series | claim | statistic | value [95% CI] | p | Holm p | verdict |",
             "|---:|---|---|---|---|---:|---:|---|"]
    for i, c in enumerate(rows, 1):
        stat, val = claim_statistic(c)
        lines.append(f"| {i} | {c['series']} | {c['claim']} | {stat} | {val} | {_p(c['p'])} | {_p(c.get('p_holm'))} | "
                     f"**{c['verdict']}** |")
    plain = [f"- {c['series']}: *{c['claim']}* — **{c['verdict']}**{_why(c)}" for c in rows
             if c["verdict"] != "supported"]
    return lines + [""] + controls_lines(report) + ["Null and contrary results, plainly:" if plain else
                                                    "Every claim is supported.", ""] + plain + [""]


def controls_lines(report):
    """Each control beside its claim (claims.CONTROLS: the same test where the claim's reading would not follow;
    one-sided p, outside the Holm family), what it means for the claim, and the memorized share of the samples
    at the claim's step."""
    out, said = [], set()
    for c in report.get("controls", []):
        n = c["for_claim"]
        claim = report["claims"][n - 1]
        if "value" not in c:
            out.append(f"- Control for claim {n}: {c['control']} — {c.get('note', 'not measured')}.")
            continue
        per = " / ".join(_f(v, 4) for v in c["per_model"])
        side = "above 0 as well" if c["p"] < 0.05 else "not resolved above 0"
        out.append(f"- Control for claim {n} ({claim['series']}: {_f(claim['value'], 4)} [{_f(claim['ci'][0], 4)}, "
                   f"{_f(claim['ci'][1], 4)}] at step {claim['step']}, Holm p {_p(claim.get('p_holm'))}): "
                   f"{c['control']}: {_f(c['value'], 4)} [{_f(c['ci'][0], 4)}, {_f(c['ci'][1], 4)}] at step {c['step']} "
                   f"(models: {per}), one-sided p {_p(c['p'])} (a control: outside the Holm family) — {side}.")
        said.add(n)
    for n in sorted(said):
        claim = report["claims"][n - 1]
        hits = [c for c in report["controls"] if c["for_claim"] == n and "value" in c and c["p"] < 0.05]
        if hits:
            where = ", ".join(f"step {c['step']} (p {_p(c['p'])})" for c in hits)
            out.append(f"- So the gap of claim {n} does not tell the {claim['series']} window from the other: the "
                       f"{hits[0]['series']}-window series, which learns the rule, has it too before its τ_rule, at "
                       f"{where}.")
        copies = report.get("copies_at_claim_steps", {}).get(f"{claim['series']}@{claim['step']}")
        if copies:
            out.append(f"- What copying in samples would show at claim {n}'s step {copies['step']}: the memorized share "
                       f"of each {claim['series']} model's samples there (its clocks) is "
                       + " / ".join(_f(v) for v in copies["per_model"]) + ".")
    return out + ([""] if out else [])


def _p(p):
    return "—" if p is None or not _ok(p) else f"{p:.2g}" if p >= 1e-4 else "< 1e-4"


def _why(c):
    if c["verdict"] == "not testable":
        return f": {c.get('note', 'no number')}."
    if "at_paper" in c:
        cens = f"; not readable at {len(c['censored'])} thresholds" if c["censored"] else ""
        return f" (ratio {_f(c['range'][0], 2)}–{_f(c['range'][1], 2)} over the readable thresholds{cens})."
    return f" (mean {_f(c.get('value'))} [{_f(c['ci'][0])}, {_f(c['ci'][1])}] at step {c['step']})."


def half_change_table(name, rep):
    lines = [f"## {name}: half-change steps", "",
             "Midpoint of a logistic in ln(step) fitted to each model's mean curve (positive steps up to its extreme; "
             "a midpoint outside the fitted steps is censored). Per model with its one-model interval (units "
             "only); pooled = geometric mean over the models with the models-and-units interval; `units` = the "
             "units' share of its variance. Ratios at the paper's thresholds (0.9, 0.1); every threshold in the json.",
             "", "| quantity | units | per model [one-model 95% CI] | pooled [95% CI] | units | / τ_rule (0.9) | "
             "/ τ_mem (0.1) |", "|---|---:|---|---|---:|---|---|"]
    for q, h in rep["half_change"].items():
        per = "; ".join(_one_model(v, c, ci, h["fit_first"], end)
                        for v, c, ci, end in zip(h["per_model"], h["censored"], h["per_model_ci"], h["fit_ends"]))
        ln = h["ln_step"]
        share = _f(ln["var_units"] / (ln["var_units"] + ln["var_models"]), 2) if ln and ln["var_models"] > 0 else "—"
        pooled = f"{_s(h['step'])} [{_s(h['ci'][0])}, {_s(h['ci'][1])}]" if ln else "— (censored)"
        lines.append(f"| {q} | {h['n_units']} | {per} | {pooled} | {share} | {_ratio(h, 'tau_rule', 0.9)} | "
                     f"{_ratio(h, 'tau_mem', 0.1)} |")
    return lines + [""]


def _one_model(v, censored, ci, first, end):
    """'9153 [8870, 9445]' of one model; a censored value or interval end reads '< first' / '> last fitted step'."""
    def end_text(x):
        return f"< {first:.0f}" if x is not None and x == 0 else f"> {end:.0f}" if not _ok(x) else f"{x:.0f}"
    if censored:
        return {"before": f"< {first:.0f}", "after": f"> {end:.0f}"}.get(censored, "too few steps")
    return f"{v:.0f} [{end_text(ci[0])}, {end_text(ci[1])}]"


def _ratio(h, key, t):
    r = next(r for r in h["ratio"][key] if abs(r["threshold"] - t) < 1e-9)
    return "—" if r["censored"] else f"{_f(r['value'], 2)} [{_f(r['ci'][0], 2)}, {_f(r['ci'][1], 2)}]"


def _vs(step, tau):
    return "—" if not tau else f"{step / tau:.2f}"


def over_training(name, rep):
    c, steps, tau = rep["curves"], rep["steps"], rep["tau_mem_geomean"]
    cols = [k for k in BASIN_COLUMNS if k in c]
    other = [k for k in c if k not in BASIN_COLUMNS]
    lines = [f"## {name}: over training (models and units; mean [95% CI])", ""]
    for group in (cols, other):
        lines += ["| step | × τ_mem | " + " | ".join(group) + " |", "|---:|---:|" + "---|" * len(group)]
        lines += [f"| {s} | {_vs(s, tau)} | " + " | ".join(_cell(c[k], i) for k in group) + " |"
                  for i, s in enumerate(steps)] + [""]
    lines += ["Where the variance of the mean comes from (crossed quantities): models' share of it and how many "
              "times too narrow one model's interval (units only) would be, median over the steps [max].", "",
              "| quantity | units | models' share | one-model × |", "|---|---:|---|---|"]
    for k, v in c.items():
        if "model_share" in v:
            lines.append(f"| {k} | {v['n_units']} | {_med(v['model_share'], 2)} | {_med(v['one_model_factor'], 1)} |")
    return lines + [""]


def _med(vals, d):
    v = sorted(x for x in vals if _ok(x))
    return "—" if not v else f"{v[len(v) // 2]:.{d}f} [{v[-1]:.{d}f}]"


def kinds_table(name, rep):
    steps = rep["steps"]
    pick = sorted({0, 1, len(steps) // 2, len(steps) - 1} & set(range(len(steps))))
    lines = [f"## {name}: basin shares by plane kind (local grid)", "",
             "| kind | step | training | held-out | novel | violating | off-vertex |", "|---|---:|---|---|---|---|---|"]
    for kind, qs in rep["kinds"].items():
        for i in pick:
            lines.append(f"| {kind} | {steps[i]} | " + " | ".join(_cell(qs.get(q), i, 2) for q in
                                                                   ("training", "heldout", "novel", "violating",
                                                                    "off_vertex")) + " |")
    return lines + [""]


def dsm_table(name, rep):
    d = rep["dsm"]
    if d is None:
        return []
    per = " / ".join(_s(m["first_significant_step"]) for m in d["per_model"])
    lines = [f"## {name}: DSM split", "",
             f"Held-out − training loss per (step, σ), {d['n_pairs']} pairs: one-sided p with models and pairs as "
             "units (crossed), Holm over all steps × σ; first significant step "
             f"{_s(d['first_significant_step'])}. Within each model alone (its pairs, Holm over its steps × σ, "
             f"as the one-model study): first significant step {per}.", "",
             "| step | significant σ, models and pairs | count | within each model: count |", "|---:|---|---:|---|"]
    for i, s in enumerate(rep["steps"]):
        sig = d["significant_sigma"][i]
        own = " / ".join(str(len(m["significant_sigma"][i])) for m in d["per_model"])
        lines.append(f"| {s} | {sigma_runs(sig, d['sigma'])} | {len(sig)} of {len(d['sigma'])} | {own} |")
    return lines + [""]


def capture_table(name, rep):
    lines = [f"## {name}: capture geometry", "", "Median over each model's items with a capture of d(start, own item) "
             "/ d(start, capturing training item) (< 1: the start was nearer its own item), per model.", "",
             "| σ | step | captured | nearer own, share of captured | median distance ratio per model |",
             "|---:|---:|---|---|---|"]
    for sig, med in rep["distance_ratio_median"].items():
        cap, near = rep["curves"].get(f"held-out captured (σ {sig})"), rep["curves"].get(
            f"nearer own, share of captured (σ {sig})")
        for i, s in enumerate(rep["steps"]):
            m = " / ".join(_f(v[i], 2) for v in med) if med else "—"
            lines.append(f"| {sig} | {s} | {_cell(cap, i)} | {_cell(near, i)} | {m} |")
    return lines + [""]


def markdown(report, figure=None):
    lines = intro(report) + models_table(report) + claims_table(report)
    for name, rep in report["series"].items():
        if rep.get("n_models", 0) < 2:
            lines += [f"## {name}", "", f"{rep.get('n_models', 0)} model(s) done: the tables need 2.", ""]
            continue
        lines += (half_change_table(name, rep) + over_training(name, rep) + capture_table(name, rep)
                  + dsm_table(name, rep) + kinds_table(name, rep))
    if figure:
        lines += ["## Figure", "", f"![per-model curves and the pooled mean]({figure})", ""]
    return "\n".join(lines)
