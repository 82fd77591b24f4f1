"""`scoreprobe compare`: several runs side by side (their τ table, differences, overlaid curves); `export-tb`:
the same runs as TensorBoard scalars."""
import math

import click

from scoreprobe.cli.app import cli
from scoreprobe.cli.common import SEED, check_figure, device_option, save_figure
from scoreprobe.limits import MAX_SAMPLES


def _tau(v):
    return "—" if v is None or not math.isfinite(v) else f"{v:.0f}"


def _tau_ci(ds, i, key):
    if key not in ds:
        return ""
    text = _tau(float(ds[key].values[i]))
    if key + "_ci" in ds:
        lo, hi = (float(v) for v in ds[key + "_ci"].values[i])
        text += f" [{_tau(lo)}, {'not reached' if math.isinf(hi) else _tau(hi)}]"
    return text


def _window(ds, i):
    if "window_open" not in ds:
        return ""
    if not bool(ds["window_open"].values[i]):
        return "closed"
    return f"open, log10 width {float(ds['window_log10_width'].values[i]):.2f}"


def table_lines(ds):
    """The τ table of a compare Dataset, then each run's differences to the first run."""
    ci = round(100 * ds.attrs.get("ci", 0.95))
    head = ("run", "checkpoints", f"τ_rule [{ci}% CI]", f"τ_novel [{ci}% CI]", f"τ_mem [{ci}% CI]", "window")
    rows = []
    for i, name in enumerate(ds["run"].values):
        n = int(ds["measured"].values[i].sum()) if "measured" in ds else ds.sizes["step"]
        rows.append((str(name), str(n), _tau_ci(ds, i, "tau_rule"), _tau_ci(ds, i, "tau_novel"),
                     _tau_ci(ds, i, "tau_mem"), _window(ds, i)))
    widths = [max(len(r[j]) for r in (head, *rows)) for j in range(len(head))]
    for r in (head, *rows):
        yield "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
    yield f"steps: {ds.attrs.get('step_axis', '')}"
    yield from _difference_lines(ds, ci)


def _difference_lines(ds, ci):
    ref = ds.attrs.get("reference", str(ds["run"].values[0]))
    for i, name in enumerate(ds["run"].values[1:], start=1):
        parts = []
        for key, label in (("d_log10_tau_rule", "τ_rule"), ("d_log10_tau_mem", "τ_mem"),
                           ("d_window_log10_width", "window width")):
            if key not in ds:
                continue
            d, (lo, hi) = float(ds[key].values[i]), (float(v) for v in ds[key + "_ci"].values[i])
            point = "—" if not math.isfinite(d) else f"{d:+.3f}"
            parts.append(f"{label} {point} [{lo:+.3f}, {hi:+.3f}]")
        how = "paired" if bool(ds["paired"].values[i]) else "independent"
        data = "same data" if bool(ds["same_data"].values[i]) else "other or unknown data"
        yield f"{name} vs {ref} (log10 ratio of τ + 1; {ci}% CI, {how} bootstrap, {data}): " + "; ".join(parts)


@cli.command()
@click.argument("items", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--names", default=None, help="Comma-separated run names (default: the folder or file names).")
@click.option("--n-samples", type=click.IntRange(1, MAX_SAMPLES), default=1000,
              help="Samples per checkpoint for run directories (their clocks are measured here).")
@click.option("--seed", type=SEED, default=0, help="Seed of the initial noise for run directories.")
@click.option("--n-boot", type=click.IntRange(0, 100000), default=1000, help="Bootstrap resamples for the CIs.")
@click.option("--plot", default=None, type=click.Path(), help="Write the overlaid curves (one colour per run) here.")
@device_option()
def compare(items, names, n_samples, seed, n_boot, plot, device):
    """Compare runs: ITEMS are clocks stores (`clocks --out`), run directories (measured here) or
    scaling exports (.npz). Prints τ_rule, τ_novel, τ_mem with CIs and the window per run, and each
    run's differences to the first (docs/definitions.md, "Comparing runs")."""
    from scoreprobe.probes.compare import compare as run_compare
    names = [n.strip() for n in names.split(",")] if names is not None else None
    check_figure(plot, "--plot")
    ds = run_compare(list(items), names=names, n_samples=n_samples, seed=seed, n_boot=n_boot, device=device)
    for line in table_lines(ds):
        click.echo(line)
    if plot:
        from scoreprobe.viz.compare import plot_compare
        save_figure(plot_compare(ds), plot, dpi=120)
        click.echo(f"wrote {plot}")


@cli.command("export-tb")
@click.argument("items", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--logdir", required=True, type=click.Path(file_okay=False), help="TensorBoard log folder.")
def export_tb(items, logdir):
    """Write the training logs of run directories and the clocks curves and τ of clocks stores (a run's
    clocks.zarr too) as TensorBoard scalars, one subfolder of LOGDIR per item; `tensorboard --logdir
    LOGDIR` shows them. No TensorBoard install needed to write them."""
    from scoreprobe.cli.common import check_writable
    from scoreprobe.training.tensorboard import export_tb as run_export
    check_writable(logdir, "--logdir")
    for path in run_export(list(items), logdir):
        click.echo(f"wrote {path}")
