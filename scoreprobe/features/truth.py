"""Ground truth from the rule, per input, and the best linear readout of each at a site.

    truth = rule_features(rule, bits, clean=clean, train=ds.train)   # DataArray (sample, feature) bool
    probes = probe_directions(X, truth)                                # direction (feature, d_in), accuracy

The binary features of one input (its bits: the thresholded noisy x, `bits`; and the clean item it came
from, `clean`), both polarities of each, since a ReLU latent fires for one side only:
    group{j}=even / group{j}=odd     group j of `bits` satisfies / violates the rule (rule.group_valid)
    pixel{i}=1 / pixel{i}=0          pixel i of the clean item
    item{n}                          the clean item is training item n (memorization); items never present
                                     are constant features (undefined F1, left out of coverage)
A coordinate `kind` ("group", "pixel", "item") and `index` (j, i or n) go with each feature.
"""
import numpy as np
import xarray as xr

from scoreprobe.data.bitindex import BitIndex
from scoreprobe.errors import DataError
from scoreprobe.features.rows import site_rows


def rule_features(rule, bits, clean=None, train=None):
    """Binary ground-truth features per input (module docstring) as a bool DataArray (sample, feature).

    bits : (n, D) 0/1, the input's own bits (for a noisy x: to_bits(x)); clean : (n, D) 0/1 the clean items
    (default bits); train : (N, D) 0/1 training items (item features; None: none)."""
    bits = _bits(bits, rule.n_bits, "bits")
    clean = bits if clean is None else _bits(clean, rule.n_bits, "clean")
    if clean.shape != bits.shape:
        raise DataError(f"clean {clean.shape} and bits {bits.shape} must have the same shape")
    cols, names, kinds, index = [], [], [], []

    def add(values, name, kind, i):
        cols.append(values)
        names.append(name)
        kinds.append(kind)
        index.append(i)
    if hasattr(rule, "group_valid"):
        for j, ok in enumerate(np.asarray(rule.group_valid(bits)).T):
            add(ok, f"group{j}=even", "group", j)
            add(~ok, f"group{j}=odd", "group", j)
    for i in range(rule.n_bits):
        add(clean[:, i] == 1, f"pixel{i}=1", "pixel", i)
        add(clean[:, i] == 0, f"pixel{i}=0", "pixel", i)
    if train is not None:
        which = BitIndex(_bits(train, rule.n_bits, "train")).lookup(clean)   # (n,) -1 = not a training item
        for n in range(len(train)):
            add(which == n, f"item{n}", "item", n)
    return xr.DataArray(np.stack(cols, 1), dims=("sample", "feature"),
                        coords={"sample": np.arange(len(bits)), "feature": names,
                                "kind": ("feature", kinds), "index": ("feature", index)},
                        attrs={"long_name": "ground-truth binary features from the rule"})


def _bits(b, n_bits, what):
    b = np.asarray(b)
    if b.ndim != 2 or b.shape[1] != n_bits or not np.isin(b, (0, 1)).all():
        raise DataError(f"{what} must be 0/1 of shape (n, {n_bits}), got shape {b.shape}")
    return b.astype(np.uint8)


def probe_directions(activations, truth, *, site=None, steps=None, sigmas=None, token=None, ridge=1e-3,
                     test_share=0.5, seed=0):
    """The best linear readout of each feature at a site: ridge least squares of ±1 on the centred rows.

    activations : as train_sae; truth : DataArray (sample, feature) bool (rule_features), matched to the
    rows by `sample`. Rows are split at random (seed) into a fitting part and a held-out part of share
    `test_share`; accuracy is read on the held-out part. A feature constant on the fitting part has no
    direction (NaN) and no accuracy (NaN). ridge : the penalty relative to the mean eigenvalue of XᵀX.
    Returns a Dataset: direction (feature, d_in) the unit readout, mean_difference (feature, d_in) the unit
    difference of the class means on the fitting part (the direction the feature moves the activations: what a
    planted or SAE decoder direction is compared with), accuracy and majority (the held-out accuracy of always
    answering the commoner value) per feature."""
    X = site_rows(activations, site, steps, sigmas, token)
    x = X.values.astype(np.float64)                                          # (n, d_in)
    t = truth.sel(sample=X["sample"].values).transpose("sample", "feature").values.astype(bool)
    n = len(x)
    if n < 4:
        raise DataError(f"probe directions need at least 4 rows, got {n}")
    perm = np.random.default_rng(seed).permutation(n)
    n_test = min(max(1, int(round(test_share * n))), n - 2)
    test, fit = perm[:n_test], perm[n_test:]
    mu = x[fit].mean(0)
    a = x[fit] - mu
    gram = a.T @ a
    lam = ridge * np.trace(gram) / len(gram)
    y = np.where(t[fit], 1.0, -1.0)                                          # (n_fit, F)
    w = np.linalg.solve(gram + lam * np.eye(len(gram)), a.T @ (y - y.mean(0)))   # (d_in, F)
    pred = (x[test] - mu) @ w + y.mean(0) > 0                                # (n_test, F)
    acc = (pred == t[test]).mean(0)
    majority = np.maximum(t[test].mean(0), 1 - t[test].mean(0))
    constant = t[fit].all(0) | ~t[fit].any(0)
    norm = np.linalg.norm(w, axis=0)
    direction = np.where((constant | (norm == 0))[None, :], np.nan, w / np.where(norm > 0, norm, 1)).T
    acc = np.where(constant, np.nan, acc)
    diff = _mean_difference(a, t[fit], constant)                              # (F, d_in)
    return xr.Dataset({
        "direction": (("feature", "d_in"), direction, {"long_name": "unit probe direction (NaN: constant feature)"}),
        "mean_difference": (("feature", "d_in"), diff, {"long_name": "unit difference of the class means (NaN: "
                                                                     "constant feature)"}),
        "accuracy": ("feature", acc, {"long_name": "held-out accuracy of the linear probe", "units": "1"}),
        "majority": ("feature", majority, {"long_name": "held-out accuracy of the commoner value", "units": "1"}),
    }, coords={"feature": truth.feature.values}, attrs={"n_fit": int(len(fit)), "n_test": int(n_test),
                                                         "ridge": ridge, "seed": seed})


def _mean_difference(a, t, constant):
    """Unit (mean of rows where the feature is on − mean where it is off) per feature; NaN rows where undefined."""
    on = t.astype(np.float64)                                                # (n, F)
    n_on, n_off = on.sum(0), (1 - on).sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = (on.T @ a) / n_on[:, None] - ((1 - on).T @ a) / n_off[:, None]  # (F, d_in)
        norm = np.linalg.norm(d, axis=1, keepdims=True)
        d = d / norm
    d[constant | (norm[:, 0] == 0)] = np.nan
    return d
