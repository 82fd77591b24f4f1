"""Command-line interface: `scoreprobe SUBCOMMAND`. The only module that prints.

Each subcommand is a thin wrapper over a library function; typed errors
(`scoreprobe.errors`) become one line on stderr and exit code 2.
"""
import logging
import sys

import click

from scoreprobe.errors import ScoreprobeError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option("-v", "--verbose", count=True, help="Debug log output.")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
def cli(verbose, quiet):
    """scoreprobe: dissect when a diffusion model learns the rule and when it memorizes."""
    level = logging.WARNING if quiet else (logging.DEBUG if verbose else logging.INFO)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def main(argv=None):
    """Console entry point: runs the click group, mapping typed errors to exit code 2."""
    try:
        cli.main(args=argv, prog_name="scoreprobe", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except ScoreprobeError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted; everything written so far is kept.", err=True)
        sys.exit(130)


# ---------------------------------------------------------------------------------------------
# Subcommands are registered below, one banner section each.
# ---------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------
# train
# ---------------------------------------------------------------------------------------------

def _rule_spec(rule, G, k, n, layout, rule_seed, shape):
    """Rule options -> a rule spec dict (validated by building the rule)."""
    from scoreprobe.rules import rule_from_spec
    H, W = _parse_shape(shape)
    specs = {"parity": {"name": "parity", "G": G, "shape": [H, W], "layout": layout, "seed": rule_seed},
             "exactk": {"name": "exactk", "k": k, "shape": [H, W]},
             "rowk": {"name": "rowk", "k": k, "shape": [H, W]},
             "latin": {"name": "latin", "n": n}, "sudoku": {"name": "sudoku", "n": n}}
    spec = rule_from_spec(specs[rule]).spec()
    return spec


def _parse_shape(text):
    try:
        H, W = (int(t) for t in text.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"expected HxW such as 6x6, got {text!r}", param_hint="--shape")
    return H, W


def _train_options(fn):
    """One click option per TrainConfig field (except `rule`), defaults from the dataclass."""
    import dataclasses
    import inspect
    import re
    from scoreprobe.train import TrainConfig
    helps = dict(re.findall(r"^\s+(\w+): .*?# (.+)$", inspect.getsource(TrainConfig), re.M))  # field comments
    for f in reversed(dataclasses.fields(TrainConfig)):
        if f.name == "rule":
            continue
        default = f.default
        flag = "--" + f.name.replace("_", "-")
        if isinstance(default, bool):
            fn = click.option(flag + "/--no-" + flag[2:], default=default, show_default=True,
                              help=helps.get(f.name))(fn)
        else:
            typ = int if f.name in ("hidden_size", "depth", "num_heads") else type(default)
            fn = click.option(flag, type=typ, default=default, show_default=True, help=helps.get(f.name))(fn)
    return fn


@cli.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--rule", type=click.Choice(["parity", "exactk", "rowk", "latin", "sudoku"]), default="parity")
@click.option("--G", "G", type=int, default=2, help="Parity group size.")
@click.option("--k", type=int, default=3, help="Ones per image (exactk) or per row (rowk).")
@click.option("--n", type=int, default=4, help="Latin square / Sudoku size.")
@click.option("--layout", type=click.Choice(["contiguous", "offset", "random"]), default="random",
              help="Parity groups: consecutive pixels, the same shifted by one pixel, or a seeded permutation.")
@click.option("--rule-seed", type=int, default=0, help="Seed of the random parity layout.")
@click.option("--shape", default="6x6", help="Image shape HxW (parity, exactk, rowk).")
@click.option("--device", default="auto", help="cpu, cuda, cuda:1 or auto.")
@_train_options
def train(run_dir, rule, G, k, n, layout, rule_seed, shape, device, **settings):
    """Train a model and write log-spaced checkpoints to RUN_DIR (rerun the same command to resume)."""
    from scoreprobe.train import TrainConfig, train_run
    cfg = TrainConfig(rule=_rule_spec(rule, G, k, n, layout, rule_seed, shape), **settings)
    dev = resolve_device(device)
    click.echo(f"training {cfg.model} on {cfg.rule} (N={cfg.n_train}) for {cfg.total_steps} steps on {dev} -> {run_dir}")
    path = train_run(cfg, run_dir, device=dev)
    click.echo(f"done: {path}")


def resolve_device(device):
    """'auto' -> cuda when available else cpu; anything else is checked (see ode.resolve_device)."""
    from scoreprobe.ode import resolve_device as _resolve
    return str(_resolve(device))


# ---------------------------------------------------------------------------------------------
# clocks
# ---------------------------------------------------------------------------------------------

CLOCK_COLUMNS = (("step", "step", "{:>8d}"), ("rule_acc", "rule_acc", "{:>10.3f}"),
                 ("group_acc", "group_acc", "{:>10.3f}"), ("mem_ratio", "mem_ratio", "{:>10.3f}"),
                 ("heldout_ratio", "heldout", "{:>10.3f}"), ("novel_ratio", "novel", "{:>10.3f}"),
                 ("invalid_ratio", "invalid", "{:>10.3f}"))


def _parse_steps(text):
    """'all' -> None; '0,100,1000' -> [0, 100, 1000]."""
    if text is None or text == "all":
        return None
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"expected 'all' or comma-separated steps, got {text!r}", param_hint="--steps")


