"""Command-line interface: `scoreprobe SUBCOMMAND`. The only package that prints.

Each subcommand is a thin wrapper over a library function; typed errors
(`scoreprobe.errors`) become one line on stderr and exit code 2. The group and the entry point
live here; the subcommands, one module per family, register themselves on import:

    runs.py    train, info              (making and describing checkpoint series)
    curves.py  clocks, dsm              (one number per checkpoint, σ or sample)
    planes.py  basins, field, animate   (2D planes through hypercube vertices)
"""
import logging
import sys
import warnings

import click

from scoreprobe.errors import ScoreprobeError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option("-v", "--verbose", count=True, help="Debug log output.")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
def cli(verbose, quiet):
    """scoreprobe: dissect when a diffusion model learns the rule and when it memorizes."""
    level = logging.WARNING if quiet else (logging.DEBUG if verbose else logging.INFO)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def _format_warning(message, category, filename, lineno, line=None):
    """Warnings reach CLI users as one line on stderr: 'warning: <Category>: <message>'."""
    return f"warning: {category.__name__}: {message}\n"


def main(argv=None):
    """Console entry point: runs the click group, mapping typed errors to exit code 2."""
    format_warning, warnings.formatwarning = warnings.formatwarning, _format_warning
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
    finally:
        warnings.formatwarning = format_warning


from scoreprobe.cli import curves, planes, runs  # noqa: E402,F401  (registers the subcommands)
