"""Command-line interface: `scoreprobe SUBCOMMAND`. The only package that prints.

Each subcommand is a thin wrapper over a library function; typed errors
(`scoreprobe.errors`) become one line on stderr and exit code 2. The entry point lives here,
the group in `app.py`; the subcommands, one module per family, register themselves on it when
this package imports them:

    runs.py    train                    (making checkpoint series)
    info.py    info                     (what a checkpoint, folder or run directory holds)
    curves.py  clocks, dsm              (one number per checkpoint, σ or sample)
    planes.py  basins, field, animate   (2D planes through hypercube vertices)
    report.py  report                   (one HTML page about a series)
    compare.py compare, export-tb       (several runs side by side; as TensorBoard scalars)
    samples.py samples                  (a gallery of one checkpoint's samples)
    decompose.py decompose              (the network against the exact oracles)
    circuits.py circuits                (activation patching per checkpoint: where the rule and the copies live)
"""
import os
import signal
import sys
import threading
import warnings

import click

from scoreprobe.cli.app import cli
from scoreprobe.errors import ScoreprobeError


# Settings a file does not store: `name=` in the API, `--set name=` on the command line.
FILE_SETTINGS = ("parameterization", "schedule", "num_timesteps", "class_label", "num_classes", "ema", "num_heads",
                 "sigma_data", "time_scale", "image_shape")
_CLI_PHRASES = [
    (r"\b([Pp]ass|or|and) rule=(?!\w)", r"\1 --rule"),
    (r"\b([Pp]ass|or|and) dataset=(?!\w)", r"\1 --dataset"),
    (r"\b([Pp]ass|or|and) overwrite=True", r"\1 --overwrite"),
    (r"\bwith overwrite=True", "with --overwrite"),
    (r"\banother out=", "another --out"),
    (r"\bwith out='([^']*)'", r"with --out \1"),
    (r"\b([Pp]ass|or|and) image_shape=\(C, H, W\)", r"\1 --set image_shape=C,H,W"),
    (r"\b([Pp]ass|or|and) ema=(False|'auto')", lambda m: f"{m[1]} --set ema={m[2].strip(chr(39)).lower()}"),
    (rf"\b([Pp]ass|or|and) \(?({'|'.join(FILE_SETTINGS)})=", r"\1 --set \2="),
    (r"\b([Pp]ass|or|and) (n_samples|seed)=(\w+)", lambda m: f"{m[1]} --{m[2].replace('_', '-')} {m[3]}"),
]


def cli_phrasing(text):
    """A library message as CLI users read it: API hints ('pass rule=', 'pass time_scale=...') name the
    options that do the same ('pass --rule', 'pass --set time_scale=...')."""
    import re
    for pattern, replacement in _CLI_PHRASES:
        text = re.sub(pattern, replacement, text)
    return text


def _format_warning(message, category, filename, lineno, line=None):
    """Warnings reach CLI users as one line on stderr: 'warning: <Category>: <message>'."""
    return f"warning: {category.__name__}: {cli_phrasing(str(message))}\n"


INTERRUPTED = "interrupted; everything written so far is kept."


class _Interrupts:
    """Ctrl-C for one `main()` call: the first SIGINT raises KeyboardInterrupt (so `finally` blocks
    and store clean-ups run), a second one while those run leaves at once. `leave()` prints the
    one line, silences worker-thread tracebacks and exits 130; as the console script (`hard`) it
    ends the process without the interpreter's shutdown, where thread pools still being joined or
    fed print tracebacks ("cannot schedule new futures after shutdown")."""

    def __init__(self, hard):
        self.hard, self.seen, self.old, self.old_hook = hard, False, None, None

    def install(self):
        """Take over SIGINT, unless it is ignored (a background job) or this is not the main thread."""
        try:
            if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
                self.old = signal.signal(signal.SIGINT, self._handler)
        except ValueError:  # not the main thread (embedded use): keep Python's default
            self.old = None
        if self.old is not None:
            self.old_hook, sys.unraisablehook = sys.unraisablehook, self._unraisable

    def restore(self):
        """Put back the SIGINT handler and the unraisable hook found by `install`."""
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)
        if self.old_hook is not None and sys.unraisablehook == self._unraisable:
            sys.unraisablehook = self.old_hook

    def _unraisable(self, unraisable):
        """A KeyboardInterrupt Python could not raise (the SIGINT came while a finalizer or a callback
        ran: 'Exception ignored in ...', and the work went on): sent again, as a real SIGINT to the main
        thread (so it also wakes a blocking call there; a process-wide kill may land on the sending thread
        and leave a sleep running), from a thread, a moment later, once the finalizer has returned."""
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            self.seen = False
            resend = threading.Timer(0.01, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
            resend.daemon = True   # a command that ends first is not interrupted at exit
            resend.start()
            return
        self.old_hook(unraisable)

    def _handler(self, signum, frame):
        if self.seen:
            self.leave()
        self.seen = True
        raise KeyboardInterrupt

    def leave(self):
        """Print the one line and exit 130 (os._exit as the console script, else SystemExit)."""
        self.seen = True
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:
            pass
        if self.hard:   # the process ends here: worker threads stopped mid-way must not print
            threading.excepthook = lambda args: None
            sys.unraisablehook = lambda unraisable: None
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # a closed pipe must not turn the exit into a traceback
                pass
        try:
            sys.stderr.write(INTERRUPTED + "\n")
            sys.stderr.flush()
        except Exception:
            pass
        if self.hard:
            os._exit(130)
        raise SystemExit(130)


def _usage_error(e):
    """A click usage error as `error: <message>` plus one hint line; exit 2."""
    if type(e).__name__ == "NoArgsIsHelpError":   # bare `scoreprobe`: click's help text, as click shows it
        e.show()
        sys.exit(e.exit_code)
    message = " ".join(e.format_message().split())
    click.echo(f"error: {message}", err=True)
    if e.ctx is not None:
        click.echo(f"try '{e.ctx.command_path} --help'", err=True)
    sys.exit(2)


GLOBAL_FLAGS = {"-q", "--quiet", "-v", "--verbose"}


def global_flags_first(args):
    """`-q`/`-v` (also `-vv`) anywhere before a `--`: moved in front of the subcommand, where the
    group parses them, so `scoreprobe clocks RUN -q` works as `scoreprobe -q clocks RUN` does."""
    args = list(args)
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if a in GLOBAL_FLAGS or (len(a) > 2 and a[0] == "-" and set(a[1:]) == {"v"})]
    rest = [a for a in args[:end] if a not in flags]
    return flags + rest + args[end:]


