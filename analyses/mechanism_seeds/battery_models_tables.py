"""The tables of the battery on several trained models of a series (scoreprobe.studies.battery_series;
analyses/mechanism_seeds), from the report dict alone: the models, the half-change steps (per model and pooled,
their ratio to the clocks), the per-step curves with where their variance comes from, the capture geometry, the
DSM split and the basin shares by plane kind. Each returns markdown lines."""
from scoreprobe.reports.report_cells import (curve_cell as _cell, finite as _ok, num as _f, step_text as _s,
                                             tau_cell as _tau, window_text as _window)
from scoreprobe.stats.crossed import CROSSED_METHOD, MODELS_UNITS_METHOD
from scoreprobe.studies.format import sigma_runs

BASIN_COLUMNS = ("off-vertex (local planes)", "off-vertex (reach planes)", "valid basin", "violating basin",
                 "held-out basin", "training basin", "t − h basin (symmetric planes)")


def design_lines(s):
    """Two paragraphs on the design of study settings `s` (seeds, extra, probe_seeds, probes): trained models and
    units crossed, what the battery measures and what one unit is; then how the intervals are made."""
    pr = s["probes"]
    return [f"Each series is trained with training seeds {s['seeds']} (weights, minibatches, training noise) at data "
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
            "part of the mean's variance that comes from the models.", ""]


def models_table(report):
    """'## Models': one row per trained model of every series (seeds, steps, τ, window, seconds)."""
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


def half_change_table(name, rep):
    """'## <series>: half-change steps': per model, pooled, the units' share and the ratios to τ."""
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
    """'## <series>: over training': every curve's mean [95% CI] per step, then where its variance comes from."""
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
    """'## <series>: basin shares by plane kind' at the first, second, middle and last step."""
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
    """'## <series>: DSM split': the significant σ per step, crossed and within each model ([] without DSM)."""
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
    """'## <series>: capture geometry': captured, nearer own and the median distance ratio per model."""
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
