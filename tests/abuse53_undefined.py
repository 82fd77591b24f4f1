"""Issue 53, item 1: undefined is never an answer. Denoisers that return NaN (everywhere, at one σ, for some
rows) fed to every denoiser-facing probe; each answer must show the NaN (or the documented invalid state and
its count), never a finite number or an oracle's name derived from it.

The attacks run through `abuse_issue53.run` on the inputs of tests/abuse53_nan_inputs.py;
tests/test_abuse53_undefined.py parametrizes over ATTACKS.
(dsm_by_sigma's non-finite items and basins' NaN points are held by tests/test_dsm.py and
tests/test_nonfinite_rows.py.)
"""
import math
import warnings

import numpy as np
import xarray as xr

from abuse53_nan_inputs import constant, data, diverged_run, nan_at, nan_everywhere, nan_rows, recorded
from abuse_issue53 import Attack
from scoreprobe.errors import ConfigError, DataError

SIGMAS = [0.2, 0.5, 1.0, 2.0]
NAN_SIGMA = 0.5


def _check(cond, what):
    if not cond:
        raise AssertionError(what)


# ---------------------------------------------------------------------------------------------
# crossover
# ---------------------------------------------------------------------------------------------

def _crossover(series, **kw):
    from scoreprobe.probes.crossover import crossover
    rule, ds, _, _ = data()
    return recorded(lambda: crossover(series, dataset=ds, rule=rule, sigmas=SIGMAS, n_noise=4,
                                      oracles=("memorizer", "rule"), progress=False, **kw))


def _series(middle):
    rule, ds, mem, gen = data()
    return {1: lambda x, s: 0.8 * gen(x, s), 50: middle, 100: mem}


def _diverged_checkpoint(work, result):
    (out, said), (ref, _) = result, _crossover({k: v for k, v in _series(None).items() if k != 50})
    avg, gap = float(out.loss_avg.sel(step=50)), float(out.gap_closed.sel(step=50))
    _check(np.isnan(avg) and np.isnan(gap), f"the diverged step has loss_avg {avg}, gap_closed {gap}")
    _check(np.isfinite(out.loss_avg.sel(step=[1, 100])).all(), "a defined checkpoint lost its average")
    _check(out.attrs["tau_cross"] == ref.attrs["tau_cross"],
           f"tau_cross {out.attrs['tau_cross']} is not the one from the defined checkpoints, {ref.attrs['tau_cross']}")
    _check(any("NonFiniteWarning" in m and "step 50" in m for m in said), f"no warning naming step 50: {said}")


def _nan_at_one_sigma(work, result):
    out, said = result
    loss = out.loss.values
    _check(np.isnan(loss[SIGMAS.index(NAN_SIGMA)]) and np.isfinite(np.delete(loss, SIGMAS.index(NAN_SIGMA))).all(),
           f"loss per σ {loss}")
    _check(np.isnan(float(out.loss_avg)), f"loss_avg {float(out.loss_avg)} averages over the defined σ only")
    _check(np.isnan(float(out.gap_closed)), f"gap_closed {float(out.gap_closed)}")
    _check(any("NonFiniteWarning" in m and "σ = 0.5" in m for m in said), f"no warning naming σ = 0.5: {said}")


def _all_diverged(work, result):
    out, said = result
    _check(np.isnan(out.loss_avg.values).all() and np.isnan(out.gap_closed.values).all(), "a finite average")
    _check(math.isnan(out.attrs["tau_cross"]), f"tau_cross {out.attrs['tau_cross']} from no defined checkpoint")
    _check(np.isnan(out.tau_cross_sigma.values).all(), f"tau_cross_sigma {out.tau_cross_sigma.values}")


