"""`scoreprobe circuits`: which sites of the network carry the rule and the copies, per checkpoint."""
import click

from scoreprobe.cli.app import cli
from scoreprobe.cli.common import (
    SEED,
    check_figure,
    check_writable,
    choose_steps,
    float_list,
    on_scheduler,
    parse_steps,
    plot_file,
    require_denoiser,
    save_figure,
    scheduler_of,
    steps_in_store,
    store_line,
    sweep_options,
)
from scoreprobe.cli.source import source_options


@cli.command()
@click.option("--sigmas", multiple=True, default=("0.3,0.7,1.5",), help="Noise levels (comma list).")
@click.option("--n-pairs", type=click.IntRange(1, 4096), default=16, help="Pairs of each kind (copy, rule).")
@click.option("--sites", default="block,sub,head", show_default=True,
              help="all (adds a site per token), or granularities (block, sub, head, token) and site labels "
                   "separated by ',' (e.g. 'blocks.1.attn.hook_z[head=2],blocks.3').")
@click.option("--top", type=click.IntRange(1, 100), default=3, help="Sites printed per checkpoint and kind.")
@click.option("--seed", type=SEED, default=0, help="Seed of the noise and of the flipped bits.")
@sweep_options("circuits.zarr", "Write the site x step heat map here.", "(unused: every pair set is one batch)")
@source_options
def circuits(source, sigmas, n_pairs, sites, top, seed, steps, out, overwrite, plot, chunk_size, device,
             scheduler, dask_local):
    """Activation patching over the checkpoints of SOURCES (default: the shipped series): for copy pairs
    (a training item vs its nearest held-out item) and rule pairs (a held-out item vs the same with one
    bit flipped), the effect of taking each site from the clean run (0 = corrupt output, 1 = the
    network fully clean; docs/inside.md); prints the top sites per checkpoint (mean over σ)."""
    from scoreprobe.probes.circuits import circuits as run
    parse_steps(steps, words=("all", "auto"))
    scheduler = scheduler_of(scheduler, dask_local)
    sig = float_list(sigmas, "--sigmas")
    chosen_sites = "all" if sites == "all" else [t.strip() for t in sites.replace(";", ",").split(",") if t.strip()]
    s = source()
    require_denoiser(s, "circuits")
    chosen = choose_steps(steps, s)
    plot = plot_file(plot, s, "circuits.png")
    check_writable(out, "--out", store=True)
    check_figure(plot, "--plot")
    reused = steps_in_store(out, overwrite)
    click.echo(f"circuits of {s.path} ({len(chosen)} of {len(s.steps)} checkpoints), σ {sig}, {n_pairs} pairs "
               f"per kind, seed {seed}, on {device}")
    with on_scheduler(scheduler):
        ds = run(s, sigmas=sig, n_pairs=n_pairs, sites=chosen_sites, seed=seed, steps=chosen, out=out,
                 overwrite=overwrite, device=device)
    _table(ds, top)
    if out is not None:
        click.echo(store_line(out, list(ds.step.values), reused))
    if plot:
        from scoreprobe.viz.circuits import plot_circuits
        save_figure(plot_circuits(ds), plot, dpi=120)
        click.echo(f"wrote {plot}")


def _table(ds, top):
    """One line per checkpoint and pair kind: the top sites by pooled effect (mean over σ)."""
    for step in ds.step.values:
        for kind in ("rule", "copy"):
            da = ds[f"{kind}_effect"].sel(step=step).mean("sigma")
            total = float(ds[f"{kind}_total"].sel(step=step).mean())
            order = [i for i in (-da.fillna(-1e9)).argsort().values[:top]]
            cells = ", ".join(f"{ds.site.values[i]} {float(da[i]):+.2f}" for i in order)
            click.echo(f"step {int(step):>7d}  {kind:4s} (clean−corrupt {total:+.3f}): {cells}")
