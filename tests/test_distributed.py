"""Scale-out on dask.distributed (issue "Performance and scale", part 5): one task per checkpoint on
a LocalCluster of 2 worker processes, the caller writing the store; the store equals the local
run's, resumes, and typed errors and warnings raised on a worker reach the caller as they are.

Worker processes (not threads): the probes are mostly Python and hold the GIL, and recording a
task's warnings needs one task per process; on 2 cores the cluster starts in about 5 s, and each
worker's first task pays its torch import (about 8 s), so one cluster serves the whole module. The tests on a
cluster run under -m slow; the configuration errors, which start none, stay in the default suite."""
import functools
import shutil
import sys
import threading

import numpy as np
import pytest
import torch
import xarray as xr

from scoreprobe import store
from scoreprobe.loading.series import load_series
from scoreprobe.cli import main
from scoreprobe.sweep.dask import using
from scoreprobe.errors import CheckpointError, ConfigError, NonFiniteWarning
from scoreprobe.probes.basins import basins
from scoreprobe.probes.retention import retention
from scoreprobe.stats.clocks import clocks
from scoreprobe.probes.dsm import dsm_by_sigma
from scoreprobe.probes.field import score_field
from scoreprobe.slices import auto_plane
from scoreprobe.sweep import run_probe, sweep


@pytest.fixture(scope="module")
def series():
    return load_series()


@pytest.fixture(scope="module")
def steps(series):
    return [series.steps[0], series.steps[10], series.steps[-1]]


@pytest.fixture(scope="module")
def plane(series):
    return auto_plane(series.dataset, series.rule, seed=0)


@pytest.fixture(scope="module")
def client():
    pytest.importorskip("distributed")
    from scoreprobe.sweep.dask import client_for
    with client_for(("local", 2)) as c:
        yield c


def _stored(path):
    ds = xr.open_zarr(path, zarr_format=3, consolidated=False).load()
    ds.attrs.pop("history")
    return ds


def _field(series, plane, steps, out, **kw):
    return score_field(series, plane, [1.0], res=4, steps=steps, out=out, progress=False, **kw)


@pytest.mark.slow   # on a dask LocalCluster of 2 worker processes (each imports torch)
def test_score_field_store_equals_the_local_run(series, plane, steps, client, tmp_path):
    local = _field(series, plane, steps, tmp_path / "local.zarr")
    with using(client):
        remote = _field(series, plane, steps, tmp_path / "dask.zarr")
        in_memory = _field(series, plane, steps, None)
    assert store.written_steps(tmp_path / "dask.zarr") == steps
    xr.testing.assert_identical(_stored(tmp_path / "local.zarr"), _stored(tmp_path / "dask.zarr"))
    for ds in (remote, local):
        ds.attrs.pop("history")
    xr.testing.assert_identical(remote, local)
    xr.testing.assert_identical(in_memory, _field(series, plane, steps, None))


@pytest.mark.slow   # on a dask LocalCluster of 2 worker processes (each imports torch)
def test_clocks_store_equals_the_local_run(series, steps, client, tmp_path):
    kw = dict(n_samples=8, n_steps=2, steps=steps, n_boot=20, progress=False)
    clocks(series, out=tmp_path / "local.zarr", **kw)
    with using(client):
        clocks(series, out=tmp_path / "dask.zarr", **kw)
    xr.testing.assert_identical(_stored(tmp_path / "local.zarr"), _stored(tmp_path / "dask.zarr"))
    models = [_stored(tmp_path / n).attrs["scoreprobe_record"]["models"] for n in ("local.zarr", "dask.zarr")]
    assert models[0] == models[1] and len({m["weights"] for m in models[0]}) == len(steps)   # identified on the worker