def _crossing_step(work, result):
    from scoreprobe.probes.crossover import crossing_step
    _check(result == crossing_step([1, 100], [1.0, -1.0]), f"{result}: not the crossing of the defined checkpoints")
    _check(math.isnan(crossing_step([1, 10], [1.0, math.nan])), "a crossing after the last defined checkpoint")
    _check(math.isnan(crossing_step([1, 10], [math.nan, math.nan])), "a crossing of no defined checkpoint")
    _check(crossing_step([1, 10, 100], [math.nan, -1.0, -2.0]) == 10, "crossed before the first defined checkpoint")


def _no_excess(work):
    """Every valid image trained: the rule oracle is the memorizer, L_rule − L_mem = 0 (up to rounding)."""
    from scoreprobe.data.datasets import Dataset
    from scoreprobe.data.rules import Parity
    from scoreprobe.oracles import RuleDenoiser
    from scoreprobe.probes.crossover import crossover
    rule = Parity(G=2, shape=(2, 2), layout="contiguous")
    every = rule.enumerate()
    gen = RuleDenoiser(rule)
    return crossover({1: gen, 2: lambda x, s: 0.9 * gen(x, s)}, dataset=Dataset(every, every[:1], rule, 0),
                     rule=rule, sigmas=SIGMAS, n_noise=4, oracles=("memorizer", "rule"), progress=False)


def _gap_undefined(work, out):
    _check(np.isnan(out.gap_closed.values).all(), f"gap_closed {out.gap_closed.values}: a share of a zero excess")
    _check(np.isfinite(out.loss_avg.values).all(), "the losses themselves are defined")


CROSSOVER = [
    Attack("crossover-no-excess-to-close", 1, api=_no_excess, answer=_gap_undefined),
    Attack("crossover-diverged-checkpoint", 1, api=lambda w: _crossover(_series(nan_everywhere)),
           answer=_diverged_checkpoint),
    Attack("crossover-nan-at-one-sigma", 1, api=lambda w: _crossover(nan_at(data()[2])), answer=_nan_at_one_sigma),
    Attack("crossover-every-checkpoint-diverged", 1, api=lambda w: _crossover({1: nan_everywhere, 9: nan_everywhere}),
           answer=_all_diverged),
    Attack("crossing-step-skips-undefined-checkpoints", 1,
           api=lambda w: __import__("scoreprobe.probes.crossover", fromlist=["x"]).crossing_step(
               [1, 10, 100], [1.0, math.nan, -1.0]), answer=_crossing_step),
]


# ---------------------------------------------------------------------------------------------
# decompose / best_oracle: the stored Dataset, the CLI table, the figure
# ---------------------------------------------------------------------------------------------

def _decompose(D, **kw):
    from scoreprobe.probes.decompose import decompose
    rule, ds, _, _ = data()
    return decompose(D, dataset=ds, rule=rule, sigmas=[0.5, 1.0], n_points=4, oracles=("memorizer", "rule"),
                     progress=False, **kw)


def _all_undefined(work, out):
    from scoreprobe.stats.decompose_calls import best_oracle
    _check(np.isnan(out.r2.values).all(), f"r² {out.r2.values}")
    best = best_oracle(out)
    _check((best.values == "undefined").all(), f"best oracle {best.values.tolist()}")


def _cells(r2_rows):
    """A decompose-like Dataset (sigma, oracle) from rows of r² per oracle (memorizer, rule, local)."""
    r2 = np.array(r2_rows, np.float64)
    return xr.Dataset({"r2": (("sigma", "oracle"), r2)},
                      coords={"sigma": np.arange(len(r2)) + 1.0,
                              "oracle": ["memorizer", "rule", "local"][:r2.shape[1]]})


def _cells_labelled(work, best):
    want = ["undefined", "undefined", "undefined", "rule", "tie"]
    _check(best.values.tolist() == want, f"best oracle {best.values.tolist()}, expected {want}")
    _check("undefined" in best.attrs["flag_meanings"].split(), f"flag_meanings {best.attrs.get('flag_meanings')}")


