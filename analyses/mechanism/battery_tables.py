"""The tables of the battery on ONE trained model (scoreprobe.studies.battery_summary; analyses/mechanism), from
the report dict alone (every number is in its json): the series with their clocks and units, and per series the
half-change steps against the clocks, the symmetry test, the capture geometry, the DSM split and the basin shares
by plane kind; then the claims read by mechanical criteria. Each returns markdown lines; every interval is over
the units of one model."""
import math

from scoreprobe.reports.report_cells import finite as _finite, interval as _ci, num, step_text as _step
from scoreprobe.reports.report_cells import tau_cell as _tau_cell, window_text as _window
from scoreprobe.studies.format import sigma_runs


def _f(v, d=2):
    return num(v, d)


def units_paragraph(s):
    """What every interval of the one-model tables is over, for study settings `s` (seeds, n_boot, n_planes, res,
    ret_items, ret_noise, dsm_noise): one model, one unit per independent thing, the bootstrap over these units."""
    return (f"**Each series is ONE trained model**, so every CI below is over the planes / items / DSM pairs of "
            "that one model: the uncertainty of the measurement given the model, not the spread over training "
            f"runs. Seeds {s['seeds']} are the seeds of the plane draws, of the retention items and their restart "
            "noise and of the DSM noise banks, not training seeds. **One unit per independent thing**: a plane "
            "drawn by two seeds counts once, and symmetric planes that share a (training, held-out) pair are "
            "resampled together; a retention item drawn by two seeds counts once (its restarts pooled); a DSM "
            "pair counts once (its loss averaged over the noise seeds). 95% CIs: bootstrap "
            f"({s['n_boot']} resamples) over these units. {s['n_planes']} planes drawn per kind and seed, "
            f"{s['res']}² grids; retention {s['ret_items']} training (all of them where a series has fewer) + "
            f"{s['ret_items']} held-out items drawn per seed × {s['ret_noise']} restarts; DSM {s['dsm_noise']} "
            "noise draws per item and seed. `not reached` is never drawn as a number.")