def _fmt_tau(value):
    import math
    return "never reached" if value is None or not math.isfinite(value) else f"{value:.0f}"


def _figure_path(ctx, param, value):
    """--plot callback: refuse, before any computing, a file type matplotlib cannot write."""
    import os
    from matplotlib.backend_bases import FigureCanvasBase
    ext = os.path.splitext(value or "")[1].lower().lstrip(".")
    types = FigureCanvasBase.get_supported_filetypes()
    if ext and ext not in types:
        raise click.BadParameter(f"cannot write a figure to {value!r}: use .{', .'.join(sorted(types))}")
    return value


def _save_figure(fig, path, dpi):
    import pathlib
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)


def _sweep_options(out, plot_help, chunk_help):
    """--steps, --out, --overwrite, --plot, --chunk-size, --device: the options clocks and dsm share."""
    options = (
        click.option("--steps", default="all", help="Checkpoints: all or S1,S2,..."),
        click.option("--out", type=click.Path(), default=out, help="Zarr store (resumable)."),
        click.option("--overwrite", is_flag=True, help="Replace an existing store at --out."),
        click.option("--plot", type=click.Path(dir_okay=False), default=None, callback=_figure_path, help=plot_help),
        click.option("--chunk-size", type=click.IntRange(min=1), default=None, help=chunk_help),
        click.option("--device", default="auto", help="cpu, cuda, cuda:1 or auto."),
    )

    def decorate(fn):
        for option in reversed(options):  # applied bottom-up, so --help lists them in this order
            fn = option(fn)
        return fn
    return decorate


@cli.command()
@click.argument("series", required=False, type=click.Path(exists=True, file_okay=False))
@click.option("--n-samples", type=click.IntRange(min=1), default=1000,
              help="Samples per checkpoint (fewer are faster but make the 0.9 threshold noisy).")
@click.option("--seed", type=int, default=0, help="Seed of the initial noise (the same at every step).")
@click.option("--n-steps", type=click.IntRange(min=1), default=18, help="Heun PF-ODE steps (DiT).")
@_sweep_options("clocks.zarr", "Write the clock and state figure here.", "ODE batch rows (memory bound).")
def clocks(series, n_samples, seed, n_steps, steps, out, overwrite, plot, chunk_size, device):
    """Rule accuracy and memorization at every checkpoint of SERIES (default: the shipped series),
    with τ_rule, τ_mem and the innovation window."""
    from scoreprobe.checkpoints import load_series
    from scoreprobe.probes.clocks import clocks as run_clocks
    s = load_series(series)
    dev = resolve_device(device)
    click.echo(f"clocks of {s.path} ({s.kind}, {len(s.steps)} checkpoints), {n_samples} samples, seed {seed}, on {dev}")
    ds = run_clocks(s, n_samples=n_samples, seed=seed, n_steps=n_steps, device=dev, steps=_parse_steps(steps),
                    out=out, overwrite=overwrite, chunk_size=chunk_size)
    click.echo("".join(f"{h:>10s}" if i else f"{h:>8s}" for i, (_, h, _) in enumerate(CLOCK_COLUMNS)))
    for i in range(ds.sizes["step"]):
        row = ds.isel(step=i)
        click.echo("".join(fmt.format(int(row[v]) if v == "step" else float(row[v])) for v, _, fmt in CLOCK_COLUMNS))
    a = ds.attrs
    click.echo(f"tau_rule = {_fmt_tau(a['tau_rule'])}   (rule_acc >= {a['rule_threshold']} held for "
               f"{a['hold']} more checkpoints)")
    click.echo(f"tau_mem  = {_fmt_tau(a['tau_mem'])}   (mem_ratio >= {a['mem_threshold']})")
    if a["window_open"]:
        click.echo(f"innovation window: open, [{_fmt_tau(a['window_lo'])}, {_fmt_tau(a['window_hi'])}]"
                   + ("" if a["log10_ratio"] is None or a["log10_ratio"] != a["log10_ratio"]
                      else f", log10(tau_mem/tau_rule) = {a['log10_ratio']:.2f}"))
    else:
        click.echo("innovation window: closed")
    if out is not None:
        click.echo(f"wrote {out}")
    if plot:
        _clocks_figure(ds, plot)
        click.echo(f"wrote {plot}")


