"""The battery on ONE trained model, from its stores (scoreprobe.studies.battery.collect):
per-step curves with bootstrap CIs over the independent units, the capture geometry, the training − held-out
symmetry, the DSM split with one multiple-testing family over steps × σ, and fitted half-change steps.

One unit per independent thing: a distinct plane once (two seeds can draw the same one), resampled by cluster
(the training/held-out pair of a symmetric plane); a distinct retention item once (its seeds' restarts
averaged); a DSM (training, held-out) pair once (its loss averaged over the noise seeds). The CIs are over the
planes / items / pairs of that one model, not over training runs.

`col` is battery.collect's dict plus "series" (its dataset and rule: the planes drawn) and "taus" (its clocks);
`args` the battery's settings (seeds, kinds, sigma_starts, reach_sigmas, ret_sigmas, n_boot, ...)."""
import numpy as np

from scoreprobe.probes.retention import retention_points
from scoreprobe.slices import hamming_matrix
from scoreprobe.stats.dsm_stats import first_significant_step, max_abs_error, paired_gap_stats, significant_sets
from scoreprobe.stats.pvalues import ALPHA, adjust_family
from scoreprobe.stats.timing import _quiet, bootstrap_means, difference_ci, mean_ci, sigmoid_half_change
from scoreprobe.studies.battery import (KINDS, basin_sets, distinct_planes, dsm_pair_losses, dsm_pairs, item_table,
                                        plane_cluster, plane_shares, planes_of, retention_settings, strs as _strs)

DSM_BAND = (0.2, 2.0)


def plane_units(col, kinds, extent, sigma):
    """(shares {q: (P, S)}, clusters [(P,) keys]) over the distinct planes of `kinds`; a cluster is the
    (training, held-out) pair of a symmetric plane, else the plane (battery.plane_cluster)."""
    parts = [(plane_shares(col["basins"][(k, extent)][0], sigma), k, col["basins"][(k, extent)][1]) for k in kinds
             if (k, extent) in col["basins"]]
    if not parts:
        return None, None
    shares = {q: np.concatenate([p[q] for p, _, _ in parts]) for q in parts[0][0]}
    clusters = [(k,) + plane_cluster(k, pl) for _, k, planes in parts for pl in planes]
    return shares, clusters


def item_units(col, split, sigma):
    """({outcome: (items, steps)}, n_draws (items,)): each distinct item of `split` once, its value the
    mean over the seeds that drew it (each seed restarts it with its own noise bank); NaN-aware."""
    _, out, n = item_table(col, split, sigma)
    return out, n


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------

def _curve(values, args, clusters=None, seed=0):
    """{mean, lo, hi (S,), n_units, n_clusters}: the mean over the units (rows of `values`) with its bootstrap CI."""
    r = mean_ci(values, n_boot=args.n_boot, seed=seed, clusters=clusters)
    return {"mean": r["mean"].tolist(), "lo": r["lo"].tolist(), "hi": r["hi"].tolist(), "n_units": int(len(values)),
            "n_clusters": int(len({tuple(c) if isinstance(c, (list, tuple)) else c for c in clusters}))
            if clusters is not None else int(len(values))}


def basin_summary(col, args):
    """{kind/extent: {σ: {quantity: curve}}}: 95% CIs over the distinct planes, resampled by cluster."""
    out = {}
    for kind, extent in basin_sets(args):
        for sigma in (args.sigma_starts if extent == "local" else args.reach_sigmas):
            shares, clusters = plane_units(col, [kind], extent, sigma)
            if shares is not None:
                out.setdefault(f"{kind}/{extent}", {})[str(sigma)] = {q: _curve(v, args, clusters)
                                                                      for q, v in shares.items()}
    return out


def retention_summary(col, args):
    """{split: {σ: {outcome: curve}}}: 95% CIs over the distinct retention items."""
    out = {}
    for split in ("train", "heldout"):
        for sigma in args.ret_sigmas:
            res, _ = item_units(col, split, sigma)
            if res is not None:
                out.setdefault(split, {})[str(sigma)] = {k: _curve(v, args) for k, v in res.items()}
    return out


