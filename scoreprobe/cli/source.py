"""The SOURCES argument and the options every analysis command shares to name checkpoints: a run
directory (default: the shipped series), checkpoint files, globs or folders of them, and for files
their steps, their data and the settings they do not store (`scoreprobe.loading.sources.open_source`)."""
import functools

import click

from scoreprobe.cli.common import SEED
from scoreprobe.limits import MAX_ITEMS

_WORD_SETTINGS = ("parameterization", "schedule", "ema")

SET_HELP = ("A setting the file does not store: parameterization (edm|ddpm_eps|v|x0), schedule (linear|cosine), "
            "num_timesteps, class_label (int|null), num_classes, ema (auto|true|false), num_heads, sigma_data, "
            "time_scale, image_shape (C,H,W). See docs/checkpoints.md.")
TRUST_HELP = "Allow pickles that run code when loaded (only files you trust)."


def _number(text):
    """An ASCII int or float ('6', '0.5', '1e-3'); ValueError for anything else ('²', 'nan' is a float)."""
    if not text.isascii():
        raise ValueError(text)
    return float(text) if any(c in text.lower() for c in ".en") else int(text)


def _parse_value(name, text):
    """One --set value: words for parameterization/schedule/ema, 'null' or an int for class_label, else
    one number (image_shape: three, C,H,W or CxHxW). Checked for range by models.settings.check_setting."""
    if name in _WORD_SETTINGS or (name == "class_label" and text.lower() == "null"):
        return text.lower() if name != "parameterization" else text
    parts = text.replace("x", ",").split(",") if name == "image_shape" else [text]
    try:
        values = [_number(t.strip()) for t in parts]
    except ValueError:
        want = "three integers C,H,W" if name == "image_shape" else "one number"
        raise click.BadParameter(f"{name}: expected {want}, got {text!r}", param_hint="--set") from None
    return values if name == "image_shape" else values[0]


def parse_settings(pairs):
    """('num_heads=6', 'image_shape=1,6,6', 'parameterization=ddpm_eps') -> {'num_heads': 6, ...}.

    Usage errors: a name that is not a checkpoint setting (trust, data_seed, ... have their own
    options), a name given twice, a malformed or out-of-range value."""
    from scoreprobe.errors import ConfigError
    from scoreprobe.loading.settings import SETTINGS, check_setting
    out = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {pair!r}", param_hint="--set")
        if name not in (*SETTINGS, "ema"):
            raise click.BadParameter(f"{name!r} is not a checkpoint setting; known: {', '.join(SETTINGS)}, ema",
                                     param_hint="--set")
        if name in out:
            raise click.BadParameter(f"{name} is given twice", param_hint="--set")
        out[name] = _parse_value(name, text.strip())
        try:
            check_setting(name, out[name]) if name != "ema" else None
        except ConfigError as e:
            raise click.BadParameter(str(e), param_hint="--set") from None
    return out