def _clocks_figure(ds, path):
    from scoreprobe.viz import new_figure, plot_clocks, plot_states
    fig = new_figure((12, 4.2))
    ax1, ax2 = fig.subplots(1, 2)
    plot_clocks(ds, ax=ax1)
    plot_states(ds, ax=ax2)
    _save_figure(fig, path, dpi=120)


# ---------------------------------------------------------------------------------------------
# dsm
# ---------------------------------------------------------------------------------------------

@cli.command()
@click.argument("series", required=False, type=click.Path(exists=True, file_okay=False))
@click.option("--sigmas", type=click.IntRange(min=1), default=40, help="Log-spaced noise levels in [0.002, 80].")
@click.option("--n-noise", type=click.IntRange(min=1), default=8, help="Noise draws per item (shared by all).")
@click.option("--n-train", type=click.IntRange(min=0), default=None, help="Training items [default: all].")
@click.option("--n-heldout", type=click.IntRange(min=0), default=None,
              help="Held-out items [default: as many as training items].")
@click.option("--seed", type=int, default=0, help="Seed of the noise bank.")
@_sweep_options("dsm.zarr", "Write the loss and gap figure here.", "Denoiser rows per call (memory bound).")
def dsm(series, sigmas, n_noise, n_train, n_heldout, seed, steps, out, overwrite, plot, chunk_size, device):
    """DSM loss by σ for training vs held-out items at every checkpoint of SERIES (default: the
    shipped series), with the memorizer and rule-oracle references; prints the mean over σ in [0.2, 2]."""
    from scoreprobe.checkpoints import load_series
    from scoreprobe.probes.dsm import dsm_by_sigma
    s = load_series(series)
    dev = resolve_device(device)
    click.echo(f"DSM loss of {s.path} ({len(s.steps)} checkpoints), {sigmas} σ in [0.002, 80], "
               f"{n_noise} noise draws, seed {seed}, on {dev}")
    ds = dsm_by_sigma(s, sigmas=sigmas, n_noise=n_noise, n_train=n_train, n_heldout=n_heldout, seed=seed,
                      chunk_size=chunk_size, steps=_parse_steps(steps), out=out, overwrite=overwrite, device=dev)
    _dsm_table(ds)
    if out is not None:
        click.echo(f"wrote {out}")
    if plot:
        _dsm_figure(ds, plot)
        click.echo(f"wrote {plot}")


def _dsm_table(ds, band=(0.2, 2.0)):
    """Per step: mean train / held-out loss over σ in `band` and the gap; then the two oracles."""
    from scoreprobe.probes.dsm import dsm_summary
    n_tr, n_ho = int((ds.split == "train").sum()), int((ds.split == "heldout").sum())
    click.echo(f"mean DSM loss over σ in [{band[0]}, {band[1]}] ({n_tr} training / {n_ho} held-out items)")
    click.echo(f"{'step':>10s}{'train':>10s}{'heldout':>10s}{'gap':>10s}")
    summ = dsm_summary(ds, band)
    for i in range(summ.sizes.get("step", 1)):
        row = summ.isel(step=i) if "step" in summ.dims else summ
        label = f"{int(row.step):>10d}" if "step" in row.coords else f"{'model':>10s}"
        click.echo(label + "".join(f"{float(row[v]):>10.4f}" for v in ("train", "heldout")) + f"{float(row.gap):>+10.4f}")
    for var, name in (("mem_loss", "memorizer"), ("rule_loss", "rule")):
        if var in ds:
            ref = dsm_summary(ds, band, var=var)
            click.echo(f"{name:>10s}" + "".join(f"{float(ref[v]):>10.4f}" for v in ("train", "heldout"))
                       + f"{float(ref.gap):>+10.4f}")


