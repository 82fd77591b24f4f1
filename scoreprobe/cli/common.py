"""Option parsing and figure helpers shared by the subcommands."""
import click

from scoreprobe.limits import MAX_ODE_STEPS, MAX_SEED

SEED = click.IntRange(0, MAX_SEED)  # every --seed: no negative seeds, none that would wrap past 2**64 - 1
ODE_STEPS = click.IntRange(1, MAX_ODE_STEPS)   # every --n-steps (scoreprobe.limits)


def resolve_device(device):
    """'auto' -> cuda when available else cpu; anything else is checked (see ode.resolve_device)."""
    from scoreprobe.ode import resolve_device as _resolve
    return str(_resolve(device))


def device_checked(ctx, param, value):
    """--device callback: an unknown or unavailable device is a usage error, found before any work."""
    from scoreprobe.errors import ConfigError
    try:
        return resolve_device(value)
    except ConfigError as e:
        raise click.BadParameter(str(e)) from None


def device_option():
    """The --device option every computing subcommand shares (checked when parsed)."""
    return click.option("--device", default="auto", callback=device_checked, help="cpu, cuda, cuda:1 or auto.")


def check_writable(path, param_hint, store=False):
    """Refuse, before any computing or deleting, an output whose folder cannot be written.

    The nearest existing folder above `path` must be a directory that takes a new file (tried:
    missing folders below it are created when writing); `path` itself, when it exists, must be
    writable too, and a folder when it is to hold a zarr `store`."""
    import os
    if not path:
        return
    target = os.path.abspath(os.fspath(path))
    if store and os.path.exists(target) and not os.path.isdir(target):
        raise click.BadParameter(f"cannot write a zarr store to {path}: it is a file, not a folder",
                                 param_hint=param_hint)
    parent = os.path.dirname(target)
    while not os.path.exists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise click.BadParameter(f"cannot write {path}: {parent} is not a directory", param_hint=param_hint)
    if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(target) and not os.access(target, os.W_OK)):
        raise click.BadParameter(f"cannot write {path}: permission denied", param_hint=param_hint)
    from scoreprobe.store.lock import cannot_create
    why = cannot_create(parent)   # /proc, a read-only mount, a full disk: the permission bits do not tell
    if why:
        raise click.BadParameter(f"cannot write {path}: {parent} does not take new files ({why})",
                                 param_hint=param_hint)


def check_figure(path, param_hint):
    """`check_writable` for a figure or an animation, and one warning line on stderr when `path`
    exists already: it is replaced (stores resume; figures are redrawn, so they are not refused)."""
    import os
    check_writable(path, param_hint)
    if path and os.path.isfile(path):
        click.echo(f"warning: {param_hint} {path} exists and will be replaced", err=True)


def parse_steps(text, words=("all",)):
    """'all' -> None; '0,100,1000' -> [0, 100, 1000]; any other word in `words` is returned as is."""
    if text is None or text == "all":
        return None
    if text in words:
        return text
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"expected {', '.join(words)} or comma-separated steps S1,S2,..., got {text!r}",
                                 param_hint="--steps")


def choose_steps(text, series, n_auto=8):
    """--steps: 'all' -> every checkpoint, 'auto' -> about n_auto spread over the (log-spaced)
    checkpoints, first and last included, 'S1,S2,...' -> those."""
    import numpy as np
    steps = list(series.steps)
    chosen = parse_steps(text, words=("all", "auto"))
    if chosen is None:
        return steps
    if chosen == "auto":
        idx = np.unique(np.round(np.linspace(0, len(steps) - 1, min(n_auto, len(steps)))).astype(int))
        return [steps[i] for i in idx]
    from scoreprobe.sweep import select_steps
    select_steps([(s, None) for s in steps], chosen)   # ConfigError for an empty or unknown choice, before any output
    return chosen


def with_stored(chosen, text, series, reused):
    """--steps auto over a store that already holds other checkpoints of the series (an earlier --steps choice, or
    the auto choice before the run was extended): those are measured already and stay in the table."""
    if parse_steps(text, words=("all", "auto")) != "auto" or not reused:
        return chosen
    return sorted(set(chosen) | (set(reused) & set(series.steps)))


