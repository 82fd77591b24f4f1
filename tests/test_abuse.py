"""Reliability under abuse (issue #12): a corpus of bad inputs built at test time (tests/abuse_corpus.py).

Every case starts from a copy of one tiny, valid run directory and breaks one thing (a field of
run.json, the dataset, a checkpoint file, resume.pt, an option value). For each the API must raise
the typed error, the CLI must print one `error:` line and exit 2 without a traceback, a pickle
whose __reduce__ would create a marker file must never run, and a store next to the run must be
left as it was. NaN weights are the one case where running is right: they must warn with a count.
"""
import argparse
import shutil
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
import torch

import abuse_attempt
import abuse_inputs
import abuse_report
from abuse_corpus import CFG, CKPT, DATA_CASES, RESUME_CASES, RUN_CASES, STEP, STEP_CASES
from scoreprobe.loading.series import load_checkpoint, load_series
from scoreprobe.cli import main
from scoreprobe.errors import CheckpointError, ConfigError, DataError, NonFiniteWarning
from scoreprobe.data.rules import rule_from_spec
from scoreprobe.training.train import TrainConfig, train_run


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("abuse") / "good"
    train_run(TrainConfig(**CFG), path, progress=False)
    return path


# ---------------------------------------------------------------------------------------------
# Running the corpus
# ---------------------------------------------------------------------------------------------

def _tree(path):
    """{relative path: (bytes, mtime)} of every file under path."""
    return {str(p.relative_to(path)): (p.read_bytes(), p.stat().st_mtime_ns) for p in path.rglob("*") if p.is_file()}


@pytest.fixture
def sandbox(good_run, tmp_path):
    """(a copy of the good run, an existing store next to it, that store's contents)."""
    d = tmp_path / "run"
    shutil.copytree(good_run, d)
    store = tmp_path / "existing.zarr"
    store.mkdir()
    (store / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    return d, store, _tree(store)


def _cli(argv, capsys):
    """(exit code, stderr) of the CLI run in-process."""
    capsys.readouterr()
    try:
        main(["-q", *map(str, argv)])
        code = 0
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


def _assert_one_error(code, err):
    """Exit 2, one `error:` line (warnings aside; a usage error may add click's `try '... --help'` hint)."""
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("try 'scoreprobe")]
    assert code == 2, err
    assert "Traceback" not in err and "rerun as" not in err, err   # 'rerun as': info's untyped catch-all
    assert [ln for ln in lines if ln.startswith("error:")] == [ln for ln in lines if not ln.startswith("warning:")]
    assert len([ln for ln in lines if ln.startswith("error:")]) == 1, err


def _api(fn, error):
    t0 = time.process_time()   # CPU time: the work done before the refusal, whatever the machine's load
    with pytest.raises(error):
        fn()
    assert time.process_time() - t0 < 2.0, "a bad input must fail fast"


def _clocks_argv(d):
    return ["clocks", d, "--steps", STEP, "--n-samples", 2, "--n-steps", 1, "--out", d.parent / "c.zarr",
            "--plot", d.parent / "c.png", "--device", "cpu"]


def _run_case(breaker, sandbox, capsys, api, error, argv):
    d, store, before = sandbox
    breaker(d)
    _api(lambda: api(d), error)
    if argv is not None:
        _assert_one_error(*_cli(argv(d), capsys))
    assert not (d.parent / "MARKER").exists(), "a hostile pickle ran"
    assert _tree(store) == before


@pytest.mark.parametrize("name,breaker", DATA_CASES, ids=[c[0] for c in DATA_CASES])
def test_bad_dataset(name, breaker, sandbox, capsys):
    rule = rule_from_spec(CFG["rule"])
    from scoreprobe.data.datasets import load_dataset
    _run_case(breaker, sandbox, capsys, lambda d: load_dataset(d / "dataset.npz", rule), DataError,
              lambda d: ["info", d])
    with pytest.raises(CheckpointError):
        load_series(sandbox[0])