def _dsm_figure(ds, path):
    from scoreprobe.viz import new_figure, plot_dsm, plot_dsm_gap
    multi = "step" in ds.dims and ds.sizes["step"] > 1
    fig = new_figure((12 if multi else 6.2, 4.4))
    axes = fig.subplots(1, 2 if multi else 1)
    plot_dsm(ds, ax=axes[0] if multi else axes)
    if multi:
        plot_dsm_gap(ds, ax=axes[1])
    _save_figure(fig, path, dpi=120)


# ---------------------------------------------------------------------------------------------
# info
# ---------------------------------------------------------------------------------------------

def _parse_settings(pairs):
    """('num_heads=6', 'image_shape=1,6,6') -> {'num_heads': 6, 'image_shape': [1, 6, 6]}."""
    out = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected NAME=VALUE, got {pair!r}", param_hint="--set")
        try:
            values = [float(t) if "." in t or "e" in t.lower() else int(t) for t in text.replace("x", ",").split(",")]
        except ValueError:
            raise click.BadParameter(f"{name}: expected numbers, got {text!r}", param_hint="--set")
        out[name.strip()] = values if name.strip() == "image_shape" else values[0]
    return out


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
    cfg = d["config"]
    yield "training", " ".join(f"{k}={cfg.get(k)}" for k in ("lr", "batch_size", "total_steps", "ema_decay",
                                                                "seed", "save_dtype"))
    if meta.get("versions"):
        yield "versions", " ".join(f"{k}={v}" for k, v in meta["versions"].items()) + (
            f" git={meta['git_commit'][:10]}" if meta.get("git_commit") else "")


def _info_file(path, trust, settings):
    from scoreprobe.checkpoints import describe_checkpoint
    d = describe_checkpoint(path, trust=trust, **settings)
    yield "path", d["path"]
    yield "format", d["format"]
    yield "model", d["kind"]
    if d["step"] is not None:
        yield "step", d["step"]
    shape = (d["arch"] or {}).get("image_shape")
    yield "image shape", "unknown" if shape is None else "x".join(map(str, shape))
    yield "architecture", _fmt_arch(d["arch"])
    yield "parameters", f"{d['n_params']:,}"
    if d["missing"]:
        yield "missing", (f"{', '.join(d['missing'])} (not stored in the file; "
                          f"pass --set {d['missing'][0]}=... to load it)")


@cli.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("--trust", is_flag=True, help="Allow pickles that run code when loaded (only files you trust).")
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="A setting the file does not store: num_heads, sigma_data, image_shape (C,H,W), time_scale.")
def info(path, trust, settings):
    """Describe a run directory or a single checkpoint file: rule, data, architecture, parameters, steps."""
    import os
    from scoreprobe.checkpoints import load_series
    settings = _parse_settings(settings)
    try:
        if os.path.isdir(path) and os.path.exists(os.path.join(path, "run.json")):
            rows = list(_info_series(load_series(path)))
        else:
            rows = list(_info_file(path, trust, settings))
    except ScoreprobeError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except Exception as e:  # a hostile or odd file must not print a traceback
        logging.getLogger(__name__).debug("info %s failed", path, exc_info=True)
        click.echo(f"error: could not read {path} ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}); "
                   "rerun as `scoreprobe -vv info ...` for details", err=True)
        sys.exit(2)
    for key, value in rows:
        click.echo(f"{key + ':':<14s}{value}")


# ---------------------------------------------------------------------------------------------
# basins, field, animate
# ---------------------------------------------------------------------------------------------

BASIN_COLUMNS = (("valid_memorized", "train"), ("valid_heldout", "held-out"), ("valid_novel", "novel"),
                 ("rule_violating", "violating"), ("invalid", "invalid"))


