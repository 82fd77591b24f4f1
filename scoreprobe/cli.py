"""Command-line interface: `scoreprobe SUBCOMMAND`. The only module that prints.

Each subcommand is a thin wrapper over a library function; typed errors
(`scoreprobe.errors`) become one line on stderr and exit code 2.
"""
import logging
import sys

import click

from scoreprobe.errors import ScoreprobeError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
def cli(verbose, quiet):
    """scoreprobe: dissect when a diffusion model learns the rule and when it memorizes."""
    level = logging.WARNING if quiet else (logging.INFO if verbose <= 1 else logging.DEBUG)
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
