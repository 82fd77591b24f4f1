"""Re-report of the mechanism study from its shipped json alone (issue 35), for when the measurement
stores (runs/mechanism, git-ignored) are not at hand: what the new statistics can derive exactly from
the shipped numbers, and what they cannot.

Exact from the json: the paired DSM tests under Holm / BH over the whole step × σ family (raw p-values
from the stored z and pair counts), the significant σ as sets, the first significant step, the DSM gap's
half-change as a fitted sigmoid (the stored per-σ paired gaps are means over the pairs of the
seed-averaged losses: one unit per pair); the unit counts (planes and items are drawn from the seeds
without any model). Point estimates only: fitted half-changes of the basin / retention curves (the
shipped means weight a plane drawn by two seeds twice). Not derivable: any CI over the deduplicated
units and the capture geometry (they need the per-plane / per-item stores). Then the markdown of it.
"""
import json
import math
from pathlib import Path

import numpy as np

from analyses.mechanism import measure as M
from analyses.mechanism.evidence import evidence_lines
from scoreprobe.atomic import atomic_write_text
from analyses.mechanism.battery_tables import (clocks_table, drawn_units_table, dsm_rows, half_cell, shares_table,
                                               symmetry_table, tau_ratios)
from scoreprobe.reports.report_cells import curve_cell, num, step_text
from scoreprobe.stats.dsm_stats import family_from_z
from scoreprobe.stats.timing import fitted_midpoint
from scoreprobe.studies.battery import KINDS, complete_dsm
from scoreprobe.studies.battery_summary import DSM_BAND, drawn_units, dsm_half_change
from scoreprobe.studies.recipes import config_data


def series_data(args, name):
    """An object with .dataset and .rule of series `name`, without a model: the shipped open series, or
    the closed one's dataset made from its training config (the trainer's make_dataset)."""
    if name == "open":
        from scoreprobe.loading.series import load_series
        return load_series(args.open_series)
    return config_data(M.closed_config(args))


def curves_of(r):
    """{quantity: (mean curve, {seed: curve}, units)} of the old half-change table, from the shipped json."""
    b, out = r["basins"], {}
    kinds = [f"{k}/local" for k in KINDS if f"{k}/local" in b]
    for q in ("valid", "violating", "training", "heldout"):
        per_kind = [b[k]["1.0"][q] for k in kinds]
        mean = np.mean([c["mean"] for c in per_kind], axis=0)
        by_seed = {s: np.mean([c["by_seed"][s] for c in per_kind], axis=0) for s in per_kind[0]["by_seed"]}
        out[f"{q} basin share (all planes, σ_start 1.0)"] = (mean, by_seed, "planes")
    sym = r["symmetry"]["basins"]
    out["training − held-out basin (symmetric planes)"] = (np.asarray(sym["mean"]), sym["by_seed"], "planes")
    cap = r["retention"]["heldout"]["1.0"]["captured"]
    out["held-out captured (σ 1)"] = (np.asarray(cap["mean"]), cap["by_seed"], "held-out items")
    d = r["dsm"]
    band = [i for i, s in enumerate(d["sigma"]) if DSM_BAND[0] <= s <= DSM_BAND[1]]
    gap = np.asarray(d["paired_gap"], dtype=float)[:, band].mean(axis=1)
    out[f"DSM paired gap, σ in {list(DSM_BAND)}"] = (gap, {}, "pairs")
    return out


def half_changes(r):
    """Fitted-sigmoid half-changes (point estimates) next to the shipped first-to-extreme ones."""
    out = {}
    for q, (mean, by_seed, unit) in curves_of(r).items():
        old = r["half_change"].get(q, {})
        out[q] = {**fitted_midpoint(r["steps"], mean), "units": unit,
                  "by_seed": {s: fitted_midpoint(r["steps"], c)["step"] for s, c in by_seed.items()},
                  "old_step": old.get("step"), "old_ci": old.get("ci"), "exact_mean_curve": unit == "pairs"}
    return out