def _float_list(values, name):
    """('0.5,1', '2') -> [0.5, 1.0, 2.0]: repeated options and comma lists both work."""
    try:
        out = [float(t) for v in values for t in str(v).split(",") if t.strip()]
    except ValueError:
        raise click.BadParameter(f"expected numbers, got {values!r}", param_hint=name)
    if not out:
        raise click.BadParameter("give at least one value", param_hint=name)
    return out


def _plane_steps(text, series, n_auto=8):
    """--steps: 'all' -> every checkpoint, 'auto' -> about n_auto spread over the (log-spaced)
    checkpoints, first and last included, 'S1,S2,...' -> those."""
    import numpy as np
    steps = list(series.steps)
    if text == "all":
        return steps
    if text == "auto":
        idx = np.unique(np.round(np.linspace(0, len(steps) - 1, min(n_auto, len(steps)))).astype(int))
        return [steps[i] for i in idx]
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"expected all, auto or S1,S2,..., got {text!r}", param_hint="--steps")


def _basin_table(ds):
    """Lines of the per-step table: share of the plane flowing to each kind of endpoint."""
    lines = []
    for s0 in ds.sigma_start.values:
        d = ds.sel(sigma_start=s0)
        lines.append(f"sigma_start = {float(s0):g}: share of the plane flowing to")
        lines.append(f"{'step':>8s}" + "".join(f"{h:>11s}" for _, h in BASIN_COLUMNS))
        for i in range(d.sizes["step"]):
            row = d.isel(step=i).fraction
            lines.append(f"{int(d.step[i]):>8d}" + "".join(f"{float(row.sel(state=k)):>11.3f}" for k, _ in BASIN_COLUMNS))
    return lines


@cli.command()
@click.argument("series", required=False, type=click.Path(exists=True, file_okay=False))
@click.option("--plane", "plane_spec", default="auto", help="auto, or train:I,heldout:J,violating:K.")
@click.option("--sigma-start", multiple=True, default=("1.0",), help="Starting noise level(s); repeat or comma-separate.")
@click.option("--res", type=click.IntRange(min=2), default=24, help="Grid points per axis.")
@click.option("--n-steps", type=click.IntRange(min=1), default=10, help="Heun PF-ODE steps from sigma_start to 0.")
@click.option("--steps", default="auto", help="Checkpoints: auto (about 8), all, or S1,S2,...")
@click.option("--seed", type=int, default=0, help="Seed of the automatic plane choice.")
@click.option("--out", type=click.Path(), default="basins.zarr", help="Zarr store (resumable; reruns reuse it).")
@click.option("--overwrite", is_flag=True, help="Replace an existing store at --out.")
@click.option("--animate", "animate_path", type=click.Path(dir_okay=False), default="basins.gif",
              help="Animation over steps (.gif, or .mp4 with ffmpeg).")
@click.option("--no-animate", is_flag=True, help="Skip the animation.")
@click.option("--device", default="auto", help="cpu, cuda, cuda:1 or auto.")
def basins(series, plane_spec, sigma_start, res, n_steps, steps, seed, out, overwrite, animate_path, no_animate,
           device):
    """Basin maps of the PF-ODE on a plane through a training item, a nearby held-out item and a
    rule-violating vertex, at checkpoints of SERIES (default: the shipped series)."""
    import time
    from scoreprobe.checkpoints import load_series
    from scoreprobe.probes.basins import basins as run_basins
    from scoreprobe.slices import plane_from_spec
    from scoreprobe.viz import animate_basins
    t0 = time.perf_counter()
    animate_path = None if no_animate else animate_path
    if animate_path and not animate_path.lower().endswith((".gif", ".mp4")):  # fail before computing
        raise click.BadParameter(f"use a .gif or .mp4 file name, got {animate_path!r}", param_hint="--animate")
    s = load_series(series)
    dev = resolve_device(device)
    plane = plane_from_spec(plane_spec, s.dataset, s.rule, seed=seed)
    chosen = _plane_steps(steps, s)
    sig = _float_list(sigma_start, "--sigma-start")
    if overwrite and out:
        from scoreprobe.store import prepare_store
        prepare_store(out, None, overwrite=True)
    click.echo(f"basins of {s.path}: {len(chosen)} of {len(s.steps)} checkpoints, plane {', '.join(plane.labels)}, "
               f"{res}x{res} grid, sigma_start {sig}, {n_steps} Heun steps, on {dev}")
    ds = run_basins(s, plane, sigma_start=sig, res=res, n_steps=n_steps, steps=chosen, out=out or None, device=dev)
    for line in _basin_table(ds):
        click.echo(line)
    if out:
        click.echo(f"wrote {out}")
    if animate_path:
        click.echo(f"wrote {animate_basins(ds, animate_path, sigma_start=sig[0])}")
    click.echo(f"done in {time.perf_counter() - t0:.1f} s")