PROBES = {
    "basins": lambda s, plane, steps: basins(s, plane, sigma_start=1.0, res=3, n_steps=2, steps=steps, progress=False),
    "dsm_by_sigma": lambda s, plane, steps: dsm_by_sigma(s, sigmas=3, n_noise=1, n_train=8, n_heldout=8, steps=steps,
                                                         progress=False),
    "retention": lambda s, plane, steps: retention(s, sigmas=(1.0,), n_noise=1, n_train=2, n_heldout=2, n_steps=2,
                                                   steps=steps, progress=False),
}


@pytest.mark.slow   # on a dask LocalCluster of 2 worker processes (each imports torch)
@pytest.mark.parametrize("name", sorted(PROBES))
def test_every_probe_reaches_the_cluster_through_using(name, series, plane, steps, client):
    from distributed import get_task_stream
    local = PROBES[name](series, plane, steps[1:])
    with get_task_stream(client) as ts, using(client):
        remote = PROBES[name](series, plane, steps[1:])
    assert len(ts.data) == 2
    xr.testing.assert_identical(remote, local)


@pytest.mark.slow   # on a dask LocalCluster of 2 worker processes (each imports torch)
def test_run_probe_passes_scheduler_on(series, plane, steps, client):
    from distributed import get_task_stream
    probe = functools.partial(score_field, plane=plane, sigmas=[1.0], res=2)
    local = run_probe(probe, series, {"probe": "f"}, steps=steps[:1], progress=False)
    with get_task_stream(client) as ts:
        remote = run_probe(probe, series, {"probe": "f"}, steps=steps[:1], progress=False, scheduler=client)
    assert len(ts.data) == 1
    xr.testing.assert_identical(remote, local)


@pytest.mark.slow   # on a dask LocalCluster of 2 worker processes (each imports torch)
def test_resume_computes_only_the_missing_steps(series, plane, steps, client, tmp_path):
    from distributed import get_task_stream
    _field(series, plane, steps, tmp_path / "local.zarr")
    _field(series, plane, steps[:1], tmp_path / "dask.zarr")           # an earlier, partial run
    with get_task_stream(client) as ts, using(client):
        _field(series, plane, steps, tmp_path / "dask.zarr")
    computed = sorted(int(str(t["key"]).rpartition("step")[2]) for t in ts.data)
    assert computed == steps[1:]
    assert store.written_steps(tmp_path / "dask.zarr") == steps
    xr.testing.assert_identical(_stored(tmp_path / "local.zarr"), _stored(tmp_path / "dask.zarr"))


def _copy_series(series, steps, dest):
    """A run directory holding `steps` of `series` (run.json, dataset, their checkpoint files)."""
    (dest / "ckpt").mkdir(parents=True)
    for name in ("run.json", "dataset.npz"):
        shutil.copy(series.path / name, dest / name)
    for s in steps:
        shutil.copy(series.checkpoint_path(s), dest / "ckpt" / series.checkpoint_path(s).name)
    return load_series(dest)


@pytest.mark.slow   # on a dask LocalCluster of 2 worker processes (each imports torch)
def test_a_typed_error_on_a_worker_reaches_the_caller_and_a_rerun_resumes(series, plane, steps, client, tmp_path):
    copy = _copy_series(series, steps, tmp_path / "run")
    broken = copy.checkpoint_path(steps[1])
    good = broken.read_bytes()
    broken.write_bytes(good[: len(good) // 3])                            # truncated on the shared disk
    out = tmp_path / "f.zarr"
    with pytest.raises(CheckpointError, match=broken.name), using(client):
        _field(copy, plane, steps, out)
    assert store.written_steps(out) == steps[:1]                          # the step before it is kept
    broken.write_bytes(good)
    with using(client):
        _field(copy, plane, steps, out)
    assert store.written_steps(out) == steps


class NanDenoiser(torch.nn.Module):
    """A denoiser whose outputs are NaN: the field probe warns (NonFiniteWarning) on the worker."""

    def forward(self, x, sigma):
        return torch.full_like(x, float("nan"))


@pytest.mark.slow   # on a dask LocalCluster of 2 worker processes (each imports torch)
def test_worker_warnings_reach_the_caller(plane, client, tmp_path):
    import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])   # workers cannot import this test module
    try:
        with pytest.warns(NonFiniteWarning, match="non-finite"):
            ds = sweep(lambda D: score_field(D, plane, [1.0], res=2), {5: NanDenoiser()}, out=tmp_path / "n.zarr",
                       config={"probe": "nan"}, progress=False, scheduler=client)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert np.isnan(ds.score_u.values).all()


