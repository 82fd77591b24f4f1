"""python analyses/circuits --smoke (issue #37): the study end to end at toy size, and --from-results."""
import pytest
import json
from pathlib import Path

from tests.test_analyses import _analysis


def _study():
    return _analysis("circuits")


@pytest.mark.slow   # the circuits study's smoke run end to end
def test_circuits_smoke_and_from_results(tmp_path, capsys):
    circuits = _study()
    assert circuits.main(["--plan"]) == 0 and "sp.circuits on models" in capsys.readouterr().out
    circuits.main(["--smoke", "--out", str(tmp_path)])
    res = json.loads((tmp_path / "circuits_smoke.json").read_text())
    assert res["steps"] == [500, 2876, 36000] and list(res["models"]) == ["s0"]
    assert res["taus"]["s0"]["tau_rule"] < res["taus"]["s0"]["tau_mem"]
    for kind in ("rule", "copy"):                                   # every effect per σ, none averaged over σ
        cells = res["cells"][kind]
        assert len(cells) == len(res["sigmas"]) * len(res["sites"])
        assert {c["sigma"] for c in cells} == set(res["sigmas"])
        assert all((c["mean"] is None) == bool(c["undefined"]) for c in cells)
    for r in res["ode_across"]:                                      # outcome shares over the apart pairs sum to 1
        total = sum(r[k]["per_model"][0] or 0 for k in ("to_clean", "to_corrupt", "to_third"))
        assert r["n_apart"][0] == 0 or abs(total - 1) < 1e-9
    assert {r["site"] for r in res["ode_across"]} >= {"*"}
    assert (tmp_path / "circuits_smoke.png").stat().st_size > 0
    md = (tmp_path / "circuits_smoke.md").read_text()
    (tmp_path / "circuits_smoke.md").unlink()
    circuits.main(["--smoke", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "circuits_smoke.md").read_text() == md


@pytest.mark.slow   # trains a GPT series and patches every step
def test_gpt_series_smoke_patches_with_the_logit_metric(tmp_path):
    """--series gpt: trains a toy GPT under <out>/gpt_runs, clocks it, patches every checkpoint with logit_diff;
    the contrast of the json is the logit difference sp.patch measures, and --from-results rewrites the md."""
    import numpy as np

    import scoreprobe as sp
    circuits = _study()
    circuits.main(["--series", "gpt", "--smoke", "--out", str(tmp_path)])
    res = json.loads((tmp_path / "circuits_gpt_smoke.json").read_text())
    assert res["series"] == "gpt" and list(res["models"]) == ["gpt-s0"] and res["preset"]["n_pairs"] == 4
    m = res["per_model"]["gpt-s0"]
    series = sp.load_series(tmp_path / "gpt_runs" / "s0")
    assert m["steps"] == [int(s) for s in series.steps]
    from scoreprobe.probes.circuits import gpt_rule_pairs
    clean, corrupt, positions = gpt_rule_pairs(series.dataset, series.rule, 4, 0)
    ds = sp.patch(series.sampler(m["steps"][-1]), clean, corrupt, None, sites=["*"], metric="logit_diff",
                  positions=positions)
    np.testing.assert_allclose(m["rule"]["contrast_mean"][-1], float((ds.metric_clean - ds.metric_corrupt).mean()),
                               rtol=1e-9)
    assert all(len(row) == len(m["sites"]) for row in m["copy"]["effect"])
    md = (tmp_path / "circuits_gpt_smoke.md").read_text()
    assert "logit difference" in md and "rule pairs" in md
    (tmp_path / "circuits_gpt_smoke.md").unlink()
    circuits.main(["--series", "gpt", "--smoke", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "circuits_gpt_smoke.md").read_text() == md


def test_gpt_md_ranks_each_shown_cell_among_its_readings_defined_sites():
    """circuits_gpt.md from the shipped json: every shown cell carries its rank by mean effect among the reading's
    defined sites, recomputed here from the json's cells (a Holm p is read beside the effect's size)."""
    from analyses.circuits import circuits_gpt_md
    res = json.loads((Path(__file__).resolve().parents[1] / "analyses" / "results" / "circuits_gpt.json").read_text())
    md = circuits_gpt_md.markdown(res, "x")
    for kind in ("rule", "copy"):
        for read in res["read_steps"]:
            defined = sorted((c for c in res["across"][kind]["cells"] if c["read"] == read and c["mean"] is not None),
                             key=lambda c: -c["mean"])
            for rank, c in enumerate(defined[:3], 1):
                assert f"| {rank} of {len(defined)} | `{c['site']}` |" in md