def capture_note(r):
    """The old statistic: the share of held-out starts closer to a valid non-training vertex, min over
    steps and σ (1 means "captured although closer" = plain capture)."""
    ho = r["retention"]["heldout"]
    shares = [v for s, c in ho.items() if float(s) <= 2.0 for v in c["closer_nontrain"]["mean"]]
    return {"closer_nontrain_min_sigma_le_2": float(np.min(shares)),
            "captured_minus_captured_closer_max": float(np.max(np.abs(
                np.asarray(ho["1.0"]["captured"]["mean"]) - np.asarray(ho["1.0"]["captured_closer"]["mean"]))))}


def dsm_from_stores(args, name, steps):
    """{seed: DSM store at `steps`} when every seed's store of series `name` is under args.out with every
    step (the preset's settings), else None. The closed series only when it is trained under args.out."""
    from scoreprobe.studies.queue import finished
    from scoreprobe.loading.series import load_series
    if name == "open":
        series = load_series(args.open_series)
    elif finished(Path(args.out) / "closed", M.closed_config(args)):   # trained here: its DSM stores may be too
        series = load_series(Path(args.out) / "closed")
    else:
        return None
    return complete_dsm(args, name, series, steps)


def rereport(args, path):
    """The shipped json with a 're_report' section (the statistics above); returns the whole dict."""
    report = json.loads(Path(path).read_text())
    old = (report.pop("re_report", None) or {}).get("series", {})
    new = {}
    for name, r in report["series"].items():
        new[name] = {"units": drawn_units(args, series_data(args, name)), "dsm": family_from_z(r["dsm"], r["steps"]),
                     "half_change": half_changes(r), "capture": capture_note(r)}
        stores = dsm_from_stores(args, name, r["steps"])
        if stores is not None:   # remeasured: the DSM gap's half-change gets its CI over pairs
            new[name]["dsm_half_change_from_stores"] = dsm_half_change(stores, r["steps"], args.n_boot,
                                                                       r["dsm"]["paired_gap"])
        elif "dsm_half_change_from_stores" in old.get(name, {}):   # stores gone (not shipped): keep what they gave
            new[name]["dsm_half_change_from_stores"] = old[name]["dsm_half_change_from_stores"]
    report["re_report"] = {"issue": 35, "series": new, "from": "the shipped json (stores not shipped)"}
    return report


# ---------------------------------------------------------------------------------------------
# The markdown
# ---------------------------------------------------------------------------------------------

def _s(v):
    return step_text(v, "—")


def _f(v, d=3):
    return num(v, d)


def rereport_markdown(report, args, remeasured=None):
    rr = report["re_report"]["series"]
    lines = ["# The mechanism, measured (preset cpu), re-reported with the statistics of issue 35", "",
             ("Measured by `python analyses/mechanism` (2026-12-01; stores under `runs/mechanism`, git-ignored and "
              "not shipped); re-reported from the shipped `mechanism.json` by `python analyses/mechanism "
              "--rereport`, which adds its numbers to that json under `re_report`. Definitions: docs/definitions.md "
              "(\"Plane protocol\" with its \"Units\", \"Per-item basins\", \"DSM loss by σ\", \"Half-change "
              "steps\")."), "",
             ("**Each series is ONE trained model** (open: the shipped `checkpoints/parity-default`; closed: G = 2, "
              "N = 30 trained by the study): every interval below is over the planes / items / DSM pairs of that one "
              "model, the uncertainty of the measurement given the model, not the spread over training runs. "
              f"Seeds {args.seeds} are the seeds of the plane draws, the retention items and restart noise, and the "
              "DSM noise banks, not training seeds."), "",
             "## Units: what each number rests on", "", *drawn_units_table({n: r["units"] for n, r in rr.items()})]
    lines += ["", *_supports(rr), *_remeasured(remeasured), "", "## Series and clocks", "", *clocks_table(report)]
    for name, r in report["series"].items():
        lines += [""] + _half_md(name, r, rr[name]) + [""] + _dsm_md(name, r, rr[name]["dsm"])
        lines += [""] + _capture_md(name, r, rr[name]["capture"]) + [""] + _symmetry_md(name, r)
        lines += [""] + _shares_md(name, r)
    lines += ["", *evidence_lines(report, Path(remeasured).with_name("mechanism_seeds.json") if remeasured else ""),
              "## Reading of one model (point readings by mechanical criteria; not the evidence: see the section above)",
              ""]
    lines += _claims_md(report)
    lines += ["", "## Figures (from the measurement, 2026-12-01; not redrawn: they show the old statistics)", ""]
    lines += [f"- `mechanism_{f}`" for f in ("basins.png", "retention.png", "dsm.png", "open_basins.gif",
                                             "closed_basins.gif")]
    return "\n".join(lines) + "\n"