def series_table(report):
    """'## Series, clocks and units': per series its trained models, checkpoints, clocks, window and the independent
    units each statistic rests on (distinct of drawn), and the symmetric planes by Hamming(t, h)."""
    lines = ["## Series, clocks and units", "",
             "| series | trained models | checkpoints measured | τ_rule | τ_mem | window | distinct planes (clusters) of "
             "those drawn | retention items, distinct of drawn (train / held-out) | DSM pairs × noise seeds | "
             "symmetric planes by Hamming(t, h) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in report["series"].items():
        t, u = r["taus"], r.get("units", {})
        planes = "; ".join(f"{k}: {v['distinct_planes']} ({v['clusters']}) of {v['drawn']}"
                           for k, v in u.items() if isinstance(v, dict) and "distinct_planes" in v) or "—"
        items = " / ".join(f"{u[k]['distinct']} of {u[k]['drawn']}" for k in ("retention_train_items",
                                                                           "retention_heldout_items") if k in u) or "—"
        pairs = f"{u['dsm_pairs']} × {u['dsm_noise_seeds']}" if "dsm_pairs" in u else "—"
        lines.append(f"| {name} | {r.get('trained_models', 1)} | {len(r['steps'])} ({r['steps'][0]}–{r['steps'][-1]}) | "
                     f"{_tau_cell(t, 'tau_rule')} | {_tau_cell(t, 'tau_mem')} | {_window(t)} | {planes} | {items} | "
                     f"{pairs} | {r['symmetric_hamming']} |")
    return lines


def clocks_table(report):
    """| series | checkpoints measured | τ_rule | τ_mem | window | of every series of `report`."""
    lines = ["| series | checkpoints measured | τ_rule | τ_mem | window |", "|---|---|---|---|---|"]
    for name, r in report["series"].items():
        t = r["taus"]
        lines.append(f"| {name} | {len(r['steps'])} ({r['steps'][0]}–{r['steps'][-1]}) | {_tau_cell(t, 'tau_rule')} | "
                     f"{_tau_cell(t, 'tau_mem')} | {_window(t)} |")
    return lines


def drawn_units_table(units):
    """What each number rests on, per series of `units` ({series: battery_summary.drawn_units dict}): the planes of
    each local kind drawn → distinct (clusters), the retention items drawn → distinct, DSM pairs × noise seeds."""
    lines = ["| series | trained models | symmetric planes: drawn → distinct (pairs) | train_heldout planes | "
             "random_valid planes | retention training items: drawn → distinct | held-out items | DSM pairs × noise "
             "seeds |", "|---|---|---|---|---|---|---|---|"]
    for name, u in units.items():
        pl = [f"{u[k]['drawn']} → {u[k]['distinct_planes']} ({u[k]['clusters']})" for k in
              ("symmetric/local", "train_heldout/local", "random_valid/local")]
        it = [f"{u[k]['drawn']} → {u[k]['distinct']}" for k in ("retention_train_items", "retention_heldout_items")]
        lines.append(f"| {name} | {u['trained_models']} | {' | '.join(pl)} | {' | '.join(it)} | "
                     f"{u['dsm_pairs']} × {u['dsm_noise_seeds']} |")
    return lines


def series_sections(name, r, s):
    """Every section of one series: half-change steps, symmetry, capture geometry, DSM split, basin shares."""
    lines = half_change_section(name, r) + [""] + symmetry_section(name, r) + [""] + capture_section(name, r)
    return lines + [""] + dsm_section(name, r) + [""] + shares_section(name, r, s["sigma_starts"][0])


def half_cell(h):
    """'1234 [1100, 1400]', a bound '< 500 (before the first checkpoint fitted)', or 'no significant change'."""
    if not significant_change(h):
        return f"no significant change (change CI {_ci(*(h.get('change_ci') or [None, None]), 3)})"
    if h.get("censored"):
        side = "<" if h["censored"] == "before" else ">"
        where = "before the first" if h["censored"] == "before" else "after the last"
        return f"{side} {_step(h['bound'])} ({where} checkpoint fitted)"
    lo, hi = h.get("ci") or [None, None]
    first, last = h["fit_steps"]
    lo_s = f"< {_step(first)}" if lo == 0 else _step(lo)
    hi_s = f"> {_step(last)}" if hi is None or (isinstance(hi, float) and math.isinf(hi)) else _step(hi)   # inf: json null
    return f"{_step(h['step'])} [{lo_s}, {hi_s}]"


def half_change_section(name, r):
    """'## Half-change steps vs the clocks': each quantity's fitted half-change [95% CI] and its ratio to τ."""
    t = r["taus"]
    lines = [f"## Half-change steps vs the clocks: {name}", "",
             ("The midpoint, in ln(step), of a logistic fitted (least squares) to the mean curve over the checkpoints "
              "up to its extreme: half-way between the fitted plateaus, so it depends neither on the first checkpoint "
              "measured nor on the noisiest value. A midpoint outside the fitted checkpoints is a bound, not a number. "
              "CI: refits of bootstrap resamples of the units (planes by cluster, items, pairs). One trained model."),
             "", "| quantity | units | fitted q(first) → q(last) | half-change step [95% CI] | / τ_rule | / τ_mem |",
             "|---|---|---|---|---|---|"]
    for q, h in r["half_change"].items():
        ok = significant_change(h) and not h.get("censored") and _finite(h.get("step"))
        rel = tau_ratios(h["step"] if ok else None, t)
        units = f"{h['n_units']} {h['units']}" + (f" in {h['n_clusters']} clusters" if h["n_clusters"] != h["n_units"] else "")
        lines.append(f"| {q} | {units} | {_f(h.get('q0'), 3)} → {_f(h.get('q_end'), 3)} | {half_cell(h)} | "
                     f"{rel[0]} | {rel[1]} |")
    return lines


def tau_ratios(step, taus):
    """['step / τ_rule', 'step / τ_mem'] with 2 decimals; '—' where the step (non-zero) or that τ is not a number."""
    return [_f(step / taus[k], 2) if _finite(step) and step and _finite(taus.get(k)) else "—"
            for k in ("tau_rule", "tau_mem")]


def significant_change(h):
    """The fitted change (plateau to plateau) has a CI that excludes 0."""
    lo, hi = h.get("change_ci") or [None, None]
    return _finite(lo) and _finite(hi) and (lo > 0 or hi < 0)


def symmetry_section(name, r):
    """'## Symmetry test': training − held-out basin and retention per step, before / after τ_mem."""
    sym, steps, t = r["symmetry"], r["steps"], r["taus"]
    ret = sym.get("retention_sigma_1.0")
    b = sym.get("basins")
    n_b = "" if b is None else f" ({b['n_units']} distinct planes in {b['n_clusters']} pairs)"
    n_r = "" if ret is None else f" ({ret['n_train']} training, {ret['n_heldout']} held-out distinct items)"
    lines = [f"## Symmetry test: {name}", "",
             (f"Training − held-out: the share of the symmetric plane ending on t minus the share ending on h "
              f"(paired per plane, resampled by pair){n_b}, and the retention of training minus held-out items at "
              f"σ = 1{n_r}. One trained model."), "",
             *symmetry_table(steps, t.get("tau_mem"), b, ret)]
    return lines


def symmetry_table(steps, tau_mem, b, ret):
    """| step | before / after τ_mem | basin t − h [95% CI] | retention train − held-out, σ 1 [95% CI] | of the
    curves `b` and `ret` ({mean, lo, hi} per step; '—' for a missing one)."""
    lines = ["| step | vs τ_mem | basin t − h [95% CI] | retention train − held-out, σ 1 [95% CI] |", "|---|---|---|---|"]
    for i, step in enumerate(steps):
        side = "—" if not _finite(tau_mem) else ("before" if step < tau_mem else "after")
        bc = "—" if b is None else f"{_f(b['mean'][i], 3)} {_ci(b['lo'][i], b['hi'][i], 3)}"
        rc = "—" if ret is None else f"{_f(ret['mean'][i], 3)} {_ci(ret['lo'][i], ret['hi'][i], 3)}"
        lines.append(f"| {step} | {side} | {bc} | {rc} |")
    return lines


def capture_section(name, r):
    """'## Capture geometry': captured held-out restarts, nearer their own item, the distance ratio."""
    lines = [f"## Capture geometry: {name}", "",
             ("Held-out restarts captured by a training item: is the start nearer its own (held-out) item than the "
              "training item that captured it? `nearer own` is the share of captured restarts whose start is nearer "
              "its own item (a ratio of means over items, CI jointly); the distance ratio d(start, own) / "
              "d(start, capturer) is given by its 10th / 50th / 90th percentile over the items with a capture "
              "(< 1: nearer its own item). The earlier statistic, \"captured although closer to a valid non-training "
              "vertex\", is dropped: a held-out item is itself a valid non-training vertex, so its share of starts "
              "that are closer (last column) is 1 and it equalled plain capture."), "",
             "| step | σ | captured [95% CI] | nearer own, share of captured [95% CI] | distance ratio p10 / p50 / p90 "
             "(items) | starts closer to a valid non-training vertex (old) |", "|---|---|---|---|---|---|"]
    for sigma, c in (r.get("capture_geometry") or {}).items():
        if c is None:
            continue
        for i, step in enumerate(r["steps"]):
            cap, g, pc = c["captured"], c["nearer_own_given_captured"], c["distance_ratio_percentiles"]
            ratio = " / ".join(_f(pc[k][i], 2) for k in ("p10", "p50", "p90"))
            lines.append(f"| {step} | {sigma} | {_f(cap['mean'][i], 3)} {_ci(cap['lo'][i], cap['hi'][i], 3)} | "
                         f"{_f(g['mean'][i], 3)} {_ci(g['lo'][i], g['hi'][i], 3)} | {ratio} "
                         f"({c['n_items_captured'][i]}) | {_f(c['closer_nontrain_share'][i], 3)} |")
    return lines


def dsm_section(name, r):
    """'## DSM split': the significant σ per step, Holm and BH over all steps × σ."""
    d = r["dsm"]
    if d is None:
        return [f"## DSM split: {name}", "", "no DSM store"]
    n = len(d["sigma"])
    fam = len(r["steps"]) * n
    lines = [f"## DSM split: {name}", "",
             (f"{d['test']}; {d['n_pairs'][0][0]} pairs, {d['noise_seeds']} noise seeds. Multiplicity: ONE family of "
              f"all {len(r['steps'])} steps × {n} σ = {fam} tests, Holm (family-wise error {d['alpha']}; the headline) "
              f"and Benjamini–Hochberg (false-discovery rate {d['alpha']}). Significant σ as sets (runs of "
              "neighbouring grid points; gaps are gaps). One trained model."), "",
             f"First significant step: {_step(d['holm']['first_significant_step'])} (Holm), "
             f"{_step(d['bh']['first_significant_step'])} (BH).", "",
             "| step | significant σ, Holm over steps × σ | count | significant σ, BH | count |", "|---|---|---|---|---|"]
    return lines + dsm_rows(r["steps"], d)


def dsm_rows(steps, d, shipped=None):
    """| step | significant σ (Holm) | count | significant σ (BH) | count | of a DSM split `d` (its sigma grid and
    holm / bh significant_sigma per step), with one more cell per step of the `shipped` sets when given."""
    grid, n, lines = d["sigma"], len(d["sigma"]), []
    for i, step in enumerate(steps):
        h, b = d["holm"]["significant_sigma"][i], d["bh"]["significant_sigma"][i]
        row = f"| {step} | {sigma_runs(h, grid)} | {len(h)} of {n} | {sigma_runs(b, grid)} | {len(b)} of {n} |"
        lines.append(row if shipped is None else f"{row} {sigma_runs(shipped[i], grid)} ({len(shipped[i])}) |")
    return lines


def shares_section(name, r, sigma):
    """'## Basin shares by plane kind' at σ_start `sigma` (local grid), first, middle and last step."""
    return [f"## Basin shares by plane kind: {name} (σ_start {sigma}, local grid)", "",
            *shares_table(r, sigma, tuple(SHARE_LABELS))]


SHARE_LABELS = {"training": "training", "heldout": "held-out", "novel": "novel", "violating": "violating",
                "off_vertex": "off-vertex", "anchor0": "anchor a", "anchor1": "anchor b", "anchor2": "anchor c"}


def shares_table(r, sigma, quantities):
    """| kind | step | one 'mean [95% CI]' per quantity | of r["basins"] ({kind: {σ: {quantity: curve}}}) at σ_start
    `sigma` (else its first σ), at the first, middle and last of r["steps"]."""
    lines = ["| kind | step | " + " | ".join(SHARE_LABELS[q] for q in quantities) + " |",
             "|---|---|" + "---|" * len(quantities)]
    for key, by_sigma in r["basins"].items():
        cur = by_sigma.get(str(sigma)) or next(iter(by_sigma.values()))
        for i in sorted({0, len(r["steps"]) // 2, len(r["steps"]) - 1}):
            cells = [f"{_f(cur[q]['mean'][i], 3)} {_ci(cur[q]['lo'][i], cur[q]['hi'][i], 2)}" for q in quantities]
            lines.append(f"| {key} | {r['steps'][i]} | " + " | ".join(cells) + " |")
    return lines


def _around(h, tau, factor=2.0):
    """'yes' when the half-change CI lies within [τ/factor, τ·factor], 'no' when it lies outside, else 'undecided'."""
    ci = h.get("ci") or [None, None]
    if h.get("censored") or not (_finite(tau) and _finite(ci[0]) and _finite(ci[1])) or ci[0] == 0:
        return "undecided"
    if ci[0] >= tau / factor and ci[1] <= tau * factor:
        return "yes"
    return "no" if ci[1] < tau / factor or ci[0] > tau * factor else "undecided"


def claim_lines(report):
    """The claims read by mechanical criteria, one bullet each: half-changes within a factor 2 of τ, the
    symmetric planes' t − h CI before / after τ_mem, the DSM gap's significant checkpoints."""
    out = []
    for name, r in report["series"].items():
        t, h = r["taus"], r["half_change"]
        for q, hc in h.items():
            if not significant_change(hc):
                out.append(f"- {name}: {q}: no significant change over the checkpoints fitted")
                continue
            if hc.get("censored"):
                out.append(f"- {name}: {q}: half-change {half_cell(hc)}: a bound, not a step")
                continue
            out.append(f"- {name}: {q}: half-change {_step(hc['step'])}; within a factor 2 of τ_rule: "
                       f"{_around(hc, t.get('tau_rule'))}; of τ_mem: {_around(hc, t.get('tau_mem'))}")
        b = r["symmetry"].get("basins")
        if b is not None and _finite(t.get("tau_mem")):
            pre = [i for i, s in enumerate(r["steps"]) if s < t["tau_mem"]]
            post = [i for i, s in enumerate(r["steps"]) if s >= t["tau_mem"]]
            zero = sum(1 for i in pre if _finite(b["lo"][i]) and b["lo"][i] <= 0 <= b["hi"][i])
            pos = sum(1 for i in post if _finite(b["lo"][i]) and b["lo"][i] > 0)
            out.append(f"- {name}: symmetric planes, t − h basin: CI contains 0 at {zero} of {len(pre)} checkpoints "
                       f"before τ_mem; CI above 0 at {pos} of {len(post)} after (pointwise 95% CIs)")
        d = r["dsm"]
        if d is not None:
            hits = sum(1 for row in d["holm"]["significant_sigma"] if row)
            out.append(f"- {name}: DSM: a held-out > train gap significant under Holm over all steps × σ at {hits} of "
                       f"{len(r['steps'])} checkpoints; first significant step "
                       f"{_step(d['holm']['first_significant_step'])}")
    return out
