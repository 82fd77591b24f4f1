"""Re-report of the mechanism study from its shipped json alone (issue 35), for when the measurement
stores (runs/mechanism, git-ignored) are not at hand: what the new statistics can derive exactly from
the shipped numbers, and what they cannot.

Exact from the json: the paired DSM tests under Holm / BH over the whole step × σ family (raw p-values
from the stored z and pair counts), the significant σ as sets, the first significant step, the DSM gap's
half-change as a fitted sigmoid (the stored per-σ paired gaps are means over the pairs of the
seed-averaged losses: one unit per pair); the unit counts (planes and items are drawn from the seeds
without any model). Point estimates only: fitted half-changes of the basin / retention curves (the
shipped means weight a plane drawn by two seeds twice). Not derivable: any CI over the deduplicated
units and the capture geometry (they need the per-plane / per-item stores).
"""
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import scipy.stats

from analyses.mechanism import measure as M
from scoreprobe.probes.dsm_stats import adjust_family, adjust_pvalues, first_significant_step, significant_sets
from scoreprobe.probes.timing import fit_log_sigmoid, plateau_shares

DSM_BAND = (0.2, 2.0)


def series_data(args, name):
    """An object with .dataset and .rule of series `name`, without a model: the shipped open series, or
    the closed one's dataset made from its training config (the trainer's make_dataset)."""
    if name == "open":
        from scoreprobe.loading.series import load_series
        return load_series(args.open_series)
    from scoreprobe.data.datasets import make_dataset
    from scoreprobe.data.rules import rule_from_spec
    cfg = M.closed_config(args)
    rule = rule_from_spec(cfg.rule)
    return SimpleNamespace(dataset=make_dataset(rule, cfg.n_train, cfg.n_heldout, cfg.data_seed), rule=rule)


def unit_counts(args, name):
    """How many independent units the shipped statistics had: planes drawn vs distinct (and their
    clusters), retention items drawn vs distinct, DSM pairs and noise seeds. No model is needed."""
    from scoreprobe.probes.basins import retention_points
    s = series_data(args, name)
    out = {"trained_models": 1, "plane_seeds": list(args.seeds)}
    for kind in M.KINDS:
        planes, drawn_by = M.distinct_planes(kind, s, args)
        out[f"{kind}/local"] = {"drawn": sum(len(d) for d in drawn_by), "distinct_planes": len(planes),
                                "clusters": len({M.plane_cluster(kind, p) for p in planes})}
    n_train = len(s.dataset.train)
    kw = M.retention_settings(args, 0, n_train=n_train)
    for split in ("train", "heldout"):
        seen = []
        for seed in args.seeds:
            _, sp, idx = retention_points(s.dataset, kw["n_train"], kw["n_heldout"], seed)
            seen += idx[sp == split].tolist()
        out[f"retention_{split}_items"] = {"drawn": len(seen), "distinct": len(set(seen))}
    out["dsm_pairs"] = min(n_train, args.dsm_heldout, len(s.dataset.heldout))
    out["dsm_noise_seeds"] = len(args.seeds)
    return out


def dsm_family(dsm, steps):
    """Holm and BH over the whole step × σ family from the stored paired z and pair counts (one-sided
    t-test, n − 1 degrees of freedom, as paired_gap_stats); checks that Holm per step reproduces the
    stored adjusted p-values."""
    z, n = np.asarray(dsm["z"], dtype=float), np.asarray(dsm["n_pairs"], dtype=float)
    with np.errstate(invalid="ignore"):
        p = np.where(n >= 2, scipy.stats.t.sf(z, np.maximum(n - 1, 1)), np.nan)
    stored = np.asarray(dsm["p_adjusted"], dtype=float)
    err = float(np.nanmax(np.abs(adjust_pvalues(p, "holm") - stored)))
    out = {"sigma": dsm["sigma"], "n_pairs": int(n.flat[0]), "p_value": p.tolist(), "alpha": dsm["alpha"],
           "per_step_holm_reproduced_max_abs_error": err, "family_size": int(np.isfinite(p).sum())}
    for method in ("holm", "bh"):
        adj = adjust_family(p, method)
        out[method] = {"p_adjusted": adj.tolist(), "significant_sigma": significant_sets(adj, dsm["sigma"]),
                       "first_significant_step": first_significant_step(adj, steps)}
    per_step = stored < dsm["alpha"]
    out["per_step_holm"] = {"significant_sigma": significant_sets(stored, dsm["sigma"]),
                            "first_significant_step": first_significant_step(stored, steps)}
    out["per_step_holm"]["checkpoints_with_a_significant_sigma"] = int(per_step.any(axis=1).sum())
    return out