def _invoke(argv):
    """Parse and run the group without click's own Ctrl-C and error handling (done by `main`)."""
    args = global_flags_first(sys.argv[1:] if argv is None else argv)
    nul = next((a for a in args if isinstance(a, str) and "\0" in a), None)
    if nul is not None:   # (only from Python: no shell passes one) click's path checks would raise ValueError
        raise click.UsageError(f"the argument {nul[:60]!r} contains a NUL byte, which no file name can hold")
    if hasattr(cli, "_main_shell_completion"):   # what click's own main() does first (_SCOREPROBE_COMPLETE)
        cli._main_shell_completion({}, "scoreprobe", None)
    try:
        with cli.make_context("scoreprobe", args) as ctx:
            return cli.invoke(ctx)
    except click.exceptions.Exit as e:
        return e.exit_code


def _run(argv, interrupts):
    """`_invoke`, mapping usage errors, typed errors and Ctrl-C to one line each."""
    try:
        return _invoke(argv)
    except (KeyboardInterrupt, click.exceptions.Abort):
        interrupts.leave()
    except click.UsageError as e:
        _usage_error(e)
    except click.ClickException as e:
        click.echo(f"error: {' '.join(e.format_message().split())}", err=True)
        sys.exit(e.exit_code)
    except ScoreprobeError as e:
        click.echo(f"error: {cli_phrasing(' '.join(str(e).split()))}", err=True)
        sys.exit(2)
    except BrokenPipeError:   # `scoreprobe ... | head`: quiet, as click's own main() is
        sys.stdout = click.utils.PacifyFlushWrapper(sys.stdout)
        sys.stderr = click.utils.PacifyFlushWrapper(sys.stderr)
        sys.exit(1)
    except Exception as e:
        if isinstance(e, OSError):
            _full_disk(e)
        if interrupts.seen:   # an error raised by the interruption itself (thread pool shut down...)
            interrupts.leave()
        raise


def _full_disk(e):
    """A full disk or quota (ENOSPC, EDQUOT) while writing, from any command: one line, exit 2 (the file
    writers of scoreprobe.atomic have left the file being written as it was); other OSErrors return."""
    import errno
    from scoreprobe.atomic import FULL_DISK
    if e.errno in FULL_DISK:
        what = "no space left on device" if e.errno == errno.ENOSPC else "disk quota exceeded"
        where = f" writing {e.filename}" if e.filename else ""
        click.echo(f"error: {what}{where}", err=True)
        sys.exit(2)


def main(argv=None):
    """Console entry point: runs the click group; a usage error or a typed error is one line (plus
    a hint for usage errors) and exit code 2, Ctrl-C is one line and exit code 130. With `argv`
    given (tests, embedding) an interrupt raises SystemExit(130) instead of ending the process."""
    interrupts = _Interrupts(hard=argv is None)
    interrupts.install()
    format_warning, warnings.formatwarning = warnings.formatwarning, _format_warning
    try:
        try:
            return _run(argv, interrupts)
        except KeyboardInterrupt:   # Ctrl-C while an error line was being written
            interrupts.leave()
    finally:
        warnings.formatwarning = format_warning
        interrupts.restore()


from scoreprobe.cli import (circuits, compare, curves, decompose, info, planes, report, runs,  # noqa: E402,F401
                            samples)                                     # (registers the subcommands)
