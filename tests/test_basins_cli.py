"""The `basins` and `field` subcommands: tables, stores, reruns, animations, check_convergence and
bad options, on a stand-in series whose checkpoints are the two oracles (and on the shipped series).
The probes themselves: tests/test_basins.py."""
import warnings

from PIL import Image
import pytest

from scoreprobe.errors import ScoreprobeWarning
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from tests.test_basins import setup  # noqa: F401 (the module fixture: a small parity rule, dataset and plane)


class _OracleSeries:
    """A stand-in CheckpointSeries whose 'checkpoints' are the two oracles."""
    kind = "dit"

    def __init__(self, path, rule, dataset):
        self.path, self.rule, self.dataset = str(path), rule, dataset
        self.models = {0: RuleDenoiser(rule), 100: EmpiricalDenoiser(dataset.train)}
        self.steps = sorted(self.models)

    def denoiser(self, step, device="cpu", ema=True):
        return self.models[step]


def test_cli_basins_table_store_rerun_and_animate(setup, tmp_path, monkeypatch, capsys):
    from click.testing import CliRunner

    import scoreprobe.loading.series
    from scoreprobe.cli import cli, main
    from scoreprobe.store import open_store
    rule, ds, _ = setup
    monkeypatch.setattr(scoreprobe.loading.series, "load_series", lambda path=None: _OracleSeries(tmp_path, rule, ds))
    (tmp_path / "run.json").write_text("{}")   # a run directory for the CLI; the patched loader never reads it
    monkeypatch.chdir(tmp_path)
    args = ["basins", str(tmp_path), "--res", "6", "--n-steps", "8", "--steps", "all", "--sigma-start", "0.5,1"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    rows = {int(ln.split()[0]): [float(t) for t in ln.split()[1:]] for ln in r.output.splitlines()
            if ln.strip() and ln.split()[0].isdigit()}
    assert rows[100][0] == 1.0                   # memorizer: the whole plane flows to training items
    assert rows[0][3] == 0.0                     # rule oracle: nothing ends rule-violating
    name = tmp_path.name                          # default outputs carry the run's name
    b = open_store(tmp_path / f"{name}.basins.zarr")
    assert b.step.values.tolist() == [0, 100] and b.sizes["sigma_start"] == 2
    with Image.open(tmp_path / f"{name}.basins.gif") as im:
        assert im.n_frames == 2
    r2 = CliRunner().invoke(cli, args)            # rerun: the store is reused, same table
    def table(out):   # the printed table, without the lines about files and time
        return [ln for ln in out.splitlines() if not any(w in ln for w in ("basins.zarr", "basins.gif", "done in"))]
    assert r2.exit_code == 0 and table(r2.stdout) == table(r.stdout)
    assert "all 2 steps were already written; reused them" in r2.stdout
    r = CliRunner().invoke(cli, ["animate", f"{name}.basins.zarr", "--out", "again.gif"])
    assert r.exit_code == 0 and (tmp_path / "again.gif").is_file()
    (tmp_path / f"{name}.basins.gif").unlink()
    r = CliRunner().invoke(cli, ["animate", f"{name}.basins.zarr"])   # default: the store's name with .gif
    assert r.exit_code == 0 and (tmp_path / f"{name}.basins.gif").is_file(), r.output
    with pytest.raises(SystemExit) as e:          # another grid on the same store: refused, exit 2
        main(["basins", str(tmp_path), "--res", "7"])
    assert e.value.code == 2 and "different analysis" in capsys.readouterr().err


def _table_rows(output):
    """{(sigma_start, step): [numbers]} from the basins table printed by the CLI."""
    rows, s0 = {}, None
    for ln in output.splitlines():
        if ln.startswith("sigma_start = "):
            s0 = float(ln.split("=")[1].split(":")[0])
        elif ln.strip() and ln.split()[0].isdigit():
            rows[s0, int(ln.split()[0])] = [float(t) for t in ln.split()[1:]]
    return rows


def test_cli_basins_check_convergence(setup, tmp_path, monkeypatch, capsys):
    from click.testing import CliRunner

    import scoreprobe.loading.series
    from scoreprobe.cli import cli, main
    from scoreprobe.store import open_store, stored_config
    rule, ds, _ = setup
    monkeypatch.setattr(scoreprobe.loading.series, "load_series", lambda path=None: _OracleSeries(tmp_path, rule, ds))
    (tmp_path / "run.json").write_text("{}")   # a run directory for the CLI; the patched loader never reads it
    monkeypatch.chdir(tmp_path)
    args = ["basins", str(tmp_path), "--res", "6", "--solver", "heun", "--n-steps", "1", "--steps", "all",
            "--sigma-start", "0.5,1", "--no-animate", "--out", "c.zarr"]
    with warnings.catch_warnings(record=True) as caught:             # 1 step: endpoints are D(x, sigma_start)
        warnings.simplefilter("always", ScoreprobeWarning)
        r = CliRunner().invoke(cli, [*args, "--check-convergence"])
    assert r.exit_code == 0, r.output
    # the CLI shows warnings as 'warning: <Category>: <message>' lines (or Python's default display)
    shown = [str(w.message) for w in caught if issubclass(w.category, ScoreprobeWarning)]
    shown += [ln for ln in r.output.splitlines() if ln.startswith("warning: ScoreprobeWarning:")]
    assert len(shown) == 1 and "not converged" in shown[0]
    assert "chg@2N" in r.output and "item@2N" in r.output and "(and 2 Heun steps to check convergence)" in r.output
    b = open_store(tmp_path / "c.zarr")
    assert stored_config(tmp_path / "c.zarr")["check_convergence"] is True
    rows = _table_rows(r.output)
    assert len(rows) == 4 and all(len(v) == 8 for v in rows.values())   # 5 states, 2 changes, off-vertex
    for (s0, step), v in rows.items():
        d = b.sel(step=step, sigma_start=s0)
        assert v[5] == pytest.approx(float(d.label_change_fraction), abs=5e-4)
        assert v[6] == pytest.approx(float(d.label_change_fraction_item), abs=5e-4)
        assert sum(v[:5]) == pytest.approx(1.0, abs=0.01)
        assert v[7] == pytest.approx(float(d.endpoint_off_vertex.mean()), abs=5e-4)
    assert max(v[5] for v in rows.values()) > 0.01
    plain = CliRunner().invoke(cli, [*args, "--out", "p.zarr"])   # without the flag: no extra columns
    assert plain.exit_code == 0 and "chg@2N" not in plain.output
    assert all(len(v) == 6 for v in _table_rows(plain.output).values())
    with pytest.raises(SystemExit) as e:                          # the plain store is another analysis
        main([*args, "--out", "p.zarr", "--check-convergence"])
    assert e.value.code == 2 and "different analysis" in capsys.readouterr().err


def test_cli_bad_options_fail_before_computing(setup, tmp_path, monkeypatch, capsys):
    import scoreprobe.loading.series
    from scoreprobe.cli import main
    rule, ds, _ = setup
    monkeypatch.setattr(scoreprobe.loading.series, "load_series", lambda path=None: _OracleSeries(tmp_path, rule, ds))
    (tmp_path / "run.json").write_text("{}")   # a run directory for the CLI; the patched loader never reads it
    monkeypatch.chdir(tmp_path)
    for args, message in ((["basins", "--animate", "b.txt"], "use a .gif or .mp4"),
                          (["field", "--plot", "f.doc"], "cannot write a figure to 'f.doc'"),
                          (["basins", "--steps", ",", "--no-animate"], "error: no steps selected"),
                          (["basins", "--solver", "heun", "--tol", "0.1"], "--tol applies to --solver adaptive only"),
                          (["field", "--steps", "most"], "expected all, auto or comma-separated steps")):
        with pytest.raises(SystemExit) as e:
            main([*args, str(tmp_path), "--res", "4"])
        err = capsys.readouterr().err
        assert e.value.code == 2 and message in err and "Traceback" not in err
        assert not list(tmp_path.glob("*.zarr"))  # refused before anything was computed or written


def test_cli_field(setup, tmp_path, monkeypatch):
    from click.testing import CliRunner

    import scoreprobe.loading.series
    from scoreprobe.cli import cli
    rule, ds, _ = setup
    monkeypatch.setattr(scoreprobe.loading.series, "load_series", lambda path=None: _OracleSeries(tmp_path, rule, ds))
    (tmp_path / "run.json").write_text("{}")   # a run directory for the CLI; the patched loader never reads it
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["field", str(tmp_path), "--res", "5", "--sigma", "0.5", "--steps", "100"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / f"{tmp_path.name}.field.png").is_file() and (tmp_path / f"{tmp_path.name}.field.zarr").is_dir()


@pytest.mark.slow   # 6-11 s: -m slow, for the default suite's 480-s budget
def test_two_runs_analysed_in_one_folder_do_not_collide(setup, tmp_path, monkeypatch):
    """Issue 34, item 6: the default outputs carry each source's name (they were basins.zarr / basins.gif /
    clocks.zarr for every run, and the second run was refused: 'holds a different analysis')."""
    from click.testing import CliRunner

    import scoreprobe.loading.series
    from scoreprobe.cli import cli
    from scoreprobe.store import stored_config
    rule, ds, _ = setup
    monkeypatch.setattr(scoreprobe.loading.series, "load_series", lambda path=None: _OracleSeries(path, rule, ds))
    monkeypatch.chdir(tmp_path)
    for run in ("run-a", "run-b"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "run.json").write_text("{}")   # run directories; the patched loader never reads them
        for args in (["basins", run, "--res", "4", "--n-steps", "2", "--steps", "all"],
                     ["clocks", run, "--n-samples", "8", "--n-steps", "2", "--steps", "all"]):
            r = CliRunner().invoke(cli, args)
            assert r.exit_code == 0, r.output
    for run in ("run-a", "run-b"):
        for name in ("basins.zarr", "clocks.zarr"):
            assert stored_config(tmp_path / f"{run}.{name}")["source"]["name"] == run
        assert (tmp_path / f"{run}.basins.gif").is_file()
    assert not (tmp_path / "basins.zarr").exists() and not (tmp_path / "clocks.zarr").exists()


def test_cli_basins_on_the_shipped_series(tmp_path, monkeypatch, capsys):
    from scoreprobe.loading.series import load_series
    from scoreprobe.cli import main
    from scoreprobe.errors import CheckpointError
    try:
        series = load_series()
    except CheckpointError as e:
        pytest.skip(f"no shipped series: {e}")
    monkeypatch.chdir(tmp_path)
    main(["basins", "--res", "6", "--n-steps", "4"])            # default: --steps auto
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.strip() and ln.split()[0].isdigit()]
    steps = [int(r[0]) for r in rows]
    assert set(steps) <= set(series.steps) and 2 <= len(steps) <= 8
    assert steps[0] == series.steps[0] and steps[-1] == series.steps[-1]
    for r in rows:   # the five states add up to 1; the last column is the off-vertex flag
        assert len(r) == 7 and sum(float(t) for t in r[1:6]) == pytest.approx(1.0, abs=0.01)
    with Image.open(tmp_path / "basins.gif") as im:
        assert im.n_frames == len(steps)