@cli.command()
@click.argument("series", required=False, type=click.Path(exists=True, file_okay=False))
@click.option("--plane", "plane_spec", default="auto", help="auto, or train:I,heldout:J,violating:K.")
@click.option("--sigma", multiple=True, default=("0.3", "1.0"), help="Noise level(s); repeat or comma-separate.")
@click.option("--res", type=click.IntRange(min=2), default=32, help="Grid points per axis.")
@click.option("--steps", default="auto", help="Checkpoints: auto (about 8), all, or S1,S2,...")
@click.option("--seed", type=int, default=0, help="Seed of the automatic plane choice.")
@click.option("--oracles/--no-oracles", default=True, help="Also the memorizer's and the rule oracle's fields.")
@click.option("--out", type=click.Path(), default="field.zarr", help="Zarr store (model fields; resumable).")
@click.option("--overwrite", is_flag=True, help="Replace an existing store at --out.")
@click.option("--plot", type=click.Path(dir_okay=False), default="field.png", callback=_figure_path,
              help="Figure at the last step.")
@click.option("--device", default="auto", help="cpu, cuda, cuda:1 or auto.")
def field(series, plane_spec, sigma, res, steps, seed, oracles, out, overwrite, plot, device):
    """Score field on a plane at checkpoints of SERIES (default: the shipped series), next to the
    memorizer's and the rule oracle's."""
    from scoreprobe.checkpoints import load_series
    from scoreprobe.probes.field import score_field
    from scoreprobe.slices import plane_from_spec
    s = load_series(series)
    dev = resolve_device(device)
    plane = plane_from_spec(plane_spec, s.dataset, s.rule, seed=seed)
    sig = _float_list(sigma, "--sigma")
    if overwrite and out:
        from scoreprobe.store import prepare_store
        prepare_store(out, None, overwrite=True)
    chosen = _plane_steps(steps, s)
    click.echo(f"score field of {s.path}: {len(chosen)} checkpoints, plane {', '.join(plane.labels)}, "
               f"{res}x{res} grid, sigma {sig}, on {dev}")
    ds = score_field(s, plane, sig, res=res, oracles=oracles, steps=chosen, out=out or None, device=dev)
    click.echo(f"{'step':>8s}{'sigma':>8s}{'mean|s_uv|':>12s}{'mean|s_off|':>13s}")
    for st in ds.step.values:
        for sg in ds.sigma.values:
            d = ds.sel(step=st, sigma=sg)
            uv = float(((d.score_u ** 2 + d.score_v ** 2) ** 0.5).mean())
            click.echo(f"{int(st):>8d}{float(sg):>8.3g}{uv:>12.3f}{float(d.score_off_norm.mean()):>13.3f}")
    if out:
        click.echo(f"wrote {out}")
    if plot:
        _field_figure(ds, sig[0], oracles, plot)
        click.echo(f"wrote {plot}")


def _field_figure(ds, sigma, oracles, path):
    from scoreprobe.viz import new_figure, plot_field
    prefixes = ("", "mem_", "rule_") if oracles else ("",)
    fig = new_figure((5.2 * len(prefixes), 4.4))
    axes = fig.subplots(1, len(prefixes), squeeze=False)[0]
    for ax, prefix in zip(axes, prefixes):
        plot_field(ds, sigma=sigma, prefix=prefix, ax=ax)
    _save_figure(fig, path, dpi=110)


@cli.command()
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), default="basins.gif", help="Output .gif or .mp4.")
@click.option("--fps", type=click.FloatRange(min=0, min_open=True), default=4.0, help="Frames per second.")
@click.option("--sigma-start", type=float, default=None, help="Which starting noise level (default: the middle one).")
def animate(store, out, fps, sigma_start):
    """Animate a basins STORE (written by `scoreprobe basins --out`) over training steps."""
    from scoreprobe.viz import animate_basins
    click.echo(f"wrote {animate_basins(store, out, fps=fps, sigma_start=sigma_start)}")