@pytest.mark.slow   # on a dask LocalCluster of 2 worker processes (each imports torch)
def test_an_unpicklable_probe_is_refused_before_the_store_is_opened(series, steps, client, tmp_path):
    lock = threading.Lock()

    def probe(D):
        with lock:
            return xr.Dataset()

    with pytest.raises(ConfigError, match="cannot be sent to dask workers"):
        sweep(probe, series, steps=steps, out=tmp_path / "x.zarr", progress=False, scheduler=client)
    assert not (tmp_path / "x.zarr").exists()


@pytest.mark.parametrize("bad", ["not an address", ("local", 0), ("local", 1.5), ("remote", 2), 3])
def test_bad_scheduler_values_are_config_errors(bad):
    pytest.importorskip("distributed")
    from scoreprobe.sweep.dask import check_scheduler
    with pytest.raises(ConfigError, match="scheduler|worker"):
        check_scheduler(bad)


def test_without_dask_a_scheduler_says_how_to_install_it(series, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)                 # import distributed -> ImportError
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[dask\]'"):
        sweep(lambda D: xr.Dataset(), series, out=tmp_path / "x.zarr", scheduler=("local", 2))
    assert not (tmp_path / "x.zarr").exists()


@pytest.mark.slow   # on a dask LocalCluster of 2 worker processes (each imports torch)
def test_cli_dask_local_writes_the_local_runs_store(series, steps, tmp_path, monkeypatch, capsys):
    pytest.importorskip("distributed")
    monkeypatch.chdir(tmp_path)
    args = ["field", "--res", "4", "--sigma", "1", "--steps", ",".join(map(str, steps)), "--no-oracles", "--plot", ""]
    assert main([*args, "--out", "local.zarr"]) in (None, 0)
    assert main([*args, "--out", "dask.zarr", "--dask-local", "2"]) in (None, 0)
    assert "wrote dask.zarr (3 steps)" in capsys.readouterr().out
    xr.testing.assert_identical(_stored(tmp_path / "local.zarr"), _stored(tmp_path / "dask.zarr"))


@pytest.mark.slow   # on a dask LocalCluster of 2 worker processes (each imports torch)
def test_cli_scheduler_address(series, steps, client, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["clocks", "--n-samples", "8", "--n-steps", "2", "--steps", ",".join(map(str, steps))]
    assert main([*args, "--out", "local.zarr"]) in (None, 0)
    assert main([*args, "--out", "dask.zarr", "--scheduler", client.scheduler.address]) in (None, 0)
    xr.testing.assert_identical(_stored(tmp_path / "local.zarr"), _stored(tmp_path / "dask.zarr"))


@pytest.mark.parametrize("bad", [["--scheduler", "tcp://127.0.0.1:1", "--dask-local", "2"],
                                 ["--scheduler", "no address"], ["--dask-local", "0"]])
@pytest.mark.parametrize("command", ["clocks", "dsm", "basins", "field"])
def test_cli_bad_scheduler_options_are_one_line(command, bad, tmp_path, monkeypatch, capsys):
    pytest.importorskip("distributed")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main([command, *bad])
    lines = capsys.readouterr().err.splitlines()
    assert e.value.code == 2 and lines[0].startswith("error: ") and lines[1:] == [f"try 'scoreprobe {command} --help'"]
    assert list(tmp_path.iterdir()) == []