def _stored(work):
    from scoreprobe.stats.decompose_calls import best_oracle
    from scoreprobe.store.format import open_store
    _decompose({0: data()[3], 5: nan_everywhere, 9: constant}, out=work / "d.zarr")
    return best_oracle(open_store(work / "d.zarr").sel(split="heldout"))


def _stored_labelled(work, best):
    _check((best.sel(step=0).values != "undefined").all(), f"step 0 (the rule oracle) {best.sel(step=0).values}")
    for step in (5, 9):
        _check((best.sel(step=step).values == "undefined").all(), f"step {step}: {best.sel(step=step).values}")


def _cli_table(work, result):
    code, out, err = result
    _check(code == 0, f"exit {code}: {err}")
    row = [ln.split() for ln in out.splitlines() if ln.split()[:1] == ["12"]][:1]    # the calls' row
    _check(len(row) == 1, f"no row for step 12 in\n{out}")
    _check(row[0][1:3] == ["?", "?"] and row[0][3:] == ["nan", "nan"], f"step 12 (NaN weights) reads {row[0]}")
    _check("2 undefined" in out, f"no count of the undefined cells in\n{out}")


def _figure(work):
    from scoreprobe.viz.decompose import plot_decompose
    out = _decompose({0: data()[3], 5: nan_everywhere, 9: data()[2]})
    fig = plot_decompose(out, split="heldout")
    panel = fig.axes[2]                                              # the best-oracle panel: codes (sigma, step)
    return out, panel.images[0].get_array(), [t.get_text() for t in panel.get_legend().get_texts()]


def _figure_codes(work, result):
    out, codes, legend = result
    _check("undefined" in legend, f"the legend {legend} does not name the undefined cells")
    names = list(out.oracle.values)
    from scoreprobe.stats.decompose_calls import LABELS
    undefined = len(names) + LABELS.index("undefined")               # order: oracles, then the labels
    _check((np.asarray(codes)[:, 1] == undefined).all(), f"the NaN step is drawn as {np.asarray(codes)[:, 1]}")
    _check((np.asarray(codes)[:, [0, 2]] < undefined).all(), "a defined cell drawn as undefined")


DECOMPOSE = [
    Attack("decompose-nan-denoiser", 1, api=lambda w: _decompose(nan_everywhere), answer=_all_undefined),
    Attack("decompose-constant-denoiser", 1, api=lambda w: _decompose(constant), answer=_all_undefined),
    # issue 55: a call needs a bootstrap over points; a hand-made r² table has none and is refused
    Attack("best-oracle-nan-cells", 1, api=lambda w: __import__("scoreprobe.stats.decompose_calls", fromlist=["x"])
           .best_oracle(_cells([[np.nan] * 3, [np.nan, 0.9, 0.1], [0.95, np.nan, 0.9], [0.5, 0.9, 0.1],
                                [0.9, 0.905, 0.1]])), error=ConfigError, match="per-point statistics"),
    Attack("best-oracle-from-a-store", 1, api=_stored, answer=_stored_labelled),
    Attack("decompose-cli-diverged-checkpoint", 1,
           argv=lambda w: ["decompose", diverged_run(w), "--steps", "all", "--n-points", "4", "--sigmas", "0.5,1",
                           "--oracles", "memorizer,rule"], answer=_cli_table, timeout_s=120, slow_s=60),
    Attack("decompose-figure-undefined-cells", 1, api=_figure, answer=_figure_codes),
]


# ---------------------------------------------------------------------------------------------
# The other denoiser-facing probes: the NaN shows, or the documented invalid state and its count
# ---------------------------------------------------------------------------------------------

def _clocks(work, keep_bits=False, rule=None, ds=None):
    from scoreprobe.stats.clocks import clocks
    r, d, mem, _ = data()
    return recorded(lambda: clocks({0: mem, 10: nan_everywhere, 20: nan_rows(mem)}, n_samples=16, n_steps=6,
                                   dataset=ds or d, rule=rule or r, n_boot=0, keep_bits=keep_bits, progress=False))


