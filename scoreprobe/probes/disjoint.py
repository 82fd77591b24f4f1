"""Do two models trained on disjoint data compute the same function? (Kadkhodaie et al., ICLR 2024)

Two denoisers A and B — trained with the same rule, N and recipe on disjoint training sets —
are compared on inputs that belong to neither, at each common training step:

- `cosine` (sigma): mean over noised fresh valid images x = v + σε of cos(D_A(x, σ), D_B(x, σ)) (`cosine_sd`: its
  standard deviation over the points), and `rms_diff` (sigma), the RMS per coordinate of D_A − D_B;
- `sample_same`: the share of samples drawn from the same initial noise (`sample`, same seed) whose
  thresholded endpoints are the same image, `sample_hamming` the mean Hamming distance of the two
  endpoints over D;
- `basin_same` (sigma_start): on planes through three fresh valid images, the share of grid points
  whose PF-ODE endpoints (from sigma_start) are the same vertex — basin labels compared as vertices,
  since "memorized" means a different set for each model.

Generalizing models should agree (the same valid images, the same basins); memorizing ones end on
their own, disjoint training sets. Read against a floor and a ceiling: the two training sets' memorizers
(`EmpiricalDenoiser`) compared the same way — their samples are their own training items, so for disjoint
sets `sample_same` is 0 by construction, while their cosine at large σ is not small (both pull towards the
mean of valid images) — and the rule oracle compared with itself (1 for every measure by construction).
Agreement is not rule recovery: read it beside the members' clocks (Maillard & Goldt 2026).

A non-finite endpoint (NaN/inf: a diverged denoiser) is no image: it is the same as nothing. The
shares and the Hamming distance are over the pairs whose two endpoints are finite (NaN when none is),
and `sample_nonfinite` / `basin_nonfinite` count the pairs left out, with a NonFiniteWarning; a NaN
denoiser output makes `cosine` and `rms_diff` NaN at that σ.
"""
import warnings

import numpy as np
import torch
import xarray as xr

from scoreprobe.data.datasets import to_bits
from scoreprobe.errors import ConfigError, NonFiniteWarning, user_stacklevel
from scoreprobe.probes.decompose import evaluate
from scoreprobe.sweep import as_steps, concat_steps, is_multi

DEFAULT_SIGMAS = (0.2, 0.5, 1.0, 2.0)


def disjoint_check(train_a, train_b):
    """Number of images in both training sets (0 for disjoint sets). (N_a, D), (N_b, D) uint8 -> int."""
    a = {bytes(r) for r in np.asarray(train_a, np.uint8)}
    return sum(bytes(r) in a for r in np.asarray(train_b, np.uint8))


def _cosines(ya, yb):
    """Per-point cosine of ya, yb (P, D) -> (P,) (NaN where an output is zero)."""
    num = (ya * yb).sum(1)
    den = np.linalg.norm(ya, axis=1) * np.linalg.norm(yb, axis=1)
    return num / np.where(den > 0, den, np.nan)


def _endpoints(D, x0, sigma, n_steps):
    """Signed PF-ODE endpoints from x0 (B, D) at sigma: (B, D) float numpy (NaN rows: non-finite)."""
    from scoreprobe.ode import integrate
    return integrate(D, x0.clone(), float(sigma), n_steps=n_steps).cpu().numpy()


def _agreement(xa, xb):
    """Agreement of paired signed endpoints xa, xb (B, D) over the pairs both finite: (share the same image,
    mean Hamming distance / D, number of pairs left out); the shares NaN when every pair has a non-finite one."""
    ok = np.isfinite(xa).all(1) & np.isfinite(xb).all(1)                        # (B,)
    if not ok.any():
        return float("nan"), float("nan"), int(len(ok))
    ba, bb = to_bits(xa[ok]), to_bits(xb[ok])
    return float((ba == bb).all(1).mean()), float((ba != bb).mean()), int((~ok).sum())


