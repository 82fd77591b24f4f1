"""The `scoreprobe` click group: global options (-v, -q) that the subcommand modules register on."""
import logging
import sys

import click

from scoreprobe import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option("-v", "--verbose", count=True, help="Debug log output (also accepted after the subcommand).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors (also accepted after the subcommand).")
@click.version_option(__version__, "--version", prog_name="scoreprobe", message="%(prog)s %(version)s")
def cli(verbose, quiet):
    """scoreprobe: dissect when a diffusion model learns the rule and when it memorizes."""
    level = logging.WARNING if quiet else (logging.DEBUG if verbose else logging.INFO)
    if quiet:   # no progress bars or lines either, for this invocation only
        from scoreprobe import progress
        saved, progress.DEFAULT = progress.DEFAULT, False
        click.get_current_context().call_on_close(lambda: setattr(progress, "DEFAULT", saved))
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