def test_cli_plane_of_two_training_items_and_a_heldout_one(setup, tmp_path, monkeypatch):
    """--plane train:0,train:1,heldout:2 (issue 34, item 7; it was refused: 'names train twice')."""
    from click.testing import CliRunner

    import scoreprobe.loading.series
    from scoreprobe.cli import cli
    from scoreprobe.store import stored_config
    rule, ds, _ = setup
    monkeypatch.setattr(scoreprobe.loading.series, "load_series", lambda path=None: _OracleSeries(path, rule, ds))
    (tmp_path / "run.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["basins", str(tmp_path), "--plane", "train:0,train:1,heldout:2", "--res", "4",
                                 "--n-steps", "2", "--steps", "100", "--out", "p.zarr", "--no-animate"])
    assert r.exit_code == 0, r.output
    assert "plane train:0, train:1, heldout:2" in r.output
    assert stored_config(tmp_path / "p.zarr")["plane"]["labels"] == ["train:0", "train:1", "heldout:2"]


@pytest.mark.slow
def test_cli_basins_refines_from_res_32_and_dense_integrates_every_point(setup, tmp_path, monkeypatch):
    """Issue 75: at --res 32 the command's map is refined (column 'integr.', the settings in the store's
    config) and ends where --dense does on both oracles; --dense writes a dense store. ≈ 8 s idle."""
    import json

    import numpy as np
    from click.testing import CliRunner

    import scoreprobe.loading.series
    from scoreprobe.cli import cli
    from scoreprobe.store import open_store
    rule, ds, _ = setup
    monkeypatch.setattr(scoreprobe.loading.series, "load_series", lambda path=None: _OracleSeries(tmp_path, rule, ds))
    (tmp_path / "run.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    base = ["basins", str(tmp_path), "--res", "32", "--steps", "all", "--no-animate"]
    out = {}
    for name, extra in (("refined", []), ("dense", ["--dense"]), ("cold", ["--no-warm-start"])):
        r = CliRunner().invoke(cli, base + ["--out", f"{name}.zarr"] + extra)
        assert r.exit_code == 0, r.output
        out[name] = (r.output, open_store(tmp_path / f"{name}.zarr"))
    (text_r, ref), (text_d, dense), (text_c, cold) = out["refined"], out["dense"], out["cold"]
    assert "warm start:" in text_r and "warm_seed_step" in ref and (ref.warm_seed_step.values[1:] >= 0).all()
    assert "warm start:" not in text_c and "warm_seed_step" not in cold and "endpoint_integrated" in cold
    assert "warm_start" not in json.loads(cold.attrs["scoreprobe_config"])["refine"]
    np.testing.assert_array_equal(cold.endpoint_state.values, dense.endpoint_state.values)
    assert "integr." in text_r and "audit bound" in text_r and "integr." not in text_d
    assert json.loads(ref.attrs["scoreprobe_config"])["refine"]["stride"] == 0
    assert "refine" not in json.loads(dense.attrs["scoreprobe_config"]) and "endpoint_integrated" not in dense
    assert (ref.integrated_fraction.values < 1).any()
    np.testing.assert_array_equal(ref.endpoint_state.values, dense.endpoint_state.values)
    np.testing.assert_array_equal(ref.endpoint_index.values, dense.endpoint_index.values)