def _supports(rr):
    o, c = rr["open"]["units"], rr["closed"]["units"]
    return ["## What the shipped json supports", "",
            ("- **Exact**: the paired DSM tests under Holm and Benjamini–Hochberg over the whole step × σ family (the "
             "raw p-values from the stored z and pair counts; Holm per step on them reproduces the stored adjusted "
             f"p-values {_exactly(rr)}), the "
             "significant σ as sets, the first significant step, and the DSM gap's mean curve (one unit per pair)."),
            ("- **Point estimates only**: the half-change steps, now the midpoint of a logistic in ln(step) fitted to "
             "the mean curve. The shipped basin and retention means count a plane or item drawn by two seeds "
             "twice."),
            ("- **Not derivable without the stores**: any interval over the deduplicated units, and the capture "
             "geometry that replaces \"captured although closer\". The shipped intervals kept below (symmetry test, "
             f"capture, basin shares) resample the 33 planes drawn per kind (symmetric: {o['symmetric/local']['distinct_planes']} "
             f"distinct in {o['symmetric/local']['clusters']} pairs for the open series, "
             f"{c['symmetric/local']['distinct_planes']} in {c['symmetric/local']['clusters']} for the closed one) and "
             f"the 96 items drawn per split (the closed series' {c['retention_train_items']['distinct']} training "
             f"items each three times): **they are narrower than intervals over the independent units** and are "
             "marked *(not deduplicated)*."),
            ("- To measure them: `python analyses/mechanism` (CPU preset ≈ 48 min on 2 idle cores; it now measures "
             "each distinct plane once and reports cluster-bootstrap CIs, the capture geometry and fitted "
             "half-changes with CIs). The whole preset did not fit here: with the 2 shared cores loaded ≈ 11 by "
             "other jobs, a niced run measured one checkpoint of one seed's DSM store (the cheapest probe) about "
             "every 2 minutes, and the preset has 2 series × 3 seeds × 10 checkpoints of each probe; still missing: "
             "retention at σ = 0.1–0.7 and 5, the noise-reach grids and the animations.")]


def _claims_md(report):
    out = []
    for name, r in report["series"].items():
        rr, t = report["re_report"]["series"][name], r["taus"]
        for q, h in rr["half_change"].items():
            step = h["step"]
            near = [("—" if not (step and isinstance(t.get(k), float) and math.isfinite(t[k])) else
                     "yes" if t[k] / 2 <= step <= 2 * t[k] else "no") for k in ("tau_rule", "tau_mem")]
            out.append(f"- {name}: {q}: fitted half-change {_s(step)}; point within a factor 2 of τ_rule: {near[0]}; "
                       f"of τ_mem: {near[1]} (no interval from the shipped json)")
        out.append(f"- {name}: symmetric planes, t − h basin: undecided at every checkpoint (the shipped intervals "
                   f"resample {rr['units']['symmetric/local']['drawn']} planes drawn, "
                   f"{rr['units']['symmetric/local']['distinct_planes']} distinct in "
                   f"{rr['units']['symmetric/local']['clusters']} pairs)")
        d = rr["dsm"]
        sets = d["holm"]["significant_sigma"]
        low = min((v for row in sets for v in row), default=None)
        out.append(f"- {name}: DSM: a held-out > train gap significant under Holm over all {d['family_size']} step × σ "
                   f"tests at {sum(1 for row in sets if row)} of {len(sets)} checkpoints; first significant step "
                   f"{_s(d['holm']['first_significant_step'])}; lowest significant σ {_f(low, 3)}")
    return out


