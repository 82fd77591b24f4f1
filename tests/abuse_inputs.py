"""The abuse corpus of issue 21 (part of tests/abuse_corpus.py): malformed inputs to the surfaces added
since the first corpus -- `trust`, sizes before allocation, settings from any source, SOURCES and steps
files, numeric options, silent acceptances -- each built in a copy `d` of the good run directory.

An attempt is (API call or None, CLI argv or None, typed error, the reason its message must give);
`cases()` lists them with the item of issue 21 each belongs to. abuse_attempt.run_attempt classifies what
happened, and `python tests/abuse_corpus.py` prints the counts.
"""
import argparse
import json
import os
from collections import namedtuple
from pathlib import Path

import torch

from abuse_corpus import CKPT, STEP, CreatesFile

Attempt = namedtuple("Attempt", "api argv error match", defaults=(None,))   # match: a regex the API error meets
ITEMS = {1: "trust", 2: "sizes", 4: "settings", 5: "sources", 6: "numbers", 8: "silent acceptances"}
UPSTREAM_ARGS = dict(data_path="data", results_dir="results", model="DiT-S/2", image_size=256, num_classes=1,
                     epochs=1400, global_batch_size=256, global_seed=0, vae="ema", num_workers=4, log_every=100,
                     ckpt_every=50000)     # every option facebookresearch/DiT train.py defines


# ---------------------------------------------------------------------------------------------
# Foreign files next to the good run (4x4 parity images, 1 channel)
# ---------------------------------------------------------------------------------------------

def _fb_sd(seed=0):
    from test_dit import facebook_dit_state_dict
    return facebook_dit_state_dict(1, 2, 12, 1, 2, learn_sigma=True, label_rows=2, seed=seed)


def _foreign(d, obj=None, name="0000100.pt", side=None, raw_side=None):
    """d/foreign/name holding obj (default: an upstream train.py dict), with side files {name: dict | text}."""
    folder = d / "foreign"
    folder.mkdir(exist_ok=True)
    torch.save(obj if obj is not None else {"model": _fb_sd(), "ema": _fb_sd(), "opt": {},
                                            "args": argparse.Namespace(**UPSTREAM_ARGS)}, folder / name)
    for side_name, content in {**(side or {}), **(raw_side or {})}.items():
        (folder / side_name).write_text(content if isinstance(content, str) else json.dumps(content))
    return folder / name


def _bare(d, side=None, raw_side=None):
    return _foreign(d, _fb_sd(), side=side, raw_side=raw_side)


def _safetensors(d, metadata=None, dtype=None):
    from safetensors.torch import save_file
    (d / "foreign").mkdir(exist_ok=True)
    sd = {k: (v if dtype is None else v.to(dtype)).contiguous() for k, v in _fb_sd().items()}
    save_file(sd, str(d / "foreign" / "model.safetensors"), metadata=metadata)
    return d / "foreign" / "model.safetensors"


def _diffusers(d, **config):
    from test_foreign_formats import _to_diffusers
    root = d / "pipe"
    (root / "transformer").mkdir(parents=True)
    (root / "model_index.json").write_text(json.dumps({"_class_name": "DiTPipeline"}))
    base = {"_class_name": "DiTTransformer2DModel", "num_attention_heads": 6, "attention_head_dim": 2,
            "in_channels": 1, "out_channels": 2, "num_layers": 1, "sample_size": 4, "patch_size": 2,
            "num_embeds_ada_norm": 1, "norm_type": "ada_norm_zero", "activation_fn": "gelu-approximate"}
    (root / "transformer" / "config.json").write_text(json.dumps({**base, **config}))
    torch.save(_to_diffusers(_fb_sd(), 1), root / "transformer" / "diffusion_pytorch_model.bin")
    return root


def _scheduler(root, **config):
    (root / "scheduler").mkdir()
    (root / "scheduler" / "scheduler_config.json").write_text(json.dumps({"_class_name": "DDIMScheduler", **config}))
    return root