def _warn_left_out(n_sample, n_basin, n_samples, n_grid):
    """One NonFiniteWarning when some endpoint pairs were left out of the agreement shares."""
    if n_sample or sum(n_basin):
        warnings.warn(f"disjoint_agreement: {n_sample} of {n_samples} sample pairs and {sum(n_basin)} of "
                      f"{n_grid * len(n_basin)} plane-grid pairs have a non-finite (NaN/inf) endpoint; they are "
                      "left out of sample_same, sample_hamming and basin_same (counted in sample_nonfinite, "
                      "basin_nonfinite)", NonFiniteWarning, stacklevel=user_stacklevel())


def compare_pair(Da, Db, rule, *, sigmas=DEFAULT_SIGMAS, n_points=64, n_samples=200, n_planes=2, res=16,
                 sigma_starts=(0.5, 1.0), n_steps=18, seed=0):
    """The agreement measures of one pair of denoisers (module docstring) -> Dataset without `step`."""
    from scoreprobe.noise import randn_per_sample
    from scoreprobe.ode.samplers import sample
    d = int(rule.n_bits)
    v = torch.as_tensor(rule.sample(n_points, seed=seed), dtype=torch.float64) * 2 - 1        # (P, D)
    eps = randn_per_sample(seed, np.arange(n_points), d, dtype=torch.float64)
    cos, cos_sd, rms = [], [], []
    for s in sigmas:
        ya, yb = evaluate(Da, v + s * eps, s, torch.float32), evaluate(Db, v + s * eps, s, torch.float32)
        c = _cosines(ya, yb)                                                      # (P,)
        cos.append(float(np.mean(c)))
        cos_sd.append(float(np.std(c, ddof=1)) if len(c) > 1 else float("nan"))
        rms.append(float(np.sqrt(((ya - yb) ** 2).mean())))
    with warnings.catch_warnings():                 # the left-out pairs are said once, below
        warnings.simplefilter("ignore", NonFiniteWarning)
        same, hamming, n_bad = _agreement(sample(Da, n_samples, seed, n_steps=n_steps, dim=d).cpu().numpy(),
                                          sample(Db, n_samples, seed, n_steps=n_steps, dim=d).cpu().numpy())
        basin, basin_bad = _basins_same(Da, Db, rule, n_planes, res, sigma_starts, n_steps, seed)
    _warn_left_out(n_bad, basin_bad, n_samples, n_planes * res * res)
    return xr.Dataset({
        "cosine": (("sigma",), np.array(cos), {"units": "1", "long_name": "mean cosine of D_A(x,σ) and D_B(x,σ) "
                                                                       "on noised fresh valid images"}),
        "cosine_sd": (("sigma",), np.array(cos_sd), {"units": "1", "long_name": "standard deviation over the "
                                                    "points of the per-point cosine (for an interval of `cosine`)"}),
        "rms_diff": (("sigma",), np.array(rms), {"units": "1", "long_name": "RMS per coordinate of D_A − D_B"}),
        "sample_same": ((), same, {
            "units": "1", "long_name": "share of samples from the same initial noise that are the same image "
                                       "(pairs with both endpoints finite; NaN: none)"}),
        "sample_hamming": ((), hamming, {
            "units": "1", "long_name": "mean Hamming distance / D of samples from the same initial noise "
                                       "(pairs with both endpoints finite; NaN: none)"}),
        "sample_nonfinite": ((), np.int64(n_bad), {
            "units": "1", "long_name": "sample pairs with a non-finite endpoint (left out of the shares)"}),
        "basin_same": (("sigma_start",), np.array(basin), {
            "units": "1", "long_name": "share of plane grid points whose PF-ODE endpoints are the same vertex "
                                       "(points with both endpoints finite; NaN: none)"}),
        "basin_nonfinite": (("sigma_start",), np.array(basin_bad, np.int64), {
            "units": "1", "long_name": "plane grid points with a non-finite endpoint (left out of basin_same)"}),
    }, coords={"sigma": ("sigma", np.asarray(sigmas, np.float64), {"units": "1", "long_name": "noise level σ"}),
               "sigma_start": ("sigma_start", np.asarray(sigma_starts, np.float64),
                               {"units": "1", "long_name": "σ at which the basin integration starts"})})


