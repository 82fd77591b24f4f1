"""Clocks of the constraint families (rows, columns, boxes, cells of Latin squares and Sudoku).

`clocks` stores, for a rule with `family_names`, `family_valid` (step, sample, family) and
`family_acc` (step, family). τ_family = the first step where family_acc reaches the threshold,
interpolated as the other clocks (linear in (log(step + 1), logit y); "reliable" by default,
"first_crossing" by name, `stats.taus`). The CIs and the orderings come from one paired
bootstrap: the sample indices are resampled with replacement jointly across checkpoints and
families (sample i has the same initial noise at every checkpoint), so every family is read off
the same resampled samples. Ordering a<b:
ratio τ_a/τ_b with its CI, and share_first = the share of resamples where a reaches first
(ties, both unreached included, count one half). docs/definitions.md, "Constraint families".
"""
import math

import numpy as np

from scoreprobe.defaults import RULE_THRESHOLD
from scoreprobe.errors import ConfigError
from scoreprobe.stats.crossings import DEFAULT_DEFINITION, crossing_of
from scoreprobe.stats.taus import _ci, sample_weights


def _valid(ds):
    if "family_valid" not in ds:
        raise ConfigError("family clocks need `family_valid` (step, sample, family): a clocks Dataset of a rule "
                          "with constraint families (LatinSquare, Sudoku)")
    ds = ds.sortby("step")
    fv = np.asarray(ds["family_valid"].transpose("step", "sample", "family").values, dtype=np.int64)   # (S, n, F)
    return ds, np.log1p(ds["step"].values.astype(np.float64)), fv, [str(f) for f in ds["family"].values]


def _taus_u(u, acc, n, threshold, definition=DEFAULT_DEFINITION):
    """acc (B, S, F) -> τ in u (B, F), NaN: not reached."""
    return np.stack([crossing_of(u, acc[..., f], n, threshold, definition) for f in range(acc.shape[-1])], axis=-1)


def _boot(fv, n_boot, seed):
    """(B, S, F) family accuracies of the joint resamples of the sample indices."""
    S, n, F = fv.shape
    W = sample_weights(n, n_boot, seed)                                       # (B, n)
    return (W @ fv.transpose(1, 0, 2).reshape(n, S * F).astype(np.float64)).reshape(-1, S, F) / n


def u_to_steps(u):
    """u-values log(step + 1) (NaN: not reached) -> steps, +inf where not reached."""
    return np.where(np.isnan(u), np.inf, np.expm1(np.asarray(u, dtype=np.float64)))


def family_draws(ds, family, threshold=RULE_THRESHOLD, n_boot=1000, seed=0, definition=DEFAULT_DEFINITION):
    """Point τ and (n_boot,) bootstrap draws of one family's clock, in steps (+inf: not reached)."""
    ds, u, fv, names = _valid(ds)
    if family not in names:
        raise ConfigError(f"no constraint family {family!r}; the Dataset has {', '.join(names)}")
    f = names.index(family)
    n = fv.shape[1]
    point = _taus_u(u, fv.mean(axis=1)[None], n, threshold, definition)[0, f]
    return float(u_to_steps(point)), u_to_steps(_taus_u(u, _boot(fv, n_boot, seed), n, threshold, definition)[:, f])


def family_taus(ds, threshold=RULE_THRESHOLD, n_boot=1000, seed=0, ci=0.95, definition=DEFAULT_DEFINITION):
    """τ of every constraint family with CIs, and their paired orderings.

    Parameters
    ----------
    ds : clocks Dataset with family_valid (step, sample, family).
    threshold : of family_acc. n_boot, seed, ci : the paired bootstrap. definition : as in `stats.taus`.

    Returns
    -------
    dict: {family: {"tau" (steps, NaN: not reached), "ci" [lo, hi] (hi inf: not reached in more
    than (1 − ci)/2 of the resamples), "reached" (share)}} for each family, "order": {"a<b":
    {"ratio", "ci", "share_first"}} for every pair a before b in family order, threshold, n_boot,
    ci_level.
    """
    ds, u, fv, names = _valid(ds)
    n = fv.shape[1]
    point = u_to_steps(_taus_u(u, fv.mean(axis=1)[None], n, threshold, definition)[0])         # (F,)
    boot = u_to_steps(_taus_u(u, _boot(fv, n_boot, seed), n, threshold, definition))          # (B, F)
    out = {name: {"tau": float(point[f]) if np.isfinite(point[f]) else math.nan, "ci": _ci(boot[:, f], ci),
                  "reached": float(np.mean(np.isfinite(boot[:, f])))} for f, name in enumerate(names)}
    out["order"] = {f"{names[a]}<{names[b]}": _order(point[a], point[b], boot[:, a], boot[:, b], ci)
                    for a in range(len(names)) for b in range(a + 1, len(names))}
    out.update(threshold=threshold, n_boot=int(n_boot), ci_level=ci, definition=definition)
    return out


def interval(v, ci):
    """Percentile interval of (B,) replicates; an undetermined one (NaN) counts against both ends."""
    q = [(1 - ci) / 2 * 100, (1 + ci) / 2 * 100]
    lo = np.percentile(np.where(np.isnan(v), -np.inf, v), q[0], method="lower")
    hi = np.percentile(np.where(np.isnan(v), np.inf, v), q[1], method="higher")
    return [float(lo), float(hi)]


def first_share(da, db):
    """(B,) 1 where draw a reaches before draw b, ½ on a tie (both unreached included), else 0."""
    return (da < db) + 0.5 * (da == db)


def _order(pa, pb, da, db, ci):
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = pa / pb if np.isfinite(pa) and np.isfinite(pb) and pb > 0 else math.nan
        r = da / db                                                            # inf/inf: NaN, undetermined
    share = float(np.mean(first_share(da, db)))
    return {"ratio": float(ratio), "ci": interval(r, ci), "share_first": share}
