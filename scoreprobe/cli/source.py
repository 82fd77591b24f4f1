"""The SOURCES argument and the options every analysis command shares to name checkpoints: a run
directory (default: the shipped series), checkpoint files, globs or folders of them, and for files
their steps, their data and the settings they do not store (`scoreprobe.loading.sources.open_source`)."""
import functools

import click

_WORD_SETTINGS = ("parameterization", "schedule", "ema")

SET_HELP = ("A setting the file does not store: parameterization (edm|ddpm_eps|v|x0), schedule (linear|cosine), "
            "num_timesteps, class_label (int|null), num_classes, ema (auto|true|false), num_heads, sigma_data, "
            "time_scale, image_shape (C,H,W). See docs/checkpoints.md.")
TRUST_HELP = "Allow pickles that run code when loaded (only files you trust)."


def _parse_value(name, text):
    """One --set value: words for parameterization/schedule/ema, 'null' or an int for class_label, else numbers."""
    if name in _WORD_SETTINGS or (name == "class_label" and text.lower() == "null"):
        return text.lower() if name != "parameterization" else text
    try:
        values = [float(t) if "." in t or "e" in t.lower() else int(t) for t in text.replace("x", ",").split(",")]
    except ValueError:
        raise click.BadParameter(f"{name}: expected numbers, got {text!r}", param_hint="--set")
    return values if name == "image_shape" else values[0]


def parse_settings(pairs):
    """('num_heads=6', 'image_shape=1,6,6', 'parameterization=ddpm_eps') -> {'num_heads': 6, ...}."""
    out = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected NAME=VALUE, got {pair!r}", param_hint="--set")
        out[name.strip()] = _parse_value(name.strip(), text.strip())
    return out


def _data_size(ctx, param, value):
    """--data-size callback: 'N_TRAIN,N_HELDOUT' -> (int, int)."""
    if value is None:
        return None
    try:
        n_train, n_heldout = (int(t) for t in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected N_TRAIN,N_HELDOUT such as 120,1024, got {value!r}") from None
    if n_train < 1 or n_heldout < 0:
        raise click.BadParameter(f"need N_TRAIN >= 1 and N_HELDOUT >= 0, got {value!r}")
    return n_train, n_heldout


_OPTIONS = (
    click.argument("sources", nargs=-1, type=click.Path()),
    click.option("--steps-file", type=click.Path(exists=True, dir_okay=False), default=None,
                 help="Checkpoint files and their steps: lines 'STEP PATH' (instead of SOURCES)."),
    click.option("--step-from-name", "step_pattern", metavar="REGEX", default=None,
                 help="Read each file's step from its name: the regex's first group (default: the last number "
                      "in the name, with a warning)."),
    click.option("--dataset", default=None,
                 help="Data for checkpoint files: an .npz of train/heldout bits, a run directory, or a rule spec "
                      "(JSON) with --data-size. Default: the run the files belong to."),
    click.option("--rule", "rule_spec", metavar="JSON", default=None,
                 help="Rule spec for a --dataset .npz that does not store one."),
    click.option("--data-size", callback=_data_size, metavar="N_TRAIN,N_HELDOUT", default=None,
                 help="Size of the data drawn for a rule spec --dataset."),
    click.option("--data-seed", type=click.IntRange(min=0), default=0, help="Seed of the data drawn for a rule spec."),
    click.option("--set", "settings", multiple=True, metavar="NAME=VALUE", help=SET_HELP),
    click.option("--trust", is_flag=True, help=TRUST_HELP),
)


def source_options(fn):
    """Add SOURCES... and the checkpoint options to a command; it receives `source`, a function
    returning the CheckpointSeries (called after the command's own options are checked)."""
    @functools.wraps(fn)
    def wrapper(sources, steps_file, step_pattern, dataset, rule_spec, data_size, data_seed, settings, trust, **kw):
        overrides = parse_settings(settings)

        def source():
            from scoreprobe.loading.sources import open_source
            return open_source(sources, steps_file=steps_file, step_pattern=step_pattern, dataset=dataset,
                               rule=rule_spec, data_size=data_size, data_seed=data_seed, trust=trust, **overrides)
        return fn(source=source, **kw)
    for option in reversed(_OPTIONS):
        wrapper = option(wrapper)
    return wrapper
