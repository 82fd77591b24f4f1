"""`scoreprobe compare`: several runs side by side (their τ table, differences, overlaid curves); `export-tb`:
the same runs as TensorBoard scalars."""
import click

from scoreprobe.cli.app import cli
from scoreprobe.cli.common import SEED, check_figure, device_option, figure_path, save_figure
from scoreprobe.limits import MAX_SAMPLES


def table_lines(ds):
    """The τ table of a compare Dataset (probes.compare.table_rows), then each run's differences to the first."""
    from scoreprobe.probes.compare import difference_rows, table_rows
    head, rows = table_rows(ds)
    widths = [max(len(r[j]) for r in (head, *rows)) for j in range(len(head))]
    for r in (head, *rows):
        yield "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
    yield f"steps: {ds.attrs.get('step_axis', '')}"
    ci = round(100 * ds.attrs.get("ci", 0.95))
    for name, ref, how, data, parts in difference_rows(ds):
        yield f"{name} vs {ref} (log10 ratio of τ + 1; {ci}% CI, {how} bootstrap, {data}): " + \
            "; ".join(f"{label} {text}" for label, text in parts)


@cli.command()
@click.argument("items", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--names", default=None, help="Comma-separated run names (default: the folder or file names).")
@click.option("--n-samples", type=click.IntRange(1, MAX_SAMPLES), default=1000,
              help="Samples per checkpoint for run directories (their clocks are measured here).")
@click.option("--seed", type=SEED, default=0, help="Seed of the initial noise for run directories.")
@click.option("--n-boot", type=click.IntRange(1, 100000), default=1000, help="Bootstrap resamples for the CIs (≥ 1).")
@click.option("--plot", default=None, type=click.Path(dir_okay=False), callback=figure_path, help="Write the overlaid curves (one colour per run) here.")
@click.option("--report", default=None, type=click.Path(dir_okay=False),
              help="Write one offline HTML page comparing the runs here (τ table, differences, curves overlaid).")
@device_option()
def compare(items, names, n_samples, seed, n_boot, plot, report, device):
    """Compare runs: ITEMS are clocks stores (`clocks --out`), run directories (measured here) or
    scaling exports (.npz). Prints τ_rule, τ_novel, τ_mem with CIs and the window per run, and each
    run's differences to the first (docs/definitions.md, "Comparing runs"); --report writes the same
    as one HTML page that opens offline."""
    from scoreprobe.cli.common import check_writable
    from scoreprobe.probes.compare import compare as run_compare
    names = [n.strip() for n in names.split(",")] if names is not None else None
    check_figure(plot, "--plot")
    check_writable(report, "--report")
    ds = run_compare(list(items), names=names, n_samples=n_samples, seed=seed, n_boot=n_boot, device=device)
    for line in table_lines(ds):
        click.echo(line)
    if plot:
        from scoreprobe.viz.compare import plot_compare
        save_figure(plot_compare(ds), plot, dpi=120)
        click.echo(f"wrote {plot}")
    if report:
        from scoreprobe.reports.compare_page import command_line, write_compare_page
        path, size = write_compare_page(ds, report, sources=list(items),
                                        command=command_line(items, report, names, n_samples=n_samples, seed=seed,
                                                             n_boot=n_boot))
        click.echo(f"wrote {path} ({size / 1e6:.2f} MB)")


@cli.command("export-tb")
@click.argument("items", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--logdir", required=True, type=click.Path(file_okay=False), help="TensorBoard log folder.")
def export_tb(items, logdir):
    """Write the training logs of run directories and the clocks curves and τ of clocks stores (a run's
    clocks.zarr too) as TensorBoard scalars, one subfolder of LOGDIR per item; `tensorboard --logdir
    LOGDIR` shows them. No TensorBoard install needed to write them. Each run gets one event file,
    events.out.tfevents.scoreprobe, which a re-export replaces atomically (reload a running TensorBoard to
    see it)."""
    from scoreprobe.cli.common import check_writable
    from scoreprobe.training.tensorboard import export_tb as run_export
    check_writable(logdir, "--logdir")
    for path in run_export(list(items), logdir):
        click.echo(f"wrote {path}")
