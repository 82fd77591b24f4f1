"""The count error |Σ bits − k| of exact-K runs and the chance levels of a rule, from the study exports
(analyses/exactk_ladder): the count error per run and step, pooled over training seeds at selected checkpoints;
the chance levels of every rule (uniformly random bits, exact) with the measured accuracy at step 0
(docs/definitions.md, "Count error and chance levels")."""
import math
from fractions import Fraction

import numpy as np
import scipy.stats

from scoreprobe.data.rules import rule_from_spec
from scoreprobe.probes.counts import TOP, chance_accuracy, chance_count_error, count_error_shares
from scoreprobe.stats.intervals import t_interval


def run_counts(ds, k):
    """The count-error distribution of one run per step from its export's Dataset (`bit_sum` (step,
    sample)): {"step", "mean_abs", "share" (S, TOP), "share_top", "share_not_finite", "share0_is_rule_acc"}
    as lists; None when the export holds no Σ bits (version 1)."""
    if "bit_sum" not in ds:
        return None
    c = count_error_shares(ds["bit_sum"].values, k)
    out = {key: np.asarray(v).tolist() for key, v in c.items()}
    out["step"] = ds.step.values.tolist()
    # error 0 <=> valid, read two ways: the sum of the bits here, the rule's own check in the state
    out["share0_is_rule_acc"] = bool(np.array_equal(np.round(c["share"][:, 0] * ds.sizes["sample"]),
                                                    np.round(ds.rule_acc.values * ds.sizes["sample"])))
    return out


def selected_steps(n_steps, peak):
    """Checkpoint indices of the count tables: step 0, the first after it, every 4th, the last and `peak`."""
    return sorted({0, min(1, n_steps - 1), *range(1, n_steps, 4), n_steps - 1, int(peak)})


def pooled_counts(rows):
    """The count error of one configuration pooled over the seeds whose export has Σ bits, at
    `selected_steps`: {"seeds", "rows": [{"step", "mean_abs", "mean_abs_ci", "share", "share_top",
    "share_not_finite", "rule_acc"}]}; None when no seed has them. Shares: means over seeds (equal sample
    counts: the pooled share); mean |Σ − k|: mean over seeds with the t interval over seeds (clipped at 0)."""
    have = [r for r in rows if r.get("counts")]
    if not have:
        return None
    steps = have[0]["counts"]["step"]
    if any(r["counts"]["step"] != steps for r in have):
        raise ValueError("the seeds of one configuration measured different steps")
    get = lambda key: np.array([r["counts"][key] for r in have], dtype=np.float64)   # noqa: E731  (seeds, S, ...)
    mean_abs, share, top, nf = get("mean_abs"), get("share"), get("share_top"), get("share_not_finite")
    acc = np.array([r["curve"]["rule_acc"] for r in have], dtype=np.float64)
    out = []
    for j in selected_steps(len(steps), int(np.argmax(acc.mean(axis=0)))):   # rule_acc: a share, never NaN
        # (np.argmax would pick a NaN step, shown as nan, not skip it)
        m, lo, hi = t_interval(mean_abs[:, j])   # a mean of non-negative errors: the lower end clipped at 0
        out.append({"step": int(steps[j]), "mean_abs": float(m), "mean_abs_ci": [float(max(lo, 0.0)), float(hi)],
                    "share": share[:, j].mean(axis=0).tolist(), "share_top": float(top[:, j].mean()),
                    "share_not_finite": float(nf[:, j].mean()), "rule_acc": float(acc[:, j].mean()),
                    "per_seed_mean_abs": mean_abs[:, j].tolist()})
    return {"seeds": [r["seed"] for r in have], "rows": out,
            "share0_is_rule_acc": all(r["counts"]["share0_is_rule_acc"] for r in have)}


def chance(rule_spec, n_train, top=TOP):
    """Chance levels of a rule (uniformly random bits), exact: {"accuracy": [numerator, denominator],
    "value", "formula", "copies"} and, for exact-K, "count_error" (mean_abs, share, share_top as floats;
    exact fractions in "count_error_exact"). "copies" = N / n_valid (numerator, denominator, value): the
    mem_ratio of the perfect generalizer (uniform over the valid images, docs/definitions.md), which
    copies a training item by chance; a memorization threshold at or below it is no evidence of copying."""
    rule = rule_from_spec(rule_spec)
    acc = chance_accuracy(rule)
    copies = Fraction(int(n_train), int(rule.n_valid))
    D = rule.n_bits
    if rule.name == "exactk":
        formula = f"C({D}, {rule.k}) / 2^{D} = {math.comb(D, rule.k)} / {2 ** D}"
    else:
        formula = f"2^({D} − {D // rule.G}) / 2^{D} = 2^-{D // rule.G}"
    out = {"accuracy": [acc.numerator, acc.denominator], "value": float(acc), "formula": formula,
           "copies": {"fraction": [copies.numerator, copies.denominator], "value": float(copies)}}
    if rule.name == "exactk":
        c = chance_count_error(D, rule.k, top)
        out["count_error"] = {"mean_abs": float(c["mean_abs"]), "share": [float(s) for s in c["share"]],
                              "share_top": float(c["share_top"])}
        out["count_error_exact"] = {"mean_abs": str(c["mean_abs"]), "share": [str(s) for s in c["share"]],
                                    "share_top": str(c["share_top"])}
    return out


def step0(rows, chance_value, ci=0.95):
    """Measured rule_acc at step 0 over the seeds: {"per_seed", "pooled", "ci" (Clopper–Pearson), "n",
    "identical", "relation" ("above" / "below" / "consistent" with chance)}; None when a run has no step-0
    checkpoint. When every seed's step-0 samples are the same (`step0_states` equal: the untrained DiT's
    output is zero, so its samples are the signs of the shared starting noise, docs/definitions.md) they are
    one draw of n samples, not S: the interval is that of one seed's n."""
    if not rows or any(r["curve"]["step"][0] != 0 for r in rows):
        return None
    n_each = [int(r["n_samples"]) for r in rows]
    hits = [round(r["curve"]["rule_acc"][0] * n) for r, n in zip(rows, n_each)]
    identical = len({r["step0_states"] for r in rows}) == 1
    k, n = (hits[0], n_each[0]) if identical else (int(sum(hits)), int(sum(n_each)))
    lo, hi = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=ci, method="exact")
    rel = "above" if lo > chance_value else "below" if hi < chance_value else "consistent"
    return {"per_seed": [h / m for h, m in zip(hits, n_each)], "pooled": k / n, "ci": [float(lo), float(hi)],
            "n": n, "identical": identical, "relation": rel}


def states_key(state):
    """A short digest of one checkpoint's per-sample states (n,) (equal digests: the same samples' states)."""
    import hashlib
    return hashlib.sha1(np.ascontiguousarray(state, dtype=np.int8).tobytes()).hexdigest()[:16]