def _exactly(rr):
    err = max(r["dsm"]["per_step_holm_reproduced_max_abs_error"] for r in rr.values())
    return "exactly" if err == 0 else f"to {err:.1g}"


def _remeasured(path):
    """A pointer to the remeasurement with the new statistics, when its report is next to this one."""
    if path is None or not Path(path).is_file():
        return []
    return [("- **Remeasured here** with every statistic of the new report (cluster-bootstrap CIs over the "
             "distinct planes' pairs, items and DSM pairs, the capture geometry, fitted half-changes with CIs), for "
             "both series — the open one from the shipped checkpoints, the closed one retrained here with the same "
             "configuration (its clocks reproduce τ_mem 1551 [1479, 1637] and its DSM the shipped paired gaps "
             "exactly) — with the preset's seeds and settings but only: the DSM, retention at σ = 1 and 2, and the "
             "distinct planes of the three kinds on the local grid (no noise-reach grids, no animation): "
             f"`{Path(path).name}`. Where the two differ, the remeasured numbers are the ones to use; for the claims, "
             "neither is the evidence: the 3-model study is (below).")]


def _half_md(name, r, rr):
    t = r["taus"]
    lines = [f"## Half-change steps vs the clocks: {name}", "",
             ("Midpoint of a logistic in ln(step) fitted to the mean curve up to its extreme (half-way between the "
              "fitted plateaus; it does not depend on the first checkpoint or on the noisiest value). `extrapolated` "
              "is the share of the fitted change that lies before the first / after the last fitted checkpoint: above "
              "0.1 that plateau is not observed and the midpoint leans on the logistic shape. No CI can be derived from "
              "the json (see above); the per-seed column refits each plane / item seed's curve alone (a spread, "
              "not an interval: the seeds' draws overlap). Shipped: the first-to-extreme half-change with its CI over "
              "the non-deduplicated units."), "",
             "| quantity | units | fitted half-change | / τ_rule | / τ_mem | extrapolated before / after | per seed | "
             "shipped (first → extreme) [CI] |", "|---|---|---|---|---|---|---|---|"]
    for q, h in rr["half_change"].items():
        step, st = h["step"], rr.get("dsm_half_change_from_stores")
        if h["exact_mean_curve"] and st is not None:     # the DSM stores were remeasured: with its CI
            rel = tau_ratios(st.get("step"), t)
            err = st["reproduces_shipped_paired_gap_max_abs"]
            how = "exactly" if err == 0 else f"to {err:.1g}"
            lines.append(f"| {q} | {st['n_pairs']} pairs (DSM stores remeasured; they reproduce the shipped paired "
                         f"gaps {how}) | {half_cell(st)} | {rel[0]} | "
                         f"{rel[1]} | {_f(st.get('share_before_first'), 2)} / {_f(st.get('share_after_last'), 2)} | "
                         f"— | {_s(h['old_step'])} [{_s(h['old_ci'][0])}, {_s(h['old_ci'][1])}] |")
            continue
        cell = _s(step) if step else f"{h['censored']} the checkpoints fitted"
        rel = tau_ratios(step, t)
        ex = f"{_f(h.get('share_before_first'), 2)} / {_f(h.get('share_after_last'), 2)}"
        flag = " (plateau extrapolated)" if max(h.get("share_before_first", 0), h.get("share_after_last", 0)) > 0.1 else ""
        seeds = ", ".join(_s(v) for v in h["by_seed"].values()) or "— (pairs: one noise-averaged curve)"
        old = f"{_s(h['old_step'])} [{_s((h['old_ci'] or [None])[0])}, {_s((h['old_ci'] or [None, None])[1])}]"
        unit = "pairs, exact mean" if h["exact_mean_curve"] else h["units"]
        lines.append(f"| {q} | {unit} | {cell}{flag} | {rel[0]} | {rel[1]} | {ex} | {seeds} | {old} |")
    return lines