def capture_geometry(col, args, sigma):
    """Captured held-out restarts at σ: is the start nearer its own item than the training item that
    captured it? Share of all restarts, share of the captured ones (a ratio of means over items,
    bootstrapped jointly) and the distance ratio d(start, own) / d(start, capturer) over the items with a
    capture (10th, 50th, 90th percentile; < 1: the start was nearer its own item). Also the old
    `closer_nontrain` share, which is 1 for held-out starts at every σ of the study (a held-out item is
    itself a valid non-training vertex), so "captured although closer" was plain capture."""
    res, _ = item_units(col, "heldout", sigma)
    if res is None or "captured_nearer_own" not in res:
        return None
    cap, near = res["captured"], res["captured_nearer_own"]
    boot = bootstrap_means(np.concatenate([near, cap], axis=1), n_boot=args.n_boot)      # (B, 2S): one draw
    s = cap.shape[1]
    with np.errstate(invalid="ignore", divide="ignore"), _quiet():
        rate = boot[:, :s] / boot[:, s:]
        point = np.nanmean(near, axis=0) / np.nanmean(cap, axis=0)   # shares: never NaN (item_units); 0/0: NaN
        ratio = res["capture_distance_ratio"]                                              # (items, S)
        pct = np.nanpercentile(ratio, [10, 50, 90], axis=0)                                # (3, S)
        lo, hi = np.nanpercentile(rate, [2.5, 97.5], axis=0)
    return {"captured": _curve(cap, args), "nearer_own": _curve(near, args),
            "nearer_own_given_captured": {"mean": point.tolist(), "lo": lo.tolist(), "hi": hi.tolist()},
            "distance_ratio_percentiles": {"p10": pct[0].tolist(), "p50": pct[1].tolist(), "p90": pct[2].tolist()},
            "n_items_captured": np.isfinite(ratio).sum(axis=0).tolist(),
            "closer_nontrain_share": np.nanmean(res["closer_nontrain"], axis=0).tolist()}   # all NaN without an
    # exact nearest-valid search (a rule-wide NaN, never mixed with defined items): stays NaN


def symmetry(col, args):
    """Training − held-out: anchor basins on the symmetric planes (paired per plane, resampled by pair)
    and retention (distinct items)."""
    out = {}
    shares, clusters = plane_units(col, ["symmetric"], "local", args.sigma_starts[0])
    if shares is not None:
        out["basins"] = _curve(shares["anchor_asymmetry"], args, clusters)
    for sigma in args.ret_sigmas:
        tr, _ = item_units(col, "train", sigma)
        ho, _ = item_units(col, "heldout", sigma)
        if tr is not None and ho is not None:
            d = difference_ci(tr["retained"], ho["retained"], n_boot=args.n_boot)
            out[f"retention_sigma_{sigma}"] = {"mean": d["mean"].tolist(), "lo": d["lo"].tolist(),
                                               "hi": d["hi"].tolist(), "n_train": len(tr["retained"]),
                                               "n_heldout": len(ho["retained"])}
    return out


def dsm_summary(col, args):
    """Paired held-out − train DSM tests per (step, σ) over the pairs (each pair's loss averaged over the
    noise seeds), with ONE multiple-testing family over all steps × σ: Holm (family-wise error, the
    headline) and BH (false-discovery rate); significant σ as sets; the first significant step."""
    if not col["dsm"]:
        return None
    loss, d0 = dsm_pair_losses(col)
    split, pos, sig = _strs(d0.split.values), d0.item_index.values, d0.sigma.values
    st = paired_gap_stats(loss, split, pos, sig, method="holm")
    out = {"sigma": sig.tolist(), "paired_gap": st["paired_gap"].tolist(), "z": st["paired_gap_z"].tolist(),
           "p_value": st["p_value"].tolist(), "n_pairs": st["n_pairs"].tolist(), "alpha": ALPHA,
           "noise_seeds": len(col["dsm"]), "method": "holm over steps × σ",
           "test": "one-sided paired t-test of held-out > train over pairs (each pair's loss averaged over "
                   "the noise seeds)"}
    for method in ("holm", "bh"):
        adj = adjust_family(st["p_value"], method)
        out[method] = {"p_adjusted": adj.tolist(), "significant_sigma": significant_sets(adj, sig),
                       "first_significant_step": first_significant_step(adj, col["steps"])}
    out["p_adjusted"] = out["holm"]["p_adjusted"]
    return out


def dsm_pair_gaps(col):
    """(pairs, steps) band-averaged paired differences over DSM_BAND, one row per (training, held-out)
    pair, each pair's loss averaged over the noise seeds first."""
    if not col["dsm"]:
        return None
    loss, d0, ti, hi, _ = dsm_pairs(col)
    sig = d0.sigma.values
    band = (sig >= DSM_BAND[0]) & (sig <= DSM_BAND[1])
    return (loss[:, band][..., hi] - loss[:, band][..., ti]).mean(axis=1).T                 # (pairs, S)


def dsm_half_change(stores, steps, n_boot, reference_gap=None):
    """The DSM gap's fitted half-change (band-averaged paired gap, sigmoid_half_change up to its extreme) with its
    bootstrap CI over the pairs, from the DSM `stores` ({seed: Dataset} at `steps`), and n_pairs; with
    `reference_gap` (steps, σ), how closely the stores reproduce it: max |paired gap − reference| over the cells
    (stats.dsm_stats.max_abs_error) as `reproduces_shipped_paired_gap_max_abs`."""
    col = {"dsm": stores, "steps": steps}
    h = sigmoid_half_change(steps, dsm_pair_gaps(col), until="extreme", n_boot=n_boot)
    if reference_gap is not None:
        loss, d0 = dsm_pair_losses(col)
        split = np.array([str(v) for v in d0.split.values.tolist()])
        gap = paired_gap_stats(loss, split, d0.item_index.values, d0.sigma.values)["paired_gap"]
        h["reproduces_shipped_paired_gap_max_abs"] = max_abs_error(gap, reference_gap)
    h["n_pairs"] = int(dsm_pair_gaps(col).shape[0])
    return h