def _data_size(ctx, param, value):
    """--data-size callback: 'N_TRAIN,N_HELDOUT' -> (int, int)."""
    if value is None:
        return None
    try:
        n_train, n_heldout = (int(t) if t.strip().isascii() else int("not ASCII") for t in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected N_TRAIN,N_HELDOUT such as 120,1024, got {value!r}") from None
    if not 1 <= n_train <= MAX_ITEMS or not 0 <= n_heldout <= MAX_ITEMS:
        raise click.BadParameter(f"need 1 <= N_TRAIN <= {MAX_ITEMS} and 0 <= N_HELDOUT <= {MAX_ITEMS} "
                                 f"(scoreprobe.limits.MAX_ITEMS), got {value!r}")
    return n_train, n_heldout


_OPTIONS = (
    click.argument("sources", nargs=-1, type=click.Path(),
                   callback=lambda ctx, param, value: check_paths(value, None) or value),
    click.option("--steps-file", type=click.Path(), default=None,
                 help="Checkpoint files and their steps: lines 'STEP PATH' (instead of SOURCES)."),
    click.option("--step-from-name", "step_pattern", metavar="REGEX", default=None,
                 help="Read each file's step from its name: the regex's first group (default: the last number "
                      "in the name, with a warning)."),
    click.option("--dataset", default=None, callback=lambda ctx, param, value: check_paths((), value) or value,
                 help="Data for checkpoint files: an .npz of train/heldout bits, a run directory, or a rule spec "
                      "(JSON) with --data-size. Default: the run the files belong to."),
    click.option("--rule", "rule_spec", metavar="JSON", default=None,
                 help="Rule spec for a --dataset .npz that does not store one."),
    click.option("--data-size", callback=_data_size, metavar="N_TRAIN,N_HELDOUT", default=None,
                 help="Size of the data drawn for a rule spec --dataset."),
    click.option("--data-seed", type=SEED, default=0, help="Seed of the data drawn for a rule spec."),
    click.option("--set", "settings", multiple=True, metavar="NAME=VALUE", help=SET_HELP),
    click.option("--trust", is_flag=True, help=TRUST_HELP),
    click.option("--denoiser", "denoiser_spec", metavar="MODULE:FUNCTION", default=None,
                 help="Your own model instead of SOURCES: FUNCTION(step) -> a denoiser D(x, sigma) (steps from "
                      "--steps S1,S2,...), or FUNCTION() -> a denoiser or a mapping {step: denoiser}; MODULE is "
                      "importable or a path/to/file.py. Runs your code: needs --trust. Data from --dataset."),
    click.option("--denoiser-timeout", "denoiser_timeout", type=float, default=None, metavar="SECONDS",
                 help="With --denoiser: the most seconds one call of your denoiser may take (one error line "
                      "beyond it; enforced in the main thread, not on dask workers). Default: no bound."),
)


def _denoiser_source(spec, sources, steps_text, dataset, rule_spec, data_size, data_seed, trust, others,
                     timeout=None):
    """The source() of --denoiser: checked here, before anything heavy is imported; loaded when called."""
    from scoreprobe.errors import ConfigError
    from scoreprobe.loading.usercode import TRUST_NEEDED, check_timeout
    if not trust:
        raise ConfigError(TRUST_NEEDED)
    check_timeout(timeout)
    if sources or others:
        also = " and no " + ", ".join(others) if others else ""
        raise ConfigError(f"--denoiser names the model: give no SOURCES{also}")
    if dataset is None:
        raise ConfigError("--denoiser needs the data to compare with: pass --dataset (an .npz of train/heldout bits, "
                          "a run directory, or a rule spec with --data-size)")
    from scoreprobe.cli.common import parse_steps
    chosen = parse_steps(steps_text, words=("all", "auto")) if steps_text is not None else None

    def source():
        from scoreprobe.loading.sources import dataset_from
        from scoreprobe.loading.usercode import denoiser_series
        data = dataset_from(dataset, rule_spec, data_size, data_seed)
        return denoiser_series(spec, data, steps=chosen if isinstance(chosen, list) else None, trust=trust,
                               timeout=timeout)
    return source


def check_paths(sources, dataset):
    """The SOURCES and --dataset paths exist (globs match): ConfigError / DataError with the messages
    `open_source` would give later. Run as the callbacks of SOURCES and --dataset, which click calls
    in the order of the command line, before the defaults of --device and --plot are checked (those
    import torch and matplotlib, seconds on a loaded machine)."""
    import glob
    import os
    from scoreprobe.errors import ConfigError, DataError
    for text in map(str, sources):
        if os.path.exists(text):
            continue
        if not glob.has_magic(text):
            raise ConfigError(f"no checkpoint file or folder at {text}")
        if not glob.glob(text):
            raise ConfigError(f"no file matches {text!r}")
    if dataset is not None and not str(dataset).lstrip().startswith("{") and not os.path.exists(dataset):
        raise DataError(f"no dataset file at {dataset}")


def _run_dirs(sources):
    """SOURCES as a list of several run directories, or None (one series, files, or a mixture)."""
    from scoreprobe.loading.sources import is_run_dir
    return list(sources) if len(sources) > 1 and all(is_run_dir(p) for p in sources) else None


def source_options(fn):
    """Add SOURCES... and the checkpoint options to a command; it receives `source`, a function
    returning the CheckpointSeries (called after the command's own options are checked)."""
    @functools.wraps(fn)
    def wrapper(sources, steps_file, step_pattern, dataset, rule_spec, data_size, data_seed, settings, trust,
                denoiser_spec, denoiser_timeout, **kw):
        overrides = parse_settings(settings)
        if denoiser_spec is not None:
            others = [k for k, v in (("--steps-file", steps_file), ("--step-from-name", step_pattern),
                                     ("--set", settings)) if v]
            return fn(source=_denoiser_source(denoiser_spec, sources, kw.get("steps"), dataset, rule_spec,
                                              data_size, data_seed, trust, others, denoiser_timeout), **kw)
        if denoiser_timeout is not None:
            from scoreprobe.errors import ConfigError
            raise ConfigError("--denoiser-timeout bounds the calls of --denoiser's function; give --denoiser")

        def source():
            from scoreprobe.loading.sources import open_source
            return open_source(sources, steps_file=steps_file, step_pattern=step_pattern, dataset=dataset,
                               rule=rule_spec, data_size=data_size, data_seed=data_seed, trust=trust, **overrides)
        plain = not any((steps_file, step_pattern, dataset, rule_spec, data_size, settings, trust))
        source.run_dirs = _run_dirs(sources) if plain else None   # several runs: `clocks` measures each
        return fn(source=source, **kw)
    for option in reversed(_OPTIONS):
        wrapper = option(wrapper)
    return wrapper
