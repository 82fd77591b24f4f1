"""The circuits probe (issue #37): pairs as defined, sweep over a series with a resumable store, the
attention summary against the parity groups, and the CLI's table."""
import numpy as np
import pytest
from click.testing import CliRunner

import scoreprobe as sp
from scoreprobe.cli import cli, main
from scoreprobe.probes.circuits import copy_pairs, rule_pairs, token_groups


@pytest.fixture(scope="module")
def series():
    return sp.load_series()


def test_pairs(series):
    data, rule = series.dataset, series.rule
    clean, corrupt = copy_pairs(data, 5)
    assert np.array_equal(clean, data.train[:5])
    held = {r.tobytes() for r in data.heldout}
    assert all(r.tobytes() in held for r in corrupt)
    d = np.abs(clean[:, None].astype(int) - data.heldout[None].astype(int)).sum(2).min(1)
    assert np.array_equal(np.abs(clean.astype(int) - corrupt.astype(int)).sum(1), d)
    c, r, w, bit = rule_pairs(data, rule, 20, seed=0)
    assert rule.is_valid(c).all() and not rule.is_valid(r).any()
    assert np.array_equal((c != r).sum(1), np.ones(20))
    for i in range(20):
        g = rule.groups[np.flatnonzero((rule.groups == bit[i]).any(1))[0]]
        assert set(np.flatnonzero(w[i])) == set(g) - {bit[i]}
        assert np.array_equal(w[i, w[i] != 0], 2.0 * c[i, w[i] != 0] - 1)


def test_token_groups_brute_force(series):
    D, rule = series.denoiser(0), series.rule
    share = token_groups(D.net, rule)
    token = lambda b: (b // 6 // 2) * 3 + (b % 6) // 2                   # noqa: E731  2x2 patches of 6x6
    want = np.zeros((9, 9), bool)
    for g in rule.groups:
        for a in g:
            for b in g:
                if token(a) != token(b):
                    want[token(a), token(b)] = True
    assert np.array_equal(share, want)


def test_probe_over_steps_and_resume(series, tmp_path):
    out = tmp_path / "c.zarr"
    kw = dict(sigmas=[0.5], n_pairs=4, sites=["blocks.1", "blocks.0.attn.hook_z[head=0]", "*", "none"], out=out)
    ds = sp.circuits(series, steps=[500, 36000], **kw)
    assert ds.rule_effect.dims == ("step", "sigma", "site")
    for kind in ("rule", "copy"):                 # 1 (and 0) where the pooled effect is defined, else NaN with a reason
        defined = ds[f"{kind}_effect_undefined"].values == ""
        e = ds[f"{kind}_effect"]
        assert np.all(e.sel(site="*").values[defined[..., 0]] == 1) and np.isnan(e.values[~defined]).all()
        assert np.all(e.sel(site="none").values[defined[..., 0]] == 0)
    assert (ds.rule_effect_undefined.values == "").any()
    att = ds.attn_same_group.values
    assert att.shape == (2, 1, 4, 4) and np.all((att >= 0) & (att <= 1))
    again = sp.circuits(series, steps=[500, 36000], **kw)                 # read back from the store
    np.testing.assert_array_equal(again.rule_effect.values, ds.rule_effect.values)


def test_cli_prints_top_sites(series, tmp_path):
    res = CliRunner().invoke(cli, ["circuits", "--steps", "36000", "--sigmas", "0.3", "--n-pairs", "4",
                                   "--sites", "block", "--out", str(tmp_path / "c.zarr"),
                                   "--plot", str(tmp_path / "c.png")])
    assert res.exit_code == 0, res.output
    assert "rule" in res.output and "blocks." in res.output and (tmp_path / "c.png").exists()


def test_cli_bad_site_is_one_line_before_work(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["circuits", "--steps", "36000", "--sites", "blocks.0.nope", "--out", str(tmp_path / "d.zarr")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "unknown patching site" in err[0]
    assert not (tmp_path / "d.zarr").exists()


def test_cli_bad_values_are_one_line(tmp_path, capsys):
    for argv in (["--sigmas", "0"], ["--sigmas", "1e308"], ["--sigmas", "abc"], ["--n-pairs", "0"],
                 ["--steps", "12345"]):
        with pytest.raises(SystemExit) as e:
            main(["circuits", *argv, "--out", str(tmp_path / "e.zarr")])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and err[0].startswith("error: ") and len(err) <= 2, (argv, err)
        assert not (tmp_path / "e.zarr").exists()
