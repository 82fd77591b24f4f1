"""`scoreprobe clocks` and `scoreprobe dsm`: one row per checkpoint."""
import click

from scoreprobe.cli import cli
from scoreprobe.cli.common import parse_steps, save_figure, sweep_options, resolve_device


# ---------------------------------------------------------------------------------------------
# clocks
# ---------------------------------------------------------------------------------------------

CLOCK_COLUMNS = (("step", "step", "{:>8d}"), ("rule_acc", "rule_acc", "{:>10.3f}"),
                 ("group_acc", "group_acc", "{:>10.3f}"), ("mem_ratio", "mem_ratio", "{:>10.3f}"),
                 ("heldout_ratio", "heldout", "{:>10.3f}"), ("novel_ratio", "novel", "{:>10.3f}"),
                 ("invalid_ratio", "invalid", "{:>10.3f}"))


def _fmt_tau(value):
    import math
    return "never reached" if value is None or not math.isfinite(value) else f"{value:.0f}"


@cli.command()
@click.argument("series", required=False, type=click.Path(exists=True, file_okay=False))
@click.option("--n-samples", type=click.IntRange(min=1), default=1000,
              help="Samples per checkpoint (fewer are faster but make the 0.9 threshold noisy).")
@click.option("--seed", type=int, default=0, help="Seed of the initial noise (the same at every step).")
@click.option("--n-steps", type=click.IntRange(min=1), default=18, help="Heun PF-ODE steps (DiT).")
@sweep_options("clocks.zarr", "Write the clock and state figure here.", "ODE batch rows (memory bound).")
def clocks(series, n_samples, seed, n_steps, steps, out, overwrite, plot, chunk_size, device):
    """Rule accuracy and memorization at every checkpoint of SERIES (default: the shipped series),
    with τ_rule, τ_mem and the innovation window."""
    from scoreprobe.checkpoints import load_series
    from scoreprobe.probes.clocks import clocks as run_clocks
    s = load_series(series)
    dev = resolve_device(device)
    click.echo(f"clocks of {s.path} ({s.kind}, {len(s.steps)} checkpoints), {n_samples} samples, seed {seed}, on {dev}")
    ds = run_clocks(s, n_samples=n_samples, seed=seed, n_steps=n_steps, device=dev, steps=parse_steps(steps),
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
    save_figure(fig, path, dpi=120)


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
@sweep_options("dsm.zarr", "Write the loss and gap figure here.", "Denoiser rows per call (memory bound).")
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
                      chunk_size=chunk_size, steps=parse_steps(steps), out=out, overwrite=overwrite, device=dev)
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
    save_figure(fig, path, dpi=120)