@pytest.mark.parametrize("name,breaker", RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_bad_run_directory(name, breaker, sandbox, capsys):
    _run_case(breaker, sandbox, capsys, lambda d: load_series(d).describe(), CheckpointError,
              lambda d: ["info", d])


@pytest.mark.parametrize("name,breaker", STEP_CASES, ids=[c[0] for c in STEP_CASES])
def test_bad_checkpoint(name, breaker, sandbox, capsys):
    _run_case(breaker, sandbox, capsys, lambda d: load_series(d).denoiser(STEP), CheckpointError, _clocks_argv)


@pytest.mark.parametrize("name,breaker", RESUME_CASES, ids=[c[0] for c in RESUME_CASES])
def test_bad_resume_state(name, breaker, sandbox, capsys):
    _run_case(breaker, sandbox, capsys, lambda d: train_run(TrainConfig(**CFG), d, progress=False),
              CheckpointError, None)


# ---------------------------------------------------------------------------------------------
# Option values: (name, API call on the good series, CLI arguments)
# ---------------------------------------------------------------------------------------------

def _plane(spec):
    from scoreprobe.slices import plane_from_spec
    return (lambda d: (lambda s: plane_from_spec(spec, s.dataset, s.rule))(load_series(d)),
            lambda d, out: ["basins", d, "--plane", spec, "--steps", STEP, "--out", out, "--no-animate",
                            "--device", "cpu"])


def _grid(command):
    from scoreprobe.slices import auto_plane

    def api(d):
        s = load_series(d)
        auto_plane(s.dataset, s.rule).grid(100000)
    extra = ["--no-animate"] if command == "basins" else ["--plot", "f.png"]
    return api, lambda d, out: [command, d, "--res", 100000, "--steps", STEP, "--out", out, *extra, "--device", "cpu"]


def _override(name, value, text):
    return (lambda d: load_checkpoint(d / CKPT, **{name: value}),
            lambda d, out: ["info", d / CKPT, "--set", f"{name}={text}"])


OPTION_CASES = [
    ("plane_train_twice", *_plane("train:0,heldout:0,violating:1,train:5")),
    ("plane_huge_index", *_plane("train:0,heldout:0,violating:99999999999999999999999")),
    ("plane_garbage", *_plane("train:x,heldout:0,violating:1")),
    ("plane_incomplete", *_plane("train:0,heldout:0")),
    ("basins_res_100000", *_grid("basins")), ("field_res_100000", *_grid("field")),
    ("set_sigma_data_negative", *_override("sigma_data", -1.0, "-1.0")),
    ("set_num_heads_0", *_override("num_heads", 0, "0")),
    ("set_image_shape_0", *_override("image_shape", [1, 0, 4], "1,0,4")),
    ("set_time_scale_0", *_override("time_scale", 0.0, "0.0")),
]


@pytest.mark.parametrize("name,api,argv", OPTION_CASES, ids=[c[0] for c in OPTION_CASES])
def test_bad_option_value(name, api, argv, sandbox, capsys, monkeypatch):
    d, store, before = sandbox
    monkeypatch.chdir(d.parent)
    _api(lambda: api(d), ConfigError)
    _assert_one_error(*_cli(argv(d, store), capsys))
    assert _tree(store) == before, "an existing store was touched"


def test_corpus_size():
    n = len(DATA_CASES) + len(RUN_CASES) + len(STEP_CASES) + len(RESUME_CASES) + len(OPTION_CASES)
    assert n >= 60, n
    assert len(INPUT_CASES) >= 80 and {item for _, item, _ in INPUT_CASES} == set(abuse_inputs.ITEMS)
    assert len(REPORT_CASES) >= 90 and {s for _, s, _ in REPORT_CASES} == set(abuse_report.SURFACES)


# ---------------------------------------------------------------------------------------------
# Issue 21: trust, sizes before allocation, settings from any source, SOURCES, numbers, silent
# acceptances (tests/abuse_inputs.py; `python tests/abuse_corpus.py` prints the counts)
# ---------------------------------------------------------------------------------------------

INPUT_CASES = abuse_inputs.cases()


@pytest.mark.parametrize("name,item,build", INPUT_CASES, ids=[c[0] for c in INPUT_CASES])
def test_hardened_input(name, item, build, sandbox):
    """Each attempt: the typed error for the stated reason within 2 s, one CLI line, no code run, no
    allocation beyond the limits (peak RSS), the existing store untouched."""
    d, store, before = sandbox
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome, detail = abuse_attempt.run_attempt(build, d, d.parent)
    assert outcome == "clean", detail
    assert _tree(store) == before


# ---------------------------------------------------------------------------------------------
# Issue 33: the report page and plot-log (tests/abuse_report.py)
# ---------------------------------------------------------------------------------------------

REPORT_CASES = abuse_report.cases()


@pytest.mark.parametrize("name,surface,build", REPORT_CASES, ids=[c[0] for c in REPORT_CASES])
def test_report_and_plot_log_abuse(name, surface, build, sandbox):
    """Each attempt: refused in one line before any section is computed, or the page / figure made
    with no markup from the data in it (and the documented warning with its count)."""
    d, store, before = sandbox
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome, detail = abuse_report.run_report_attempt(build, d, d.parent)
    assert outcome == "clean", detail
    assert _tree(store) == before


# ---------------------------------------------------------------------------------------------
# NaN weights and NaN denoisers: running is right, silence is not
# ---------------------------------------------------------------------------------------------

def test_nan_weights_run_with_counted_warnings(sandbox, capsys, monkeypatch):
    from abuse_corpus import _weights
    from scoreprobe.ode import sample
    d, store, before = sandbox
    _weights(lambda v: torch.full_like(v, float("nan")))(d)
    with pytest.warns(NonFiniteWarning, match=r"[1-9]\d* of \d+ weight values"):
        D = load_series(d).denoiser(STEP)
    with pytest.warns(NonFiniteWarning, match="3 of 3 PF-ODE endpoints"):
        assert torch.isnan(sample(D, 3, 0, n_steps=1)).all()
    monkeypatch.chdir(d.parent)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, err = _cli(["clocks", d, "--steps", STEP, "--n-samples", 2, "--n-steps", 1, "--out", "c.zarr",
                          "--plot", "c.png", "--device", "cpu"], capsys)
    assert code in (0, None) and "Traceback" not in err
    assert any(issubclass(w.category, NonFiniteWarning) and "weight values" in str(w.message) for w in caught)
    assert any(issubclass(w.category, NonFiniteWarning) and "2 of 2" in str(w.message) for w in caught)


def _nan_plane_setup():
    from scoreprobe.data.datasets import make_dataset, to_signed
    from scoreprobe.slices import Plane
    rule = rule_from_spec(CFG["rule"])
    ds = make_dataset(rule, 4, 4, seed=0)
    plane = Plane.through(*to_signed(np.concatenate([ds.train[:2], ds.heldout[:1]])))
    D = lambda x, sigma: torch.where(x[:, :1] > 0, float("nan"), 0.0) * x   # noqa: E731  NaN on half the rows
    return ds, rule, plane, D


def test_score_field_counts_nonfinite_outputs():
    from scoreprobe.probes.field import score_field
    ds, rule, plane, D = _nan_plane_setup()
    with pytest.warns(NonFiniteWarning, match=r"[1-9]\d* of 32 denoiser outputs on the plane grid"):
        out = score_field(D, plane, [0.5, 1.0], res=4)
    assert np.isnan(out["score_u"].values).any() and np.isfinite(out["score_u"].values).any()


def test_retention_counts_nonfinite_endpoints_once():
    from scoreprobe.probes.retention import retention
    ds, rule, plane, D = _nan_plane_setup()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        retention(D, sigmas=[0.5, 1.0], n_noise=2, n_train=2, n_heldout=2, dataset=ds, rule=rule, n_steps=1)
    nonfinite = [str(w.message) for w in caught if issubclass(w.category, NonFiniteWarning)]
    assert len(nonfinite) == 1 and " of 16 retention restarts" in nonfinite[0], nonfinite


def test_basins_count_nonfinite_endpoints_once():
    from scoreprobe.probes.basins import basins
    ds, rule, plane, D = _nan_plane_setup()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = basins(D, plane, sigma_start=[0.5, 1.0, 2.0], res=4, n_steps=2, dataset=ds, rule=rule)
    nonfinite = [str(w.message) for w in caught if issubclass(w.category, NonFiniteWarning)]
    n_invalid = int((out.endpoint_state == 0).sum())   # code 0: invalid
    assert len(nonfinite) == 1 and f"{n_invalid} of 48 PF-ODE endpoints" in nonfinite[0], nonfinite
    assert 0 < n_invalid < 48


@pytest.mark.parametrize("name", ["rule_parity_dos", "json_nested_10000"])
def test_cli_subprocess_one_line(name, sandbox):
    cases = dict(RUN_CASES)
    d = sandbox[0]
    cases[name](d)
    r = subprocess.run([sys.executable, "-m", "scoreprobe", "info", str(d)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("error:"), r.stderr


# ---------------------------------------------------------------------------------------------
# What the corpus cannot say by a refusal alone
# ---------------------------------------------------------------------------------------------

def test_info_keeps_the_trust_warning_when_reading_then_fails(sandbox, capsys):
    """--trust runs the pickle's code (that is what it is for); the warning that it did must survive the error."""
    d = sandbox[0]
    evil = abuse_inputs._evil(d)
    code, err = _cli(["info", "--trust", evil], capsys)
    _assert_one_error(code, err)
    assert (d.parent / "MARKER").exists()     # the code ran, as --trust allows...
    assert "warning: TrustWarning:" in err and "trust=True" in err   # ...and the user is told so


def test_expanded_views_load_with_the_explicit_override(sandbox, monkeypatch):
    """A file whose weights are all zero-stride views is refused by default; SCOREPROBE_MAX_EXPANSION lets it in."""
    from scoreprobe.errors import ConfigError
    from scoreprobe.limits import EXPANSION_ENV
    d = sandbox[0]
    sd = {k: torch.zeros(()).expand(v.shape) for k, v in abuse_inputs._fb_sd().items()}
    path = abuse_inputs._foreign(d, {"ema": sd, "args": argparse.Namespace(**abuse_inputs.UPSTREAM_ARGS)})
    for v in sd.values():   # torch.save keeps the views: one element of storage each
        assert v.stride() == (0,) * v.dim()
    big = {**sd, "blocks.0.mlp.fc1.weight": torch.zeros(()).expand(48 * 20000, 12)}   # ~46 MB from bytes
    big_path = abuse_inputs._foreign(d, {"ema": big, "args": argparse.Namespace(**abuse_inputs.UPSTREAM_ARGS)},
                                     name="big.pt")
    with pytest.raises(CheckpointError, match="zero-stride"):
        load_checkpoint(big_path)
    monkeypatch.setenv(EXPANSION_ENV, "1e9")
    with pytest.raises(CheckpointError, match="mlp_ratio"):   # past the size check: its shapes make no DiT
        load_checkpoint(big_path)
    D = load_checkpoint(path)
    assert D.parameterization == "ddpm_eps"
    monkeypatch.setenv(EXPANSION_ENV, "zero")
    with pytest.raises(ConfigError, match=EXPANSION_ENV):
        load_checkpoint(path)


def test_facebook_dit_args_with_a_custom_model_name(sandbox, capsys):
    """Upstream's twelve train.py options with a model outside DiT_models' presets: ddpm_eps from train.py,
    the preset named as a guess (warning, info row); options that do not match are named in the error."""
    from scoreprobe.errors import ScoreprobeWarning
    from scoreprobe.models.param import VPDenoiser
    d = sandbox[0]
    args = argparse.Namespace(**{**abuse_inputs.UPSTREAM_ARGS, "model": "DiT-Tiny/2"})
    path = abuse_inputs._foreign(d, {"model": abuse_inputs._fb_sd(), "ema": abuse_inputs._fb_sd(), "opt": {},
                                     "args": args})
    with pytest.warns(ScoreprobeWarning, match="DiT-Tiny/2.*guessed"):
        D = load_checkpoint(path, num_heads=6)
    assert isinstance(D, VPDenoiser) and D.parameterization == "ddpm_eps" and D.schedule.num_timesteps == 1000
    with pytest.raises(CheckpointError, match="num_heads"):   # an unknown preset states no head count
        load_checkpoint(path)
    capsys.readouterr()
    main(["info", str(path), "--set", "num_heads=6"])
    out = capsys.readouterr().out
    assert "guessed: a custom DiT_models entry" in out and "ddpm_eps" in out
    assert any(ln.startswith("warning:") and "DiT-Tiny/2" in ln for ln in out.splitlines()), out
    forked = argparse.Namespace(**{**abuse_inputs.UPSTREAM_ARGS, "model": "MyDiT", "path_type": "Linear"})
    torch.save({"ema": abuse_inputs._fb_sd(), "args": forked}, path)
    with pytest.raises(CheckpointError, match=r"model 'MyDiT' is not a DiT preset and options path_type"):
        load_checkpoint(path, num_heads=6)
