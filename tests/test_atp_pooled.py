"""Pooled patching effects checked through scoreprobe.inside.ratio (issue 55 items 5-6): Σ(m − m_r)/Σ(m_c − m_r)
where the pairs' contrasts share a sign and are large enough; NaN with the reason and one warning otherwise (patch,
its AtP and path_patch); a pair's own ratio NaN below the floor; `confirm` ranks by the mean over pairs then."""
import warnings

import numpy as np
import pytest

import scoreprobe as sp


def _mixed(data, n=6):
    """(clean, corrupt, direction): copy pairs read along y_c − y_r for the first half, along −(y_c − y_r) for the
    second: the contrasts of the two halves have opposite signs."""
    c, r = data.train[:n], data.heldout[:n]
    sign = np.where(np.arange(n) < n // 2, 1.0, -1.0)[:, None]
    return c, r, (sign * (sp.to_signed(c) - sp.to_signed(r))).astype(np.float32)


def _recorded(fn):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = fn()
    return out, [w for w in rec if issubclass(w.category, UserWarning)]


def test_defined_pooled_is_the_ratio_of_sums(shipped):
    D, data = shipped
    ds, rec = _recorded(lambda: sp.patch(D, data.train[:6], data.heldout[:6], 0.7, sites="sub", method="both"))
    den = (ds.metric_clean - ds.metric_corrupt).values
    assert (den > 0).all() and not rec and ds.attrs["pooled_undefined"] == ""
    np.testing.assert_allclose(ds.effect_pooled.values, ds.effect_numerator.values.sum(1) / den.sum(), rtol=1e-12)
    np.testing.assert_allclose(ds.effect_atp_pooled.values, ds.effect_atp_numerator.values.sum(1) / den.sum(),
                               rtol=1e-12)
    assert list(ds.effect_pooled_undefined.values) == [""] * ds.sizes["site"]


def test_mixed_sign_contrasts_leave_every_pooled_value_undefined_with_one_warning(shipped):
    D, data = shipped
    clean, corrupt, w = _mixed(data)
    ds, rec = _recorded(lambda: sp.patch(D, clean, corrupt, 0.7, sites="sub", method="atp*", confirm=2, direction=w))
    den = (ds.metric_clean - ds.metric_corrupt).values
    assert (den > 0).any() and (den < 0).any()
    assert len(rec) == 1 and "mixed sign" in str(rec[0].message)
    assert ds.attrs["pooled_undefined"] == "mixed sign"
    for v in ("effect_pooled", "effect_atp_pooled", "effect_atp_graddrop_pooled"):
        assert np.isnan(ds[v].values).all(), v
    reason = ds.effect_pooled_undefined.values
    run = np.isfinite(ds.effect_numerator.values).all(1)
    assert set(reason[run]) == {"mixed sign"} and set(reason[~run]) == {"not run"}
    # confirm ranks by the mean over pairs of the GradDrop score where the pooled value is undefined
    top = np.argsort(-np.abs(np.nanmean(ds.effect_atp_graddrop.values, 1)), kind="stable")[:2]
    assert set(np.flatnonzero(run)) == set(top)
    assert np.isfinite(ds.effect.values[run]).all()                         # the pairs' own ratios stay


def test_a_pair_below_the_floor_has_no_ratio(shipped):
    D, data = shipped
    c, r = data.train[:4], data.heldout[:4]
    ds = sp.patch(D, c, r, 0.7, sites="sub", floor=0)
    den = np.abs((ds.metric_clean - ds.metric_corrupt).values)
    floor = float(np.sort(den)[1]) * 1.0001                                 # the two smallest contrasts fall below
    with pytest.warns(UserWarning, match="2 of 4 pairs"):
        low = sp.patch(D, c, r, 0.7, sites="sub", floor=floor)
    small = den < floor
    assert np.isnan(low.effect.values[:, small]).all() and np.isfinite(low.effect.values[:, ~small]).all()
    np.testing.assert_array_equal(low.effect_numerator.values, ds.effect_numerator.values)


def test_path_patch_pooled_is_checked_too(shipped):
    D, data = shipped
    clean, corrupt, w = _mixed(data)
    with pytest.warns(UserWarning, match="mixed sign"):
        paths = sp.path_patch(D, clean, corrupt, 0.7, senders="blocks.0.hook_mlp_out", receivers="final", direction=w)
    assert np.isnan(paths.effect_pooled.values).all() and paths.attrs["pooled_undefined"] == "mixed sign"
    ok = sp.path_patch(D, data.train[:4], data.heldout[:4], 0.7, senders="blocks.0.hook_mlp_out", receivers="final")
    den = ok.effect_numerator.values[0, 0] / ok.effect.values[0, 0]
    np.testing.assert_allclose(ok.effect_pooled.values[0, 0], ok.effect_numerator.values[0, 0].sum() / den.sum(),
                               rtol=1e-9)