def half_changes(col, args):
    """Half-change steps (a logistic in ln step fitted to the mean curve, up to its extreme) of the study's
    quantities with 95% CIs over the independent units (distinct planes by cluster, items, pairs)."""
    steps, out = col["steps"], {}
    sigma = args.sigma_starts[0]
    kinds = [k for k in KINDS if (k, "local") in col["basins"]]
    shares, clusters = plane_units(col, kinds, "local", sigma)
    if shares is not None:
        for q in ("valid", "violating", "training", "heldout"):
            out[f"{q} basin share ({'+'.join(kinds)} planes, σ_start {sigma})"] = (shares[q], clusters, "planes")
    sym, cl = plane_units(col, ["symmetric"], "local", sigma)
    if sym is not None:
        out["training − held-out basin (symmetric planes)"] = (sym["anchor_asymmetry"], cl, "planes")
    ho, _ = item_units(col, "heldout", 1.0) if 1.0 in args.ret_sigmas else (None, None)
    if ho is not None:
        out["held-out captured (σ 1)"] = (ho["captured"], None, "held-out items")
        if "captured_nearer_own" in ho:
            out["held-out captured although nearer its own item (σ 1)"] = (ho["captured_nearer_own"], None,
                                                                            "held-out items")
    gaps = dsm_pair_gaps(col)
    if gaps is not None:
        out[f"DSM paired gap, σ in {list(DSM_BAND)}"] = (gaps, None, "pairs")
    result = {}
    for name, (values, clusters, unit) in out.items():
        r = sigmoid_half_change(steps, values, until="extreme", n_boot=args.n_boot, clusters=clusters)
        n_cl = len(values) if clusters is None else len(set(clusters))
        result[name] = {**r, "units": unit, "n_units": int(len(values)), "n_clusters": int(n_cl)}
    return result


def summarize(col, args):
    """The JSON-able summary of one series: its clocks `col["taus"]`, basins, retention, capture geometry,
    symmetry, DSM split, half-changes, units and the symmetric planes' Hamming distances."""
    return {"taus": col["taus"], "steps": col["steps"], "trained_models": 1, "basins": basin_summary(col, args),
            "retention": retention_summary(col, args),
            "capture_geometry": {str(s): capture_geometry(col, args, s) for s in (1.0, 2.0) if s in args.ret_sigmas},
            "symmetry": symmetry(col, args), "dsm": dsm_summary(col, args), "half_change": half_changes(col, args),
            "units": units(col, args), "symmetric_hamming": _hammings(col)}


def units(col, args):
    """How many independent units each statistic rests on (after deduplication)."""
    out = {"trained_models": 1, "plane_seeds": list(args.seeds)}
    for (kind, extent), (_, planes) in col["basins"].items():
        out[f"{kind}/{extent}"] = {"distinct_planes": len(planes),
                                   "clusters": len({plane_cluster(kind, p) for p in planes}),
                                   "drawn": sum(len(planes_of(kind, col["series"], args, s)) for s in args.seeds)}
    for split in ("train", "heldout"):
        res, n = item_units(col, split, args.ret_sigmas[0])
        if res is not None:
            out[f"retention_{split}_items"] = {"distinct": int(len(n)), "drawn": int(n.sum())}
    if col["dsm"]:
        d0 = next(iter(col["dsm"].values()))
        out["dsm_pairs"] = int(min((_strs(d0.split.values) == s).sum() for s in ("train", "heldout")))
        out["dsm_noise_seeds"] = len(col["dsm"])
    return out


def _hammings(col):
    out = {}
    for (kind, extent), (_, planes) in col["basins"].items():
        if kind == "symmetric" and extent == "local":
            for p in planes:
                bits = (p.anchors > 0).astype(np.uint8)
                d = str(int(hamming_matrix(bits[:1], bits[1:2])[0, 0]))
                out[d] = out.get(d, 0) + 1
    return out


def drawn_units(args, data):
    """How many independent units the battery's settings `args` draw on `data` (anything with .dataset and .rule),
    without a model: local planes drawn vs distinct (and their clusters) per kind, retention items drawn vs
    distinct per split, DSM pairs and noise seeds (the counts `units` reads from the stores)."""
    out = {"trained_models": 1, "plane_seeds": list(args.seeds)}
    for kind in KINDS:
        planes, drawn_by = distinct_planes(kind, data, args)
        out[f"{kind}/local"] = {"drawn": sum(len(d) for d in drawn_by), "distinct_planes": len(planes),
                                "clusters": len({plane_cluster(kind, p) for p in planes})}
    n_train = len(data.dataset.train)
    kw = retention_settings(args, 0, n_train=n_train)
    for split in ("train", "heldout"):
        seen = []
        for seed in args.seeds:
            _, sp, idx = retention_points(data.dataset, kw["n_train"], kw["n_heldout"], seed)
            seen += idx[sp == split].tolist()
        out[f"retention_{split}_items"] = {"drawn": len(seen), "distinct": len(set(seen))}
    out["dsm_pairs"] = min(n_train, args.dsm_heldout, len(data.dataset.heldout))
    out["dsm_noise_seeds"] = len(args.seeds)
    return out
