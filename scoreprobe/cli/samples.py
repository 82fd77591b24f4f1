"""`scoreprobe samples`: a gallery of one checkpoint's samples as pixel grids, with their states."""
import click

from scoreprobe.cli.app import cli
from scoreprobe.cli.common import ODE_STEPS, SEED, check_figure, device_option, figure_path, save_figure
from scoreprobe.cli.source import source_options
from scoreprobe.defaults import DEFAULT_N_STEPS

MAX_GALLERY = 256


@cli.command()
@click.option("--step", type=click.IntRange(0), default=None, help="Checkpoint step [default: the last].")
@click.option("--n-samples", type=click.IntRange(1, MAX_GALLERY), default=32, help="Samples drawn.")
@click.option("--seed", type=SEED, default=0, help="Seed of the initial noise (as for clocks: the same samples).")
@click.option("--n-steps", type=ODE_STEPS, default=DEFAULT_N_STEPS, help="Sampler steps (DiT).")
@click.option("--ncols", type=click.IntRange(1, 64), default=8, help="Panels per row.")
@click.option("--out", default="samples.png", type=click.Path(dir_okay=False), callback=figure_path,
              help="Figure file.")
@device_option()
@source_options
def samples(source, step, n_samples, seed, n_steps, ncols, out, device):
    """A gallery of the samples of one checkpoint of SOURCES (default: the shipped series): each as
    its pixel grid (puzzles as symbols), titled with its state (copy of training item #i, held-out,
    novel, violating, invalid), the rule's groups outlined and violated groups tinted red. The samples
    are the first --n-samples of `scoreprobe clocks` with the same --seed."""
    from collections import Counter

    from scoreprobe.data.datasets import STATES
    from scoreprobe.errors import ConfigError
    from scoreprobe.probes.clocks import gallery_samples
    check_figure(out, "--out")
    s = source()
    step = s.steps[-1] if step is None else step
    if step not in s.steps:
        raise ConfigError(f"step {step} is not a checkpoint of {s.path}; steps: {', '.join(map(str, s.steps[:12]))}"
                          + (", ..." if len(s.steps) > 12 else ""))
    got = gallery_samples(s, step, n_samples, seed, n_steps, device)
    counts = Counter(STATES[int(v)] for v in got["state"])
    click.echo(f"{n_samples} samples of {s.path} at step {step} (seed {seed}): "
               + ", ".join(f"{counts[name]} {name}" for name in STATES if counts[name]))
    from scoreprobe.viz.gallery import plot_gallery
    fig = plot_gallery(got["bits"], s.rule, got["state"], got["train_index"], got["heldout_index"], ncols=ncols,
                       title=f"{getattr(s.path, 'name', s.path)}: step {step}")
    save_figure(fig, out, dpi=110)
    click.echo(f"wrote {out}")