def figure_path(ctx, param, value):
    """--plot callback: refuse, before any computing, a file type matplotlib cannot write."""
    import os
    from matplotlib.backend_bases import FigureCanvasBase
    ext = os.path.splitext(value or "")[1].lower().lstrip(".")
    types = FigureCanvasBase.get_supported_filetypes()
    if ext and ext not in types:
        raise click.BadParameter(f"cannot write a figure to {value!r}: use .{', .'.join(sorted(types))}")
    return value


DEFAULT_FIGURE = "\0default"   # a bare --plot's value (no file name holds a NUL: no user's name is taken for it)


def plot_option(help_text, default_name):
    """--plot [FILE]: alone it writes the command's default figure (`default_name`, e.g.
    '<source>.clocks.png'), with a name that file; checked before any computing (`plot_checked`)."""
    return click.option("--plot", metavar="[FILE]", type=str, is_flag=False, flag_value=DEFAULT_FIGURE, default=None,
                        callback=plot_checked, help=f"{help_text} --plot alone writes {default_name}; --plot FILE "
                                                    "names it.")


def plot_checked(ctx, param, value):
    """--plot callback: a bare --plot passes; a folder (a run directory taken for the file name, as in
    `--plot RUN`) or a file type matplotlib cannot write is a usage error naming both forms."""
    import os
    if value is None or value == DEFAULT_FIGURE:
        return value
    hint = ("--plot alone writes the default figure (give it after SOURCES or before another option), "
            "--plot F.png names one")
    if os.path.isdir(value):
        raise click.BadParameter(f"{value} is a folder, not a figure file; {hint}")
    try:
        return figure_path(ctx, param, value)
    except click.BadParameter as e:
        raise click.BadParameter(f"{e.message}; {hint}") from None


def plot_file(plot, series, name):
    """The figure path of --plot: None (not asked), the default `<source>.<name>` of a bare --plot
    (`default_output`; `name` alone with series=None), or the file given."""
    if plot != DEFAULT_FIGURE:
        return plot
    return name if series is None else default_output(series, name)


def save_figure(fig, path, dpi):
    """Write `fig` to `path` atomically (viz.common.save_figure): an OSError (a full disk) is one line, exit 2,
    and leaves an existing file as it was."""
    import pathlib
    from scoreprobe.viz.common import save_figure as write
    with output_file(path):
        pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
        write(fig, path, dpi)


class OutputError(click.ClickException):
    """An output file could not be written after the work was done (one line, exit 2)."""
    exit_code = 2


def output_file(path):
    """Context in which an OSError writing the figure or animation `path` (a full disk, /dev/full,
    a folder turned read-only) is one line, exit 2; the store, written before, is kept."""
    import contextlib

    @contextlib.contextmanager
    def guard():
        try:
            yield
        except OSError as e:
            raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
    return guard()


def sweep_options(out, plot_help, chunk_help):
    """--steps, --out, --overwrite, --plot, --chunk-size, --device, --scheduler, --dask-local: the
    options clocks and dsm share."""
    options = (
        click.option("--steps", default="auto", help="Checkpoints: auto (about 8, log-spread), all, or S1,S2,..."),
        click.option("--out", type=click.Path(), default=None,
                     help=f"Zarr store (resumable) [default: <source>.{out}, named after the run; {out} for the "
                          "shipped series]."),
        click.option("--overwrite", is_flag=True, help="Replace an existing store at --out."),
        plot_option(plot_help, f"<source>.{out.removesuffix('.zarr')}.png ({out.removesuffix('.zarr')}.png for the "
                               "shipped series)"),
        click.option("--chunk-size", type=click.IntRange(min=1), default=None, help=chunk_help),
        device_option(),
        scheduler_options,
    )

    def decorate(fn):
        for option in reversed(options):  # applied bottom-up, so --help lists them in this order
            fn = option(fn)
        return fn
    return decorate


