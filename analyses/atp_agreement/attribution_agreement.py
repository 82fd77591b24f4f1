"""How well an attribution estimate ranks the sites real patching ranks (AtP, AtP*, GradDrop against
`scoreprobe.inside.patch`): per row of measurements (one checkpoint, pair kind, σ and noise draw), the Spearman
correlation over sites between each method's Σ_pairs numerator and patching's, and for block sites the error of
the joint estimate against the sum of its two sub-block estimates.

A row (JSON) holds step, kind, sigma, draw and per-site lists "exact", "atp", "atp_star", "graddrop" (Σ over pairs)
and the pairs' "contrast"; `doc["grid"]` names the grid's sites, the rest of a row's sites are q/k sites.
"""
import warnings

import numpy as np
from scipy.stats import spearmanr


def spearman(a, b):
    """Spearman over sites; NaN where either side is constant (no ranking)."""
    a, b = np.asarray(a), np.asarray(b)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(spearmanr(a, b).statistic)


def agreement(doc):
    """{(step, kind, sigma, set): {method: [Spearman per draw]}}: set "grid" or "q/k"; methods AtP, AtP*, |AtP|
    (magnitudes) and GradDrop (against |exact|)."""
    n = len(doc["grid"])
    parts = {"grid": slice(0, n), "q/k": slice(n, None)}
    out = {}
    for row in doc["rows"]:
        for part, sl in parts.items():
            ex = np.asarray(row["exact"])[sl]
            est = {"AtP": spearman(row["atp"][sl], ex), "AtP*": spearman(row["atp_star"][sl], ex),
                   "|AtP|": spearman(np.abs(row["atp"][sl]), np.abs(ex)),
                   "GradDrop": spearman(row["graddrop"][sl], np.abs(ex))}
            cell = out.setdefault((row["step"], row["kind"], row["sigma"], part), {})
            for method, v in est.items():
                cell.setdefault(method, []).append(v)
    return out


def block_errors(doc):
    """{(step, kind): (joint, per-atom sum)}: mean over σ, draws and blocks of |estimate − exact| / Σ|contrast|."""
    grid = doc["grid"]
    out = {}
    for row in doc["rows"]:
        scale = float(np.sum(np.abs(row["contrast"])))
        for i, lab in enumerate(grid):
            if "." in lab[len("blocks."):]:
                continue                                                 # only the block sites
            parts = [grid.index(f"{lab}.hook_{s}_out") for s in ("attn", "mlp")]
            joint = abs(row["atp"][i] - row["exact"][i]) / scale
            summed = abs(sum(row["atp"][j] for j in parts) - row["exact"][i]) / scale
            out.setdefault((row["step"], row["kind"]), []).append((joint, summed))
    return {k: tuple(np.mean(v, axis=0)) for k, v in out.items()}


def attribution_sums(D, clean, corrupt, sigma, sites, direction=None, seed=0):
    """One row's measurements: per site (list over `sites`) the Σ over pairs of the numerators of real patching
    ("exact"), AtP, AtP* and GradDrop (rounded to 7 digits), and each pair's contrast m(clean) − m(corrupt);
    `scoreprobe.inside.patch` with method="both", the same noise (`seed`) for every method."""
    from scoreprobe.inside import patch
    kw = dict(sites=sites, method="both", direction=direction, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)                    # undefined pooled values: not used here
        plain = patch(D, clean, corrupt, sigma, **kw)
        star = patch(D, clean, corrupt, sigma, atp_star=True, **kw)
    r = lambda v: [round(float(x), 7) for x in v]                        # noqa: E731
    return {"exact": r(plain.effect_numerator.sum("sample").values),
            "atp": r(plain.effect_atp_numerator.sum("sample").values),
            "atp_star": r(star.effect_atp_numerator.sum("sample").values),
            "graddrop": r(star.effect_atp_graddrop_numerator.sum("sample").values),
            "contrast": r((plain.metric_clean - plain.metric_corrupt).values)}