def fitted_midpoint(steps, curve, until="extreme"):
    """{step (None: censored), censored, fit_steps, share_before_first, share_after_last}: the
    fitted-sigmoid half-change of one mean curve (timing.sigmoid_half_change without a CI)."""
    curve = np.asarray(curve, dtype=float)
    steps = np.asarray(steps, dtype=float)
    end = steps.size if until == "last" else int(np.nanargmax(np.abs(curve - curve[0]))) + 1
    fit_steps = [float(steps[0]), float(steps[end - 1])]
    if end < 4 or not np.isfinite(curve[:end]).all():
        return {"step": None, "censored": "too few checkpoints", "fit_steps": fit_steps}
    fit = fit_log_sigmoid(steps[:end], curve[:end][None])
    m = float(fit["m"][0])
    lo, hi = math.log(steps[0]), math.log(steps[end - 1])
    censored = "before" if m < lo else "after" if m > hi else None
    return {"step": math.exp(m) if censored is None else None, "censored": censored, "fit_steps": fit_steps,
            **plateau_shares(fit, steps[:end])}


def curves_of(r):
    """{quantity: (mean curve, {seed: curve}, units)} of the old half-change table, from the shipped json."""
    b, out = r["basins"], {}
    kinds = [f"{k}/local" for k in M.KINDS if f"{k}/local" in b]
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
    step (the preset's settings), else None. Only the shipped open series can be opened without training."""
    if name != "open":
        return None
    from scoreprobe.loading.series import load_series
    series = load_series(args.open_series)
    out = {}
    for seed in args.seeds:
        ds = M.measure_dsm(args, name, series, steps, seed, run=False)
        if ds is None or not set(steps) <= set(int(v) for v in ds.step.values):
            return None
        out[seed] = ds.sel(step=steps)
    return out


def dsm_half_change_with_ci(args, r, stores):
    """The DSM gap's fitted half-change with its bootstrap CI over the pairs, from the stores, and how
    closely the stores reproduce the shipped per-σ paired gaps (max abs difference)."""
    from analyses.mechanism.report import dsm_pair_gaps, dsm_pair_losses
    from scoreprobe.probes.dsm_stats import paired_gap_stats
    from scoreprobe.probes.timing import sigmoid_half_change
    col = {"dsm": stores, "steps": r["steps"]}
    h = sigmoid_half_change(r["steps"], dsm_pair_gaps(col), until="extreme", n_boot=args.n_boot)
    loss, d0 = dsm_pair_losses(col)
    split = np.array([str(v) for v in d0.split.values.tolist()])
    gap = paired_gap_stats(loss, split, d0.item_index.values, d0.sigma.values)["paired_gap"]
    h["reproduces_shipped_paired_gap_max_abs"] = float(np.nanmax(np.abs(gap - np.asarray(r["dsm"]["paired_gap"]))))
    h["n_pairs"] = int(dsm_pair_gaps(col).shape[0])
    return h


def rereport(args, path):
    """The shipped json with a 're_report' section (the statistics above); returns the whole dict."""
    report = json.loads(Path(path).read_text())
    report.pop("re_report", None)
    new = {}
    for name, r in report["series"].items():
        new[name] = {"units": unit_counts(args, name), "dsm": dsm_family(r["dsm"], r["steps"]),
                     "half_change": half_changes(r), "capture": capture_note(r)}
        stores = dsm_from_stores(args, name, r["steps"])
        if stores is not None:   # remeasured: the DSM gap's half-change gets its CI over pairs
            new[name]["dsm_half_change_from_stores"] = dsm_half_change_with_ci(args, r, stores)
    report["re_report"] = {"issue": 35, "series": new, "from": "the shipped json (stores not shipped)"}
    return report


# ---------------------------------------------------------------------------------------------
# The markdown of the re-report
# ---------------------------------------------------------------------------------------------

def _s(v):
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.0f}"