def _dsm_md(name, r, d):
    n = len(d["sigma"])
    ps = d["per_step_holm"]
    lines = [f"## DSM split, multiplicity over steps × σ: {name}", "",
             (f"One-sided paired t-test of held-out > train over {d['n_pairs']} pairs (each pair's loss averaged over "
              f"the noise seeds). ONE family of {len(r['steps'])} steps × {n} σ = {d['family_size']} tests: Holm "
              f"(family-wise error {d['alpha']}, the headline) and Benjamini–Hochberg (false-discovery rate "
              f"{d['alpha']}). The shipped report corrected within each step only (Holm over {n} σ), which does not "
              "control claims across steps. Significant σ as sets: runs of neighbouring grid points, gaps are gaps."),
             "", f"First significant step: **{_s(d['holm']['first_significant_step'])}** (Holm over steps × σ), "
                 f"{_s(d['bh']['first_significant_step'])} (BH over steps × σ); shipped (Holm per step): "
                 f"{_s(ps['first_significant_step'])}.", "",
             "| step | significant σ, Holm over steps × σ | count | significant σ, BH over steps × σ | count | "
             "shipped: Holm per step |", "|---|---|---|---|---|---|"]
    return lines + dsm_rows(r["steps"], d, ps["significant_sigma"])


def _capture_md(name, r, c):
    lines = [f"## Capture by training items: {name}", "",
             ("\"Captured although closer to a valid non-training vertex\" is dropped: a held-out item is itself a "
              "valid non-training vertex, so the share of held-out starts closer to one is "
              f"≥ {c['closer_nontrain_min_sigma_le_2']:.4g} at every step and σ ≤ 2, and the statistic equalled plain "
              f"capture (largest difference {c['captured_minus_captured_closer_max']:.3g}). Its replacement (the "
              "capture geometry: is a captured start nearer its own item than the capturer?) needs the retention "
              "stores and is not measured here. Plain capture of held-out restarts, shipped, *(not deduplicated)*:"),
             "", "| step | σ 1 [95% CI] | σ 2 [95% CI] |", "|---|---|---|"]
    ho = r["retention"]["heldout"]
    for i, step in enumerate(r["steps"]):
        lines.append(f"| {step} | {curve_cell(ho['1.0']['captured'], i)} | {curve_cell(ho['2.0']['captured'], i)} |")
    return lines


def _symmetry_md(name, r):
    sym, t = r["symmetry"], r["taus"]
    b, ret = sym["basins"], sym.get("retention_sigma_1.0")
    lines = [f"## Symmetry test: {name} (shipped, *not deduplicated*)", "",
             ("Training − held-out: share of the symmetric plane ending on t minus on h, and retention of training "
              "minus held-out items at σ = 1. Pointwise 95% CIs as shipped, over the planes / items drawn "
              "(too narrow: see Units)."), "",
             *symmetry_table(r["steps"], t.get("tau_mem"), b, ret)]
    return lines


def _shares_md(name, r):
    return [f"## Basin shares by plane kind: {name} (σ_start 1.0, local grid; shipped, *not deduplicated*)", "",
            *shares_table(r, 1.0, ("training", "heldout", "novel", "violating", "off_vertex"))]


def write_rereport(args, path="analyses/results/mechanism.json"):
    """Add the re_report section to the shipped json and write the md next to it; returns the md text."""
    report = rereport(args, path)
    atomic_write_text(path, json.dumps(report, indent=1))
    md = rereport_markdown(report, args, Path(path).with_name("mechanism_remeasured.md"))
    atomic_write_text(Path(path).with_suffix(".md"), md)
    return md