def scheduler_options(fn):
    """--scheduler ADDRESS and --dask-local N (one task per checkpoint on a dask cluster; this process
    writes the store); the command turns them into the library's scheduler= with `scheduler_of`."""
    fn = click.option("--dask-local", type=click.IntRange(1, 256), default=None, metavar="N",
                      help="Start a local dask cluster of N worker processes and compute one checkpoint per task "
                           "on it (needs pip install -e '.[dask]').")(fn)
    return click.option("--scheduler", default=None, metavar="ADDRESS",
                        help="Compute one checkpoint per task on the dask.distributed scheduler at ADDRESS "
                             "(tcp://HOST:PORT; workers read the checkpoints at the same paths); the store is "
                             "written here and equals a local run's.")(fn)


def scheduler_of(address, n_local):
    """The library's scheduler= for --scheduler / --dask-local (None: run here), checked before any
    work: both at once or a malformed address is a usage error, missing dask a ConfigError (one line)."""
    if address is None and n_local is None:
        return None
    if address is not None and n_local is not None:
        raise click.UsageError("use either --scheduler or --dask-local, not both")
    from scoreprobe.sweep.dask import check_scheduler, require_dask
    from scoreprobe.errors import ConfigError
    require_dask()
    try:
        return check_scheduler(address if n_local is None else ("local", n_local))
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint="--scheduler") from None


def on_scheduler(scheduler):
    """Context in which the library's sweeps run on `scheduler` (from `scheduler_of`; None: here)."""
    if scheduler is None:
        import contextlib
        return contextlib.nullcontext()
    from scoreprobe.sweep.dask import using
    return using(scheduler)


def float_list(values, name):
    """('0.5,1', '2') -> [0.5, 1.0, 2.0]: repeated options and comma lists both work."""
    try:
        out = [float(t) for v in values for t in str(v).split(",") if t.strip()]
    except ValueError:
        raise click.BadParameter(f"expected numbers, got {values!r}", param_hint=name)
    if not out:
        raise click.BadParameter("give at least one value", param_hint=name)
    return out


def _frame_size(ctx, param, value):
    """--size callback: 'W,H' (inches) -> (float, float)."""
    try:
        w, h = (float(t) for t in value.lower().replace("x", ",").split(","))
    except ValueError:
        raise click.BadParameter(f"expected W,H in inches such as 6.2,4.4, got {value!r}") from None
    return w, h


def animation_options(fn):
    """--dpi and --size of an animation's frames (checked together when the command starts)."""
    from scoreprobe.defaults import ANIMATION_DPI, ANIMATION_SIZE
    fn = click.option("--size", "frame_size", default=",".join(f"{v:g}" for v in ANIMATION_SIZE), callback=_frame_size,
                      metavar="W,H", help="Animation frame size in inches (text keeps its size: larger frames give "
                                          "the map more room).")(fn)
    return click.option("--dpi", type=float, default=ANIMATION_DPI,
                        help="Animation pixels per inch (the default frame is 992x704 px).")(fn)


def check_frame(dpi, frame_size):
    """--dpi with --size: a usage error before any computing when the frame is impossible or too large."""
    from scoreprobe.errors import ConfigError
    from scoreprobe.viz.animation import check_frame as check
    try:
        check(dpi, frame_size)
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint="--dpi/--size") from None


def steps_in_store(out, overwrite):
    """Steps already in the store at `out` that a run will reuse (empty with --overwrite, for a new
    store, or when the store cannot be read: the writer reports that itself)."""
    if not out or overwrite:
        return set()
    from scoreprobe.errors import ScoreprobeError
    from scoreprobe.store import written_steps
    try:
        return set(written_steps(out))
    except (ScoreprobeError, OSError, ValueError):
        return set()


def store_line(out, chosen, reused):
    """'wrote OUT (8 steps)' or, on a resumed run, what was computed and what was reused."""
    chosen = list(chosen)
    kept = [s for s in chosen if s in reused]
    if not kept:
        return f"wrote {out} ({len(chosen)} steps)"
    if len(kept) == len(chosen):
        return f"{out}: all {len(chosen)} steps were already written; reused them, computed nothing"
    return f"wrote {out}: computed {len(chosen) - len(kept)} steps, reused {len(kept)} written by an earlier run"