def _basins_same(Da, Db, rule, n_planes, res, sigma_starts, n_steps, seed):
    """basin_same and the pairs left out, per sigma_start: two lists of len(sigma_starts)."""
    from scoreprobe.slices import Plane
    anchors = rule.sample(3 * n_planes, seed=seed + 1).astype(np.float64) * 2 - 1
    grid = np.concatenate([Plane.through(*anchors[3 * i:3 * i + 3]).grid(res)[0] for i in range(n_planes)])
    x0 = torch.as_tensor(grid, dtype=torch.float32)                             # (n_planes·res², D)
    same, bad = [], []
    for s0 in sigma_starts:
        share, _, n_bad = _agreement(_endpoints(Da, x0, s0, n_steps), _endpoints(Db, x0, s0, n_steps))
        same.append(share)
        bad.append(n_bad)
    return same, bad


def disjoint_agreement(a, b, rule=None, *, steps=None, **kw):
    """Agreement of two denoisers, or of two series at their common steps (module docstring).

    Parameters
    ----------
    a, b : denoisers, or CheckpointSeries / {step: denoiser} mappings (compared at common steps).
    rule : the rule (a series brings its own); the fresh points are its valid images.
    steps : subset of the common steps (default all).
    **kw : `compare_pair` options (sigmas, n_points, n_samples, n_planes, res, sigma_starts, n_steps, seed).

    Returns
    -------
    xarray.Dataset ([step], sigma, sigma_start): cosine, cosine_sd, rms_diff, basin_same, basin_nonfinite; sample_same,
    sample_hamming, sample_nonfinite ([step]); attrs `shared_train` (images in both training sets) when both sources
    carry datasets.
    """
    rule = rule if rule is not None else getattr(a, "rule", None)
    if rule is None:
        raise ConfigError("disjoint_agreement needs the rule: pass rule= (a series carries it)")
    if is_multi(a) != is_multi(b):
        raise ConfigError("compare two denoisers or two series, not one of each")
    attrs = {}
    if getattr(a, "dataset", None) is not None and getattr(b, "dataset", None) is not None:
        attrs["shared_train"] = disjoint_check(a.dataset.train, b.dataset.train)
    if not is_multi(a):
        return compare_pair(a, b, rule, **kw).assign_attrs(attrs)
    pa, pb = dict(as_steps(a)), dict(as_steps(b))
    common = sorted(set(pa) & set(pb))
    if steps is not None:
        missing = sorted({int(s) for s in steps} - set(common))
        if missing:
            raise ConfigError(f"steps {missing} are not common to both series; common: {common}")
        common = sorted(int(s) for s in steps)
    if not common:
        raise ConfigError("the two series have no training step in common")
    parts = [compare_pair(pa[s](), pb[s](), rule, **kw).expand_dims(step=[s]) for s in common]
    return concat_steps(parts).assign_attrs(attrs)


def disjoint_data_seeds(rule_spec, n, n_heldout, k, first=0, tries=200):
    """k data seeds (the first `first`) whose training sets of n items are pairwise disjoint -> [int] * k.

    Greedy over seeds first, first + 1, ...: a seed is kept when its training set shares no image with any kept
    one. RuntimeError when `tries` seeds do not give k."""
    from scoreprobe.data.datasets import make_dataset
    from scoreprobe.data.rules import rule_from_spec
    rule = rule_from_spec(rule_spec)
    kept, seen = [], set()
    for s in range(first, first + tries):
        rows = {bytes(r) for r in np.asarray(make_dataset(rule, n, n_heldout, s).train, np.uint8)}
        if not rows & seen:
            kept.append(s)
            seen |= rows
            if len(kept) == k:
                return kept
    raise RuntimeError(f"no {k} pairwise disjoint training sets of {n} items among {tries} data seeds")


def agreement_json(ds):
    """A `compare_pair` / `disjoint_agreement` Dataset -> JSON-able dict ([step] first where present)."""
    out = {"sigma": [float(v) for v in ds.sigma.values], "sigma_start": [float(v) for v in ds.sigma_start.values]}
    if "step" in ds.dims:
        out["steps"] = [int(v) for v in ds.step.values]
    for v in ("cosine", "cosine_sd", "rms_diff", "sample_same", "sample_hamming", "sample_nonfinite", "basin_same",
              "basin_nonfinite"):
        out[v] = np.asarray(ds[v].values).tolist()
    return out
