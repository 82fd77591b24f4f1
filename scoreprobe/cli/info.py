"""`scoreprobe info`: what a checkpoint file, a diffusers folder or a run directory holds, one row per fact."""
import logging
import sys
import warnings

import click

from scoreprobe.cli.app import cli
from scoreprobe.cli.source import SET_HELP, TRUST_HELP, parse_settings
from scoreprobe.errors import ScoreprobeError, ScoreprobeWarning


def _fmt_arch(arch):
    if not arch:
        return "unknown"
    flat = {**{k: v for k, v in arch.items() if k != "net"}, **arch.get("net", {})}
    return " ".join(f"{k}={'?' if v is None else v}" for k, v in flat.items())


def _fmt_steps(steps):
    shown = steps if len(steps) <= 12 else [*steps[:6], "...", *steps[-4:]]
    return ", ".join(map(str, shown))


def _info_series(s):
    d = s.describe()
    meta = s.meta
    planned = d["planned_steps"] or []
    state = "in progress" if (s.path / "resume.pt").exists() or len(d["steps"]) < len(planned) else "finished"
    C, H, W = d["image_shape"]
    yield "path", d["path"]
    yield "format", f"{meta.get('format')} run directory ({state}; {len(d['steps'])} of {len(planned)} checkpoints)"
    yield "rule", f"{d['rule']!r}"
    yield "data", (f"{d['n_train']} train + {d['n_heldout']} held-out images, {C * H * W} bits each "
                   f"(C,H,W = {C},{H},{W}), data seed {d['config'].get('data_seed')}")
    yield "model", d["kind"]
    yield "architecture", _fmt_arch(d["arch"])
    yield "parameters", f"{d['n_params']:,}"
    yield "steps", _fmt_steps(d["steps"])
    if meta.get("extended_from"):
        yield "extended", f"from {', '.join(map(str, meta['extended_from']))} steps to {d['config'].get('total_steps')}"
    if state == "finished":
        yield "extendable", ("no (cosine learning-rate schedule)" if d["config"].get("lr_schedule") == "cosine" else
                             "yes (final_state.pt: a larger --total-steps continues it)"
                             if (s.path / "final_state.pt").exists() else "no (no final_state.pt kept)")
    cfg = d["config"]
    yield "training", " ".join(f"{k}={cfg.get(k)}" for k in ("lr", "lr_schedule", "batch_size", "total_steps", "ema_decay",
                                                                "seed", "save_dtype"))
    if meta.get("versions"):
        yield "versions", " ".join(f"{k}={v}" for k, v in meta["versions"].items()) + (
            f" git={meta['git_commit'][:10]}" if meta.get("git_commit") else "")


def _info_decisions(d):
    """The rows that say how the file will be read: parameterization, schedule, σ_data, label, weights."""
    p = d["parameterization"]
    yield "parameterization", (f"{p} ({d['parameterization_how']})" if p else
                               f"unknown ({d['parameterization_how']}); pass --set parameterization="
                               "edm|ddpm_eps|v|x0 (or --set sigma_data=... for EDM)")
    if p != "edm":
        yield "schedule", f"{d['schedule']} ({d['schedule_how']})" if d["schedule"] else "unknown"
    sd = d["sigma_data"]
    yield "sigma_data", (f"{sd:g} ({d['sigma_data_how']})" if sd is not None else
                         "none (not an EDM model; the DSM weight uses 1.0 unless told)" if p not in (None, "edm")
                         else "unknown")
    yield "label", d["label_how"]
    yield "weights", d["weights"]
    yield "overrides", ", ".join(f"{k}={v}" for k, v in d["overrides"].items()) or "none"
    stated = {k: o for k, o in d["origins"].items() if o != "override"}
    if stated:
        yield "from the file", ", ".join(f"{k} ({o})" for k, o in stated.items())


def _info_file(path, trust, settings):
    from scoreprobe.loading.series import describe_checkpoint
    ema = settings.pop("ema", "auto")
    d = describe_checkpoint(path, trust=trust, ema=ema, **settings)
    yield "path", d["path"]
    yield "format", d["format"]
    yield "model", d["kind"]
    if d["step"] is not None:
        yield "step", d["step"]
    shape = (d["arch"] or {}).get("image_shape")
    yield "image shape", "unknown" if shape is None else "x".join(map(str, shape))
    arch = d["arch"] if d["parameterization"] in (None, "edm") else {
        k: v for k, v in (d["arch"] or {}).items() if k not in ("sigma_data", "time_scale")}
    yield "architecture", _fmt_arch(arch)
    yield "parameters", f"{d['n_params']:,}"
    if d["kind"] == "dit":
        yield from _info_decisions(d)
    if d["missing"]:
        yield "missing", (f"{', '.join(d['missing'])} (not stored in the file; "
                          f"pass --set {d['missing'][0]}=... to load it)")


def _echo_warnings(caught):
    """The warnings recorded while a file was read, one line each (kept when reading then fails)."""
    for w in caught:
        click.echo(f"warning: {w.category.__name__}: {' '.join(str(w.message).split())}", err=True)


@cli.command()
@click.argument("path", type=click.Path(path_type=str), required=False)
@click.option("--trust", is_flag=True, help=TRUST_HELP)
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE", help=SET_HELP)
def info(path, trust, settings):
    """Describe a run directory (default: the shipped series) or a checkpoint file / diffusers folder:
    rule, data, architecture, parameters, steps; for a file also how it will be read
    (parameterization, schedule, σ_data, label row, weights)."""
    import os
    if path is not None and not os.path.exists(path):   # before torch is imported (seconds)
        click.echo(f"error: no checkpoint file, diffusers folder or run directory at {path}", err=True)
        sys.exit(2)
    from scoreprobe.loading.series import load_series
    settings = parse_settings(settings)
    caught = []
    try:
        if path is None or (os.path.isdir(path) and os.path.exists(os.path.join(path, "run.json"))):
            rows = list(_info_series(load_series(path)))
        else:
            with warnings.catch_warnings(record=True) as caught:   # guessed settings: shown as rows
                warnings.simplefilter("always", ScoreprobeWarning)
                rows = list(_info_file(path, trust, settings))
            rows += [("warning", str(w.message)) for w in caught if issubclass(w.category, ScoreprobeWarning)]
    except ScoreprobeError as e:
        _echo_warnings(caught)      # e.g. the TrustWarning of a pickle whose code ran before the error
        click.echo(f"error: {' '.join(str(e).split())}", err=True)
        sys.exit(2)
    except Exception as e:  # a hostile or odd file must not print a traceback
        _echo_warnings(caught)
        logging.getLogger(__name__).debug("info %s failed", path, exc_info=True)
        click.echo(f"error: could not read {path} ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}); "
                   "rerun as `scoreprobe -vv info ...` for details", err=True)
        sys.exit(2)
    for key, value in rows:
        click.echo(f"{key + ':':<18s}{value}")
