"""Issue 53 items 5 and 7 (tests/abuse_issue53.py): bounds checked before allocation in the API, and the remaining
tracebacks and silent acceptances; with LocalDenoiser at σ = 0 (item 1), whose exact limit is the answer."""
import functools
from pathlib import Path

import numpy as np
import torch

from abuse_issue53 import Attack
from scoreprobe.errors import ConfigError, DataError

GOOD = Path(__file__).resolve().parents[1] / "analyses" / "results" / "scaling_cpu" / "g2-n120.npz"


@functools.lru_cache(maxsize=None)
def _shipped():
    import scoreprobe as sp
    series = sp.load_series()
    return series, series.denoiser(series.steps[-1])


def _data():
    import scoreprobe as sp
    return sp.make_dataset(sp.Parity(G=2, shape=(4, 4), layout="contiguous"), n_train=8, n_heldout=8, seed=0)


def _compare(**kw):
    def api(work):
        import scoreprobe as sp
        return sp.compare([GOOD], **kw)
    return api


def _monitor(**kw):
    def api(work):
        import scoreprobe as sp
        return sp.Monitor(_data(), **kw)
    return api


def _local_sigma0(work):
    import scoreprobe as sp
    local = sp.LocalDenoiser(_data().train, patch=3)
    x = torch.randn(32, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return local(x, torch.zeros(32, dtype=torch.float64)), local(x, torch.full((32,), 1e-4, dtype=torch.float64))


def _limit_is_exact(work, result):
    at0, near0 = result
    assert torch.isfinite(at0).all(), "σ = 0 gave NaN"
    assert float((at0 - near0).abs().max()) < 1e-9, "σ = 0 is not the limit of small σ"


def _with_attrs(**attrs):
    def api(work):
        import scoreprobe as sp
        from scoreprobe.stats.compare import read_export
        return sp.summary(read_export(GOOD).assign_attrs(**attrs))
    return api


def _minimal_with(**attrs):
    """sp.taus of a minimal clocks Dataset (three steps, no sample dimension) whose attrs hold `attrs`."""
    def api(work):
        import xarray as xr
        import scoreprobe as sp
        ds = xr.Dataset({"rule_acc": ("step", np.array([0.1, 0.5, 0.95])),
                         "mem_ratio": ("step", np.array([0.0, 0.05, 0.2]))}, coords={"step": [0, 100, 1000]})
        return sp.taus(ds.assign_attrs(**attrs))
    return api


def _summary_of_store(work):
    import scoreprobe as sp
    series, _ = _shipped()
    sp.clocks(series, n_samples=8, n_steps=2, steps=[0, 36000], out=work / "c.zarr", progress=False)
    return sp.summary(str(work / "c.zarr"))


def _one_row(work, table):
    assert len(table) == 1 and "tau_rule" in table.columns, table


def _patch_confirm(work):
    import scoreprobe as sp
    _, D = _shipped()
    clean = np.zeros((2, 36), np.uint8)
    corrupt = clean.copy()
    corrupt[:, 0] = 1
    return sp.patch(D, clean, corrupt, 0.7, sites="block", method="atp", confirm=-3)


def _cache_too_big(work):
    import scoreprobe as sp
    _, D = _shipped()
    return sp.run_with_cache(D, torch.zeros(200_000, 36), 1.0)


def _gallery(work):
    import scoreprobe as sp
    from scoreprobe.viz.gallery import plot_gallery
    return plot_gallery(np.zeros((100_000, 16), np.uint8), sp.Parity(G=2, shape=(4, 4), layout="contiguous"))


def _patch_shape(value):
    def api(work):
        from abuse_corpus import CFG
        from scoreprobe.training.train import TrainConfig, train_run
        return train_run(TrainConfig(**{**CFG, "patch_size": 1, "patch_shape": value}), work / "run", progress=False)
    return api


ATTACKS = [
    Attack("compare_n_boot_1e8", 5, api=_compare(n_boot=10**8), error=ConfigError, match="n_boot"),
    Attack("compare_n_boot_negative", 5, api=_compare(n_boot=-5), argv=lambda w: ["compare", GOOD, "--n-boot", -5],
           error=ConfigError, match="n_boot|--n-boot"),
    Attack("monitor_n_boot_1e8", 5, api=_monitor(n_boot=10**8), error=ConfigError, match="n_boot"),
    Attack("monitor_steps_1e10", 5, api=_monitor(steps=range(10**10)), error=ConfigError, match="steps=", slow_s=1.0),
    Attack("local_patch_2001", 5, api=lambda w: __import__("scoreprobe").LocalDenoiser(_data().train, patch=2001),
           error=ConfigError, match="patch=2001", slow_s=1.0),
    Attack("run_with_cache_200k_rows", 5, api=_cache_too_big, error=ConfigError, match="GiB"),
    Attack("gallery_100k_panels", 5, api=_gallery, error=ConfigError, match="at most"),
    Attack("local_sigma_0", 1, api=_local_sigma0, answer=_limit_is_exact),
    Attack("local_sigma_negative", 1, api=lambda w: __import__("scoreprobe").LocalDenoiser(_data().train)(
        torch.zeros(2, 16), torch.tensor([-1.0, 1.0])), error=DataError, match="sigma must be >= 0"),
    Attack("compare_plot_bad_suffix", 7, argv=lambda w: ["compare", GOOD, "--plot", w / "x.bad"], match="x.bad"),
    Attack("decompose_plot_bad_suffix", 7, argv=lambda w: ["decompose", "--steps", "0", "--plot", w / "x.bad"],
           match="x.bad"),
    Attack("attr_ci_string", 7, api=_with_attrs(tau_rule=1712.0, ci="abc"), error=DataError, match="'ci'"),
    Attack("attr_tau_string", 7, api=_with_attrs(tau_rule="56", rule_threshold="0.9"), error=DataError,
           match="'tau_rule'|'rule_threshold'"),
    Attack("attr_ci_interval_string", 7, api=_with_attrs(tau_rule=1712.0, tau_rule_ci="ab"), error=DataError, match="tau_rule_ci"),
    Attack("attr_novel_oracle_string", 7, api=_minimal_with(novel_oracle="0.9"), error=DataError, match="'novel_oracle'"),
    Attack("attr_novel_oracle_bad", 7, api=_minimal_with(novel_oracle="abc"), error=DataError, match="'novel_oracle'"),
    Attack("attr_novel_oracle_7", 7, api=_minimal_with(novel_oracle=7.0), error=DataError, match="'novel_oracle'"),
    Attack("attr_n_samples_string", 7, api=_minimal_with(n_samples="100"), error=DataError, match="'n_samples'"),
    Attack("summary_of_a_store_path", 7, api=_summary_of_store, answer=_one_row, timeout_s=120),
    Attack("monitor_step_inf", 7, api=_monitor(steps=[float("inf")]), error=ConfigError, match="integer"),
    Attack("monitor_step_2_63", 7, api=_monitor(steps=[2**63]), error=ConfigError, match="out of range"),
    Attack("monitor_step_10_9", 7, api=_monitor(steps=[10.9]), error=ConfigError, match="integer"),
    Attack("monitor_step_string", 7, api=_monitor(steps=["20"]), error=ConfigError, match="integer"),
    Attack("monitor_steps_string", 7, api=_monitor(steps="20"), error=ConfigError, match="list"),
    Attack("compare_n_boot_float", 7, api=_compare(n_boot=2.7), error=ConfigError, match="n_boot"),
    Attack("compare_n_boot_0", 7, api=_compare(n_boot=0), argv=lambda w: ["compare", GOOD, "--n-boot", 0],
           error=ConfigError, match="n_boot|--n-boot"),
    Attack("patch_shape_full_width", 7, api=_patch_shape("２x２"), error=ConfigError, match="ASCII digits"),
    Attack("patch_shape_spaces", 7, api=_patch_shape(" 1x4"), error=ConfigError, match="ASCII digits"),
    Attack("patch_confirm_negative", 7, api=_patch_confirm, error=ConfigError, match="confirm"),
]