def _clocks_invalid(work, result):
    from scoreprobe.data.datasets import STATE_CODES
    out, said = result
    invalid = (out.state == STATE_CODES["invalid"]).sum("sample").values
    _check(invalid[0] == 0 and invalid[1] == 16 and 0 < invalid[2] < 16, f"invalid endpoints per step {invalid}")
    nan_step = out.sel(step=10)
    _check(float(nan_step.rule_acc) == 0 and float(nan_step.mem_ratio) == 0, "a NaN sample counted as valid")
    _check(np.isnan(float(nan_step.group_acc)) and np.isnan(float(nan_step.off_vertex)),
           f"group_acc {float(nan_step.group_acc)} / off_vertex {float(nan_step.off_vertex)} of no finite sample")
    _check(any("NonFiniteWarning" in m and "invalid" in m for m in said), f"no warning: {said}")


def _field(work):
    from scoreprobe.probes.field import score_field
    from scoreprobe.slices import auto_plane
    rule, ds, mem, _ = data()
    return recorded(lambda: score_field(nan_at(mem), auto_plane(ds, rule), [0.5, 1.0], res=4))


def _field_nan_at_sigma(work, result):
    out, said = result
    for var in out.data_vars:
        v = out[var].values
        _check(np.isnan(v[0]).all() and np.isfinite(v[1]).all(), f"{var}: NaN at σ = 0.5 only expected")
    _check(any("NonFiniteWarning" in m for m in said), f"no warning: {said}")


def _retention(work):
    from scoreprobe.probes.retention import retention
    rule, ds, _, _ = data()
    return recorded(lambda: retention(nan_everywhere, sigmas=[0.5], n_noise=2, n_train=3, n_heldout=3, n_steps=6,
                                      dataset=ds, rule=rule))


def _retention_invalid(work, result):
    out, said = result
    shares = sum(out[k] for k in ("retained", "captured", "other_valid", "violating"))
    _check((shares == 0).all(), f"shares of NaN restarts {shares.values}: the non-finite share must be 1 − their sum")
    _check(np.isnan(out.capture_distance_ratio.values).all(), "a capture distance ratio of no captured restart")
    _check(any("NonFiniteWarning" in m for m in said), f"no warning: {said}")


def _disjoint(work):
    from scoreprobe.probes.disjoint import disjoint_agreement
    rule = data()[0]
    return recorded(lambda: disjoint_agreement(nan_everywhere, nan_everywhere, rule, n_points=8, n_samples=8,
                                               n_planes=1, res=4, n_steps=6))


def _disjoint_nan(work, result):
    out, said = result
    for var in ("cosine", "rms_diff", "sample_same", "sample_hamming", "basin_same"):
        _check(np.isnan(out[var].values).all(), f"{var} = {out[var].values} for two diverged denoisers")
    _check("sample_nonfinite" in out and "basin_nonfinite" in out, "no count of the left-out pairs")
    _check(int(out.sample_nonfinite) == 8 and (out.basin_nonfinite == 16).all(), "left-out pairs not counted")
    _check(any("NonFiniteWarning" in m and "left out" in m for m in said), f"no warning: {said}")


def _disjoint_some_rows(work):
    from scoreprobe.probes.disjoint import disjoint_agreement
    rule, _, _, gen = data()
    return recorded(lambda: disjoint_agreement(nan_rows(gen), gen, rule, n_points=8, n_samples=16, n_planes=1,
                                               res=4, n_steps=6))


def _disjoint_counted(work, result):
    out, said = result
    _check("sample_nonfinite" in out, "no count of the left-out sample pairs")
    n = int(out.sample_nonfinite)
    _check(0 < n < 16 and float(out.sample_same) == 1.0, f"{n} left out, sample_same {float(out.sample_same)}: "
           "the finite pairs of two rule oracles are the same image")
    _check(np.isnan(out.cosine.values).all(), f"cosine {out.cosine.values} with NaN rows")