def _f(v, d=3):
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{d}f}"


def rereport_markdown(report, args):
    from analyses.mechanism.markdown import _tau_cell, _window, sigma_runs
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
             "## Units: what each number rests on", "",
             "| series | trained models | symmetric planes: drawn → distinct (pairs) | train_heldout planes | "
             "random_valid planes | retention training items: drawn → distinct | held-out items | DSM pairs × noise "
             "seeds |", "|---|---|---|---|---|---|---|---|"]
    for name, r in rr.items():
        u = r["units"]
        pl = [f"{u[k]['drawn']} → {u[k]['distinct_planes']} ({u[k]['clusters']})" for k in
              ("symmetric/local", "train_heldout/local", "random_valid/local")]
        it = [f"{u[k]['drawn']} → {u[k]['distinct']}" for k in ("retention_train_items", "retention_heldout_items")]
        lines.append(f"| {name} | {u['trained_models']} | {' | '.join(pl)} | {' | '.join(it)} | "
                     f"{u['dsm_pairs']} × {u['dsm_noise_seeds']} |")
    lines += ["", *_supports(rr), "", "## Series and clocks", "",
              "| series | checkpoints measured | τ_rule | τ_mem | window |", "|---|---|---|---|---|"]
    for name, r in report["series"].items():
        t = r["taus"]
        lines.append(f"| {name} | {len(r['steps'])} ({r['steps'][0]}–{r['steps'][-1]}) | {_tau_cell(t, 'tau_rule')} | "
                     f"{_tau_cell(t, 'tau_mem')} | {_window(t)} |")
    for name, r in report["series"].items():
        lines += [""] + _half_md(name, r, rr[name]) + [""] + _dsm_md(name, r, rr[name]["dsm"], sigma_runs)
        lines += [""] + _capture_md(name, r, rr[name]["capture"]) + [""] + _symmetry_md(name, r)
        lines += [""] + _shares_md(name, r)
    lines += ["", "## Figures (from the measurement, 2026-12-01; not redrawn)", ""]
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
             "half-changes with CIs). It could not run here: with the 2 shared cores loaded ≈ 11 by other jobs, a "
             "niced run measured one checkpoint of one seed's DSM store (the cheapest probe) about every 2 "
             "minutes, and the preset has 2 series × 3 seeds × 10 checkpoints of each probe.")]


def _exactly(rr):
    err = max(r["dsm"]["per_step_holm_reproduced_max_abs_error"] for r in rr.values())
    return "exactly" if err == 0 else f"to {err:.1g}"


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
            from analyses.mechanism.markdown import half_cell
            rel = [(_f(st["step"] / t[k], 2) if st.get("step") and isinstance(t.get(k), float) else "—")
                   for k in ("tau_rule", "tau_mem")]
            lines.append(f"| {q} | {st['n_pairs']} pairs (remeasured; the stores reproduce the shipped paired gaps "
                         f"to {st['reproduces_shipped_paired_gap_max_abs']:.1g}) | {half_cell(st)} | {rel[0]} | "
                         f"{rel[1]} | {_f(st.get('share_before_first'), 2)} / {_f(st.get('share_after_last'), 2)} | "
                         f"— | {_s(h['old_step'])} [{_s(h['old_ci'][0])}, {_s(h['old_ci'][1])}] |")
            continue
        cell = _s(step) if step else f"{h['censored']} the checkpoints fitted"
        rel = [(_f(step / t[k], 2) if step and isinstance(t.get(k), float) and math.isfinite(t[k]) else "—")
               for k in ("tau_rule", "tau_mem")]
        ex = f"{_f(h.get('share_before_first'), 2)} / {_f(h.get('share_after_last'), 2)}"
        flag = " (plateau extrapolated)" if max(h.get("share_before_first", 0), h.get("share_after_last", 0)) > 0.1 else ""
        seeds = ", ".join(_s(v) for v in h["by_seed"].values()) or "— (pairs: one noise-averaged curve)"
        old = f"{_s(h['old_step'])} [{_s((h['old_ci'] or [None])[0])}, {_s((h['old_ci'] or [None, None])[1])}]"
        unit = "pairs, exact mean" if h["exact_mean_curve"] else h["units"]
        lines.append(f"| {q} | {unit} | {cell}{flag} | {rel[0]} | {rel[1]} | {ex} | {seeds} | {old} |")
    return lines