def autocast_option():
    """--autocast of the commands whose probe evaluates a network many times (basins, field, clocks)."""
    return click.option("--autocast", type=click.Choice(["bf16", "fp16"]), default=None,
                        help="Evaluate the network's matrix products in bf16 or fp16 (torch.autocast); the ODE "
                             "stays float32. Faster on GPUs (and on CPUs with bf16 units); endpoints agree with "
                             "float32 on >= 99% of a grid on the shipped series (bench/bench_basins.py --bf16). "
                             "A store written with it is a different analysis from one without.")


def models_per_pass_option():
    """--models-per-pass of the commands whose probe takes stacked checkpoints (basins, field, clocks, dsm)."""
    def parse(ctx, param, value):
        if value == "auto":
            return value
        try:
            k = int(value)
        except ValueError:
            k = 0
        if k < 1:
            raise click.BadParameter(f"expected a positive integer or auto, got {value!r}")
        return k
    return click.option("--models-per-pass", default="1", callback=parse, metavar="K|auto",
                        help="Checkpoints evaluated together as one stacked network (faster on a GPU; auto: "
                             "from free GPU memory, 1 on CPU). Results do not depend on it.")


def solver_options(fn):
    """--solver and --tol of the commands that integrate the PF-ODE (basins, clocks)."""
    from scoreprobe.defaults import DEFAULT_SOLVER
    fn = click.option("--tol", type=click.FloatRange(min=0, min_open=True), default=None,
                      help="rtol = atol of the adaptive engine (default: engine.EngineSettings, "
                           "docs/definitions.md 'The adaptive engine').")(fn)
    return click.option("--solver", type=click.Choice(["adaptive", "heun", "euler"]), default=DEFAULT_SOLVER,
                        help="adaptive: per-row adaptive steps and early decision (the default); heun / euler: "
                             "the fixed EDM grid of --n-steps.")(fn)


def solver_of(solver, tol):
    """--solver/--tol -> the solver= of the probes ("heun", "euler", or engine settings)."""
    if tol is None:
        return solver
    if solver != "adaptive":
        raise click.BadParameter("--tol applies to --solver adaptive only", param_hint="--tol")
    from scoreprobe.ode.engine import EngineSettings
    return EngineSettings(rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------------
# Default output names: they carry the source's name, so two runs analysed in one folder do not collide
# ---------------------------------------------------------------------------------------------

def source_stem(series):
    """The name default outputs of `series` start with (`scoreprobe.sweep.outputs`, the one rule): '' for the
    shipped series (its outputs keep the plain names, basins.zarr ...), else the run directory's name,
    for checkpoint files their folder's (the run above a checkpoints/ or ckpt/ folder), for --denoiser
    FILE.py:FN 'FILE-FN'; characters other than letters, digits and . _ + - become '-'."""
    import re
    from pathlib import Path
    from scoreprobe.sweep.outputs import output_stem
    config = getattr(series, "config", None) or {}
    if "denoiser" not in config:
        return output_stem(getattr(series, "path", ""))
    where, _, name = str(config["denoiser"]).rpartition(":")
    text = f"{Path(where).stem if where.endswith('.py') else where}-{name}"
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-.")[:80]


def require_denoiser(series, command):
    """A ConfigError (one line, exit 2), before the command prints anything, when `command` needs a denoiser
    D(x, σ) and `series` is a GPT run, which has none."""
    if getattr(series, "kind", None) == "gpt":
        from scoreprobe.errors import ConfigError
        raise ConfigError(f"{command} needs a diffusion model's denoiser D(x, σ), and {series.path} is a GPT run "
                          "(autoregressive: no noise level, no PF-ODE); for a GPT run use clocks, samples, report, "
                          "compare, export-tb or plot-log")


def default_output(series, name, given=None):
    """`given` when the user named the output (None: not named), else `<source>.<name>`, or `name` for
    the shipped series (`source_stem`)."""
    if given is not None:
        return given
    stem = source_stem(series)
    return f"{stem}.{name}" if stem else name