def _counts(work):
    from scoreprobe.probes.counts import bit_sums, count_error_shares
    out, _ = _clocks(work, keep_bits=True)
    return count_error_shares(bit_sums(out.bits.values, out.state.values), k=8)


def _counts_invalid(work, shares):
    _check(np.isnan(shares["mean_abs"][1]) and shares["share_not_finite"][1] == 1, f"step 10 (NaN): {shares}")
    _check(shares["share"][1].sum() == 0 and shares["share_top"][1] == 0, "a NaN sample given a count error")


def _families(work):
    from scoreprobe.data.datasets import make_dataset
    from scoreprobe.data.grids import LatinSquare
    from scoreprobe.oracles import RuleDenoiser
    from scoreprobe.stats.clocks import clocks
    from scoreprobe.stats.families import family_taus
    rule = LatinSquare(3)
    ds = make_dataset(rule, n_train=6, n_heldout=0, seed=0)
    gen = RuleDenoiser(rule)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = clocks({1: nan_everywhere, 10: nan_everywhere, 100: gen, 1000: gen}, n_samples=64, n_steps=8,
                   dataset=ds, rule=rule, n_boot=0, progress=False)
    return c, family_taus(c, n_boot=20)


def _families_invalid(work, result):
    c, taus = result
    acc = c.family_acc.sel(step=[1, 10]).values
    _check((acc == 0).all(), f"family_acc of NaN samples {acc}: non-finite samples fail every family")
    for name in ("rows", "columns", "cells"):
        _check(10 < taus[name]["tau"] <= 100, f"{name}: τ {taus[name]['tau']}, expected after the diverged "
               "checkpoints (10) and by the first rule-oracle one (100)")


def _circuits(work):
    from scoreprobe.loading.series import load_series
    from scoreprobe.probes.circuits import circuits
    return recorded(lambda: circuits(load_series(diverged_run(work)), sigmas=[0.5], n_pairs=2, sites="all",
                                     attention=False, steps=[1, 12], progress=False))


def _circuits_nan(work, result):
    out, said = result
    for var in ("copy_effect", "copy_total", "rule_effect", "rule_total"):
        if var in out:
            v = out[var].sel(step=12).values
            _check(np.isnan(v).all(), f"{var} of the NaN checkpoint: {v}")
            _check(np.isfinite(out[f"{var.split('_')[0]}_total"].sel(step=1).values).all(), "step 1 lost")


def _capture(work):
    from scoreprobe.probes.capture import nearest_valid_vertex
    x = np.ones((3, 16))
    x[1, 4] = np.nan
    return nearest_valid_vertex(x, data()[0])


PROBES = [
    Attack("clocks-nan-denoiser", 1, api=_clocks, answer=_clocks_invalid),
    Attack("score-field-nan-at-one-sigma", 1, api=_field, answer=_field_nan_at_sigma),
    Attack("retention-nan-denoiser", 1, api=_retention, answer=_retention_invalid),
    Attack("disjoint-two-nan-denoisers", 1, api=_disjoint, answer=_disjoint_nan),
    Attack("disjoint-nan-rows", 1, api=_disjoint_some_rows, answer=_disjoint_counted),
    Attack("counts-nan-samples", 1, api=_counts, answer=_counts_invalid),
    Attack("families-nan-checkpoints", 1, api=_families, answer=_families_invalid, timeout_s=120),
    Attack("circuits-diverged-checkpoint", 1, api=_circuits, answer=_circuits_nan, timeout_s=120, slow_s=60),
    Attack("capture-nearest-vertex-of-nan-point", 1, api=_capture, error=DataError, match="NaN/inf"),
]

ATTACKS = CROSSOVER + DECOMPOSE + PROBES