def _dsm_md(name, r, d, sigma_runs):
    grid, n = d["sigma"], len(d["sigma"])
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
    for i, step in enumerate(r["steps"]):
        h, b, old = d["holm"]["significant_sigma"][i], d["bh"]["significant_sigma"][i], ps["significant_sigma"][i]
        lines.append(f"| {step} | {sigma_runs(h, grid)} | {len(h)} of {n} | {sigma_runs(b, grid)} | {len(b)} of {n} | "
                     f"{sigma_runs(old, grid)} ({len(old)}) |")
    return lines


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
        cells = [f"{_f(ho[s]['captured']['mean'][i])} [{_f(ho[s]['captured']['lo'][i])}, "
                 f"{_f(ho[s]['captured']['hi'][i])}]" for s in ("1.0", "2.0")]
        lines.append(f"| {step} | {cells[0]} | {cells[1]} |")
    return lines


def _symmetry_md(name, r):
    sym, t = r["symmetry"], r["taus"]
    b, ret = sym["basins"], sym.get("retention_sigma_1.0")
    lines = [f"## Symmetry test: {name} (shipped, *not deduplicated*)", "",
             ("Training − held-out: share of the symmetric plane ending on t minus on h, and retention of training "
              "minus held-out items at σ = 1. Pointwise 95% CIs as shipped, over the planes / items drawn "
              "(too narrow: see Units)."), "",
             "| step | vs τ_mem | basin t − h [95% CI] | retention train − held-out, σ 1 [95% CI] |", "|---|---|---|---|"]
    for i, step in enumerate(r["steps"]):
        tm = t.get("tau_mem")
        side = "—" if not isinstance(tm, float) else ("before" if step < tm else "after")
        lines.append(f"| {step} | {side} | {_f(b['mean'][i])} [{_f(b['lo'][i])}, {_f(b['hi'][i])}] | "
                     f"{_f(ret['mean'][i])} [{_f(ret['lo'][i])}, {_f(ret['hi'][i])}] |")
    return lines


def _shares_md(name, r):
    lines = [f"## Basin shares by plane kind: {name} (σ_start 1.0, local grid; shipped, *not deduplicated*)", "",
             "| kind | step | training | held-out | novel | violating | off-vertex |", "|---|---|---|---|---|---|---|"]
    for key, by_sigma in r["basins"].items():
        cur = by_sigma.get("1.0") or next(iter(by_sigma.values()))
        for i in sorted({0, len(r["steps"]) // 2, len(r["steps"]) - 1}):
            cells = [f"{_f(cur[q]['mean'][i])} [{_f(cur[q]['lo'][i], 2)}, {_f(cur[q]['hi'][i], 2)}]"
                     for q in ("training", "heldout", "novel", "violating", "off_vertex")]
            lines.append(f"| {key} | {r['steps'][i]} | " + " | ".join(cells) + " |")
    return lines


def write_rereport(args, path="analyses/results/mechanism.json"):
    """Add the re_report section to the shipped json and write the md next to it; returns the md text."""
    report = rereport(args, path)
    Path(path).write_text(json.dumps(report, indent=1))
    md = rereport_markdown(report, args)
    Path(path).with_suffix(".md").write_text(md)
    return md
