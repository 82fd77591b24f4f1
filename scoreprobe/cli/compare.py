"""`scoreprobe compare`: several runs side by side (their τ table, differences, overlaid curves); `export-tb`:
the same runs as TensorBoard scalars."""
import click

from scoreprobe.cli.app import cli
from scoreprobe.cli.common import (SEED, check_figure, device_option, plot_file, plot_option, save_figure,
                                   steps_in_store, store_line)
from scoreprobe.limits import MAX_SAMPLES


def table_lines(ds):
    """The τ table of a compare Dataset (stats.compare.table_rows), then each run's differences to the first."""
    from scoreprobe.stats.compare import difference_rows, table_rows
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
@click.option("--names", default=None, help="Comma-separated run names (default: run directories' names, the run "
                                            "each store measured, exports' file names).")
@click.option("--n-samples", type=click.IntRange(1, MAX_SAMPLES), default=1000,
              help="Samples per checkpoint for run directories (their clocks are measured here, into "
                   "<run>.clocks.zarr, and reused from there).")
@click.option("--seed", type=SEED, default=0, help="Seed of the initial noise for run directories.")
@click.option("--n-boot", type=click.IntRange(1, 100000), default=1000, help="Bootstrap resamples for the CIs (≥ 1).")
@plot_option("Write the overlaid curves (one colour per run) here.", "compare.png")
@click.option("--report", default=None, type=click.Path(dir_okay=False),
              help="Write one offline HTML page comparing the runs here (τ table, differences, curves overlaid).")
@device_option()
def compare(items, names, n_samples, seed, n_boot, plot, report, device):
    """Compare runs: ITEMS are clocks stores (`clocks --out`), run directories or scaling exports
    (.npz). A run directory's clocks are measured into <run>.clocks.zarr here (where `clocks RUN`
    writes them) and reused from there, so a second compare measures nothing again. Prints τ_rule,
    τ_novel, τ_mem with CIs and the window per run, and each run's differences to the first
    (docs/definitions.md, "Comparing runs"); --report writes the same as one HTML page that opens offline."""
    from scoreprobe.cli.common import check_writable
    from scoreprobe.stats.compare import compare as run_compare
    names = [n.strip() for n in names.split(",")] if names is not None else None
    plot = plot_file(plot, None, "compare.png")
    check_figure(plot, "--plot")
    check_writable(report, "--report")
    stores = _run_stores(items, n_samples)
    ds = run_compare(list(items), names=names, n_samples=n_samples, seed=seed, n_boot=n_boot, device=device,
                     store_dir=".")
    from scoreprobe.store import written_steps
    for store, reused in stores:   # every checkpoint of a run directory is measured: the store holds them all
        click.echo(store_line(store, written_steps(store), reused))
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


def _run_stores(items, n_samples):
    """[(store, steps already in it)] of the run directories among ITEMS: their clocks stores by the rule
    of scoreprobe.sweep.outputs (<run>.clocks.zarr here, or RUN/clocks.zarr), each checked writable before any work."""
    import os
    from scoreprobe.cli.common import check_writable
    from scoreprobe.sweep.outputs import clocks_store_of
    out = []
    for item in items:
        if os.path.isdir(item) and os.path.isfile(os.path.join(item, "run.json")):
            store = str(clocks_store_of(item))
            check_writable(store, "the clocks store", store=True)
            out.append((store, steps_in_store(store, False)))
    return out


@cli.command("export-tb")
@click.argument("items", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--logdir", required=True, type=click.Path(file_okay=False), help="TensorBoard log folder.")
def export_tb(items, logdir):
    """Write the training logs of run directories, with their clocks curves and τ, and clocks stores
    as TensorBoard scalars, one subfolder of LOGDIR per run; `tensorboard --logdir LOGDIR` shows them.
    A run directory's clocks are those `clocks RUN` wrote (<run>.clocks.zarr here, or RUN/clocks.zarr)
    or a store of that run given among ITEMS: one TensorBoard run holds both. No TensorBoard install
    needed to write them. Each run gets one event file, events.out.tfevents.scoreprobe, which a
    re-export replaces atomically (reload a running TensorBoard to see it)."""
    from scoreprobe.cli.common import check_writable
    from scoreprobe.training.tensorboard import export_plan
    from scoreprobe.training.tensorboard import export_tb as run_export
    check_writable(logdir, "--logdir")
    plan, _ = export_plan(list(items))   # (its notes are warned by export_tb)
    for path, (_, run, store) in zip(run_export(list(items), logdir), plan):
        what = [w for w, there in (("training log", run), (f"clocks of {store}", store)) if there]
        click.echo(f"wrote {path} ({' and '.join(what)})")