def _expanded(d, n=10**8):
    """An upstream dict whose weights hold one zero-stride view declaring n floats (a 400 MB tensor in ~2 KB)."""
    sd = {**_fb_sd(), "blocks.0.mlp.fc1.weight": torch.zeros(()).expand(n // 12, 12)}
    return _foreign(d, {"model": sd, "ema": sd, "opt": {}, "args": argparse.Namespace(**UPSTREAM_ARGS)})


def _evil(d):
    path = d / "foreign" / "evil.pt"
    path.parent.mkdir(exist_ok=True)
    torch.save({"evil": CreatesFile(d.parent / "MARKER")}, path)
    return path


# ---------------------------------------------------------------------------------------------
# Attempts
# ---------------------------------------------------------------------------------------------

def _clocks_argv(source, *extra):
    return ["clocks", *map(str, source), *extra, "--n-samples", 2, "--n-steps", 1, "--device", "cpu",
            "--out", Path(source[0]).parent / "c.zarr"]


def _load(path, error, **kw):
    """An attempt at load_checkpoint(path, **kw) and at `clocks path --dataset RUN` with the same settings."""
    from scoreprobe.loading.series import load_checkpoint

    def api():
        return load_checkpoint(path, **kw)
    sets = [a for k, v in kw.items() if k != "trust" for a in ("--set", f"{k}={v}")]
    return Attempt(api, _clocks_argv([path], "--dataset", path.parent.parent, *sets), error)


def _source(paths, error, argv_extra=(), **kw):
    from scoreprobe.loading.sources import open_source
    return Attempt(lambda: open_source(paths, **kw), _clocks_argv(paths, *argv_extra) if paths else None, error)


def _cli(argv, error=None):
    return Attempt(None, argv, error)


def _train(d, error, **cfg):
    from abuse_corpus import CFG
    from scoreprobe.training.train import TrainConfig, train_run

    def api():
        return train_run(TrainConfig(**{**CFG, **cfg}), d.parent / "new-run", progress=False)
    flags = [a for k, v in cfg.items() for a in (f"--{k.replace('_', '-')}", v)]
    return Attempt(api, ["train", d.parent / "new-run", "--shape", "4x4", *flags], error)


def _series(d):
    from scoreprobe.loading.series import load_series
    return load_series(d)



def _api_call(module, name, *args, **kw):
    """A zero-argument call of scoreprobe.<module>.<name>(*args(d) ..., **kw), args given as functions of nothing."""
    def call():
        import importlib
        fn = getattr(importlib.import_module(f"scoreprobe.{module}"), name)
        return fn(*[a() for a in args], **kw)
    return call


def _plane_call(d, module, name, **kw):
    def call():
        import importlib
        from scoreprobe.slices import auto_plane
        s = _series(d)
        return getattr(importlib.import_module(f"scoreprobe.{module}"), name)(s, auto_plane(s.dataset, s.rule), **kw)
    return call


def _steps_file(d, lines):
    (d / "steps.txt").write_text("".join(f"{line}\n" for line in lines))
    return d / "steps.txt"


def _ensemble(d, spec, *flags):
    return ["train", d.parent / "ens", "--shape", "4x4", "--ensemble", spec, "--total-steps", 2, *flags]


def _cases(e):
    """[(name, item, build(d) -> Attempt)] with e = scoreprobe.errors (imported when the cases are built)."""
    C, K, D = e.ConfigError, e.CheckpointError, e.DataError
    series = lambda d: lambda: _series(d)                                                  # noqa: E731
    evil_source = lambda v: lambda d: Attempt(_source([_evil(d)], C, dataset=d, trust=v).api, None, C)  # noqa: E731
    return [
        # 1. trust is a real bool, wherever it is taken
        *[(f"load_trust_{v!r}", 1, lambda d, v=v: Attempt(_load(_evil(d), C, trust=v).api, None, C))
          for v in ("false", "no", "0", "False", 1, 0, None)],
        *[(f"open_source_trust_{v!r}", 1, evil_source(v)) for v in ("false", 1)],
        ("series_from_files_trust_no", 1, lambda d: Attempt(_api_call(
            "loading.series", "series_from_files", lambda: [_evil(d)], lambda: [0], lambda: d / "dataset.npz",
            trust="no"), None, C)),
        ("describe_trust_yes", 1, lambda d: Attempt(_api_call("loading.series", "describe_checkpoint", lambda: _evil(d),
                                                              trust="yes"), None, C)),
        # 2. sizes before allocation
        ("pt_zero_stride_views", 2, lambda d: _load(_expanded(d), K)),
        ("pt_zero_stride_views_info", 2, lambda d: Attempt(None, ["info", _expanded(d)], K)),
        ("diffusers_sample_size_3000", 2, lambda d: _load(_diffusers(d, sample_size=3000), K)),
        ("diffusers_sample_size_vs_data", 2, lambda d: _source([_diffusers(d, sample_size=8)], C, ("--dataset", d),
                                                               dataset=d)),
        ("side_config_2mb", 2, lambda d: _load(_bare(d, raw_side={"config.json": '{"a": "' + "x" * (2 << 20) + '"}'}),
                                               K, parameterization="edm", sigma_data=1.0)),
        ("side_args_fifo", 2, lambda d: (_bare(d), os.mkfifo(d / "foreign" / "args.json"),
                                         _load(d / "foreign" / "0000100.pt", K, parameterization="edm"))[-1]),
        ("train_hidden_8192_depth_256", 2, lambda d: _train(d, C, hidden_size=8192, depth=256, total_steps=10)),
        ("train_batch_1e9", 2, lambda d: _train(d, C, batch_size=10**9)),
        ("train_activations_60000x2048", 2, lambda d: _train(d, C, batch_size=60000, hidden_size=2048)),
        ("clocks_n_samples_1e12", 2, lambda d: Attempt(_api_call("stats.clocks", "clocks", series(d), n_samples=10**12),
                                                       ["clocks", d, "--n-samples", 10**12], C)),
        ("clocks_n_steps_1e9", 2, lambda d: Attempt(_api_call("stats.clocks", "clocks", series(d), n_samples=2,
                                                              n_steps=10**9), ["clocks", d, "--n-steps", 10**9], C)),
        ("sample_n_1e12", 2, lambda d: Attempt(_api_call("ode", "sample", lambda: _series(d).denoiser(STEP), lambda: 10**12,
                                                         lambda: 0), None, C)),
        ("basins_n_steps_1e9", 2, lambda d: Attempt(_plane_call(d, "probes.basins", "basins", n_steps=10**9, res=2),
                                                    ["basins", d, "--n-steps", 10**9], C)),
        ("dsm_sigmas_1e9", 2, lambda d: Attempt(_api_call("probes.dsm", "dsm_by_sigma", series(d), sigmas=10**9),
                                                ["dsm", d, "--sigmas", 10**9], C)),
        ("rule_spec_dataset_2tib", 2, lambda d: _source(
            [d / CKPT], D, ("--dataset", json.dumps(BIG_RULE), "--data-size", "4194304,4194304"), dataset=BIG_RULE,
            data_size=(4194304, 4194304))),
        ("ensemble_10000_seeds", 2, lambda d: Attempt(None, _ensemble(d, "seed=" + ",".join(map(str, range(10000)))),
                                                      C)),
        ("ensemble_api_300_members", 2, lambda d: Attempt(_api_call(
            "training.ensemble", "check_ensemble", lambda: [_config(seed=i) for i in range(300)],
            lambda: [d.parent / f"m{i}" for i in range(300)]), None, C)),
        # 4. settings from any source: type, range, finiteness, depth
        ("safetensors_beta_schedule_dict", 4, lambda d: _load(_safetensors(d, {"beta_schedule": "{}", "num_heads": "6",
                                                                                "parameterization": "ddpm_eps"}), C)),
        ("safetensors_float8", 4, lambda d: _load(_safetensors(d, dtype=torch.float8_e4m3fn), K,
                                                  parameterization="edm", sigma_data=1.0, num_heads=6)),
        ("pt_float8", 4, lambda d: _load(_foreign(d, {k: v.to(torch.float8_e4m3fn) for k, v in _fb_sd().items()}), K,
                                         parameterization="edm", sigma_data=1.0, num_heads=6)),
        ("side_args_prediction_type_list", 4, lambda d: _load(_bare(d, {"args.json": {"prediction_type": []}}), C)),
        ("side_config_beta_schedule_list", 4, lambda d: _load(_bare(d, {"config.json": {"beta_schedule": ["linear"]}}),
                                                              C)),
        ("namespace_prediction_type_list", 4, lambda d: _load(_foreign(d, {
            "ema": _fb_sd(), "args": argparse.Namespace(prediction_type=[])}), C)),
        ("side_num_heads_1e999", 4, lambda d: _load(_bare(d, raw_side={"args.json": '{"num_heads": 1e999}'}), C,
                                                    parameterization="edm", sigma_data=1.0)),
        ("side_num_heads_nan", 4, lambda d: _load(_bare(d, raw_side={"args.json": '{"num_heads": NaN}'}), C,
                                                  parameterization="edm", sigma_data=1.0)),
        ("side_image_shape_5", 4, lambda d: _load(_bare(d, {"args.json": {"image_shape": 5}}), C,
                                                  parameterization="edm", sigma_data=1.0, num_heads=6)),
        ("side_image_shape_abc", 4, lambda d: _load(_bare(d, {"args.json": {"image_shape": "abc"}}), C,
                                                    parameterization="edm", sigma_data=1.0, num_heads=6)),
        ("side_json_nested_100000", 4, lambda d: _load(_bare(d, raw_side={"args.json": "[" * 100000 + "]" * 100000}),
                                                       K, parameterization="edm", sigma_data=1.0, num_heads=6)),
        ("safetensors_meta_nested_100000", 4, lambda d: _load(_safetensors(d, {"num_heads": "[" * 100000 + "]" * 100000}),
                                                              C, parameterization="edm", sigma_data=1.0)),
        ("diffusers_sample_size_abc", 4, lambda d: _load(_diffusers(d, sample_size="abc"), C)),
        ("diffusers_norm_eps_abc", 4, lambda d: _load(_diffusers(d, norm_eps="abc"), C)),
        ("diffusers_heads_1e999", 4, lambda d: _load(_diffusers(d, num_attention_heads=1e999), C)),
        ("diffusers_scheduler_prediction_list", 4, lambda d: _load(_scheduler(_diffusers(d), prediction_type=["epsilon"]),
                                                                   C)),
        ("namespace_sigma_data_inf", 4, lambda d: _load(_foreign(d, {
            "ema": _fb_sd(), "args": argparse.Namespace(sigma_data=float("inf"), num_heads=6)}), C)),
        # 5. SOURCES
        ("source_name_300", 5, lambda d: _source([d / ("x" * 300 + ".pt")], C, dataset=d)),
        ("dataset_name_300", 5, lambda d: _source([d / CKPT], C, ("--dataset", d / ("x" * 300)), dataset=d / ("x" * 300))),
        ("glob_name_300", 5, lambda d: _source([str(d / ("x" * 300 + "*.pt"))], C, dataset=d)),
        ("steps_file_name_300", 5, lambda d: Attempt(_api_call("loading.sources", "read_steps_file", lambda: d / ("s" * 300)),
                                                     ["clocks", "--steps-file", d / ("s" * 300)], C)),
        ("steps_file_nul_path", 5, lambda d: _steps_source(d, ["12 ckpt/step\0.pt"], C)),
        ("steps_file_superscript_step", 5, lambda d: _steps_source(d, [f"\u00b2 {CKPT}"], C)),
        ("steps_file_arabic_step", 5, lambda d: _steps_source(d, [f"\u0663 {CKPT}"], C)),
        ("steps_file_dev_zero", 5, lambda d: Attempt(_api_call("loading.sources", "read_steps_file", lambda: "/dev/zero"),
                                                     ["clocks", "--steps-file", "/dev/zero"], C)),
        ("steps_file_fifo", 5, lambda d: (os.mkfifo(d / "fifo"), Attempt(
            _api_call("loading.sources", "read_steps_file", lambda: d / "fifo"), ["clocks", "--steps-file", d / "fifo"], C))[1]),
        ("steps_file_2mb", 5, lambda d: _steps_source(d, [f"{i} {CKPT}" for i in range(200000)], C)),
        *[(f"set_reserved_{n}", 5, lambda d, n=n: Attempt(None, ["clocks", d / CKPT, "--dataset", d, "--set", f"{n}=1"], C))
          for n in ("trust", "data_seed", "step_pattern", "paths")],
        ("step_from_name_catastrophic", 5, lambda d: Attempt(
            _api_call("loading.sources", "steps_from_names", lambda: [Path("a" * 40 + "!.pt")], lambda: "(a+)+$"),
            ["clocks", d / CKPT, "--dataset", d, "--step-from-name", "(a+)+$"], C)),
        ("step_from_name_backreference", 5, lambda d: Attempt(
            _api_call("loading.sources", "compile_step_pattern", lambda: r"(\d)\1"), None, C)),
        # 6. every numeric option in range
        ("basins_sigma_start_1e308", 6, lambda d: Attempt(_plane_call(d, "probes.basins", "basins", sigma_start=1e308,
                                                                      res=2), ["basins", d, "--sigma-start", "1e308"], C)),
        ("field_sigma_1e308", 6, lambda d: Attempt(_plane_call(d, "probes.field", "score_field", sigmas=[1e308], res=2),
                                                   ["field", d, "--sigma", "1e308"], C)),
        ("animate_fps_1e-300", 6, lambda d: Attempt(_api_call("viz", "animate_basins", lambda: d.parent / "existing.zarr",
                                                              lambda: d.parent / "a.gif", fps=1e-300),
                                                    ["animate", d.parent / "existing.zarr", "--fps", "1e-300"], C)),
        ("train_seed_2_76", 6, lambda d: _train(d, C, seed=2**76)),
        ("train_seed_2_64", 6, lambda d: _train(d, C, seed=2**64)),
        ("train_data_seed_2_64", 6, lambda d: _train(d, C, data_seed=2**64)),
        ("clocks_seed_2_64", 6, lambda d: Attempt(_api_call("stats.clocks", "clocks", series(d), n_samples=2, seed=2**64),
                                                  ["clocks", d, "--seed", 2**64], C)),
        ("sample_seed_2_64", 6, lambda d: Attempt(_api_call("ode", "sample", lambda: _series(d).denoiser(STEP),
                                                            lambda: 2, lambda: 2**64), None, C)),
        ("ensemble_seed_1e23", 6, lambda d: Attempt(None, _ensemble(d, f"seed=0,{10**23}"), C)),
        ("make_dataset_seed_2_64", 6, lambda d: Attempt(_api_call("data.datasets", "make_dataset", lambda: _series(d).rule,
                                                                  lambda: 2, lambda: 2, seed=2**64), None, C)),
        ("set_sigma_data_1e308", 6, lambda d: _load(_bare(d), C, parameterization="edm", sigma_data=1e308, num_heads=6)),
        ("train_time_scale_1e308", 6, lambda d: _train(d, C, time_scale=1e308)),
        ("train_p_mean_1e308", 6, lambda d: _train(d, C, p_mean=1e308)),
        ("train_lr_nan", 6, lambda d: _train(d, C, lr=float("nan"))),
        ("train_threads_1e12", 6, lambda d: Attempt(None, ["train", d.parent / "new-run", "--threads", 10**12], C)),
        ("dask_local_1e9", 6, lambda d: Attempt(None, ["clocks", d, "--dask-local", 10**9], C)),
        ("data_size_huge", 6, lambda d: Attempt(None, ["clocks", d / CKPT, "--dataset", json.dumps(BIG_RULE),
                                                       "--data-size", f"{10**30},1"], C)),
        # 8. silent acceptances
        ("set_num_heads_4_8", 8, lambda d: Attempt(None, ["clocks", _bare(d), "--dataset", d, "--set", "num_heads=4,8"], C)),
        ("set_repeated", 8, lambda d: Attempt(None, ["clocks", _bare(d), "--dataset", d, "--set", "num_heads=4",
                                                     "--set", "num_heads=6"], C)),
        ("meta_num_heads_true", 8, lambda d: _load(_safetensors(d, {"num_heads": "true"}), C,
                                                   parameterization="edm", sigma_data=1.0)),
        ("meta_num_heads_4.7", 8, lambda d: _load(_safetensors(d, {"num_heads": "4.7"}), C,
                                                  parameterization="edm", sigma_data=1.0)),
        ("side_num_heads_true", 8, lambda d: _load(_bare(d, {"args.json": {"num_heads": True}}), C,
                                                   parameterization="edm", sigma_data=1.0)),
        ("meta_image_shape_6.9", 8, lambda d: _load(_safetensors(d, {"image_shape": "[1, 4, 4.9]"}), C,
                                                    parameterization="edm", sigma_data=1.0, num_heads=6)),
        ("steps_file_one_file_twice", 8, lambda d: _steps_source(d, [f"12 {CKPT}", f"13 {CKPT}"], C)),
        ("steps_file_symlink_alias", 8, lambda d: (os.symlink(d / CKPT, d / "alias.pt"),
                                                   _steps_source(d, [f"12 {CKPT}", "13 alias.pt"], C))[1]),
        ("sources_symlink_alias", 8, lambda d: (os.symlink(d / CKPT, d / "alias.pt"),
                                                _source([d / CKPT, d / "alias.pt"], C, dataset=d))[1]),
        ("ensemble_k_with_parity", 8, lambda d: Attempt(None, _ensemble(d, "k=3,4"), C)),
        ("ensemble_rule_seed_contiguous", 8, lambda d: Attempt(None, _ensemble(d, "rule_seed=0,1", "--layout",
                                                                               "contiguous"), C)),
        ("ensemble_api_identical_members", 8, lambda d: Attempt(_api_call(
            "training.ensemble", "check_ensemble", lambda: [_config(rule={**_config().rule, "layout": "contiguous", "seed": s})
                                                   for s in (0, 1)],
            lambda: [d.parent / "m0", d.parent / "m1"]), None, C)),
    ]


BIG_RULE = {"name": "exactk", "k": 1, "shape": [128, 128]}


def _config(**kw):
    from abuse_corpus import CFG
    from scoreprobe.training.train import TrainConfig
    return TrainConfig(**{**CFG, **kw})


def _steps_source(d, lines, error):
    path = _steps_file(d, lines)
    from scoreprobe.loading.sources import open_source
    return Attempt(lambda: open_source(steps_file=path, dataset=d), ["clocks", "--steps-file", path, "--dataset", d,
                                                                    "--n-samples", 2, "--n-steps", 1, "--device", "cpu"],
                   error)


# what each refusal must say (the API error), so that an attempt refused for another reason is not clean
REASONS = {
    "load_trust": "trust must be True or False", "open_source_trust": "trust must be", "series_from_files": "trust must",
    "describe_trust": "trust must", "pt_zero_stride": "zero-stride", "diffusers_sample_size_3000": "sample_size 3000",
    "diffusers_sample_size_vs": "the dataset has", "side_config_2mb": "larger than", "side_args_fifo": "regular file",
    "train_hidden": "parameters", "train_batch": "batch_size", "train_activations": "activations",
    "clocks_n_samples": "n_samples", "clocks_n_steps": "n_steps", "sample_n": "n_samples", "basins_n_steps": "n_steps",
    "dsm_sigmas": "sigmas", "rule_spec_dataset": "MAX_DATASET_BYTES", "ensemble_api_300": "MAX_ENSEMBLE",
    "safetensors_beta": "beta_schedule", "safetensors_float8": "float8", "pt_float8": "float8",
    "side_args_prediction": "prediction_type", "side_config_beta": "beta_schedule", "namespace_prediction": "prediction",
    "side_num_heads": "num_heads", "side_image_shape": "image_shape", "side_json_nested": "nested",
    "safetensors_meta_nested": "nested", "diffusers_sample_size_abc": "sample_size", "diffusers_norm_eps": "norm_eps",
    "diffusers_heads": "num_attention_heads", "diffusers_scheduler": "prediction_type", "namespace_sigma": "sigma_data",
    "source_name": "too long", "dataset_name": "too long", "glob_name": "too long", "steps_file_name": "too long",
    "steps_file_nul": "NUL", "steps_file_superscript": "ASCII", "steps_file_arabic": "ASCII",
    "steps_file_dev_zero": "regular file", "steps_file_fifo": "regular file", "steps_file_2mb": "larger than",
    "step_from_name_catastrophic": "quantifies a group", "step_from_name_back": "backreference",
    "basins_sigma": "sigma_start", "field_sigma": "sigmas", "animate_fps": "fps", "train_seed": "seed",
    "train_data_seed": "data_seed",
    "train_time_scale": "time_scale", "train_p_mean": "p_mean", "train_lr": "lr", "clocks_seed": "seed", "sample_seed": "seed", "make_dataset_seed": "seed",
    "set_sigma_data": "sigma_data", "meta_num_heads": "num_heads", "side_num_heads_true": "num_heads",
    "meta_image_shape": "image_shape", "steps_file_one_file": "named at steps", "steps_file_symlink": "named at steps",
    "sources_symlink": "named twice", "ensemble_api_identical": "identical runs",
}


def cases():
    """[(name, item, build)] where build(d) gives the Attempt with its expected reason (REASONS)."""
    import scoreprobe.errors as errors

    def with_reason(name, build):
        reason = next((r for prefix, r in REASONS.items() if name.startswith(prefix)), None)
        return lambda d: build(d)._replace(match=reason)
    return [(name, item, with_reason(name, build)) for name, item, build in _cases(errors)]
