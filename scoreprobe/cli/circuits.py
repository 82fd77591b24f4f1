"""`scoreprobe circuits`: which sites of the network carry the rule and the copies, per checkpoint."""
import warnings

import click
import numpy as np

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
from scoreprobe.errors import ConfigError


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
    network fully clean; docs/inside.md); prints the top sites per checkpoint and σ (never a mean over σ:
    a site can carry +a at one σ and −a at another), with the contrast each effect is a fraction of, and a
    note where the pooled effect is undefined (contrasts of mixed sign or below the floor)."""
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
    with on_scheduler(scheduler), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="circuits: ", category=UserWarning)   # the `note:` lines say it
        ds = run(s, sigmas=sig, n_pairs=n_pairs, sites=chosen_sites, seed=seed, steps=chosen, out=out,
                 overwrite=overwrite, device=device)
    _table(ds, top)
    if out is not None:
        click.echo(store_line(out, list(ds.step.values), reused))
    if plot:
        from scoreprobe.viz.circuits import plot_circuits
        try:
            fig = plot_circuits(ds)
        except ConfigError as e:                        # every pooled effect undefined: nothing to draw
            click.echo(f"note: {plot} not written: {e}")
            return
        save_figure(fig, plot, dpi=120)
        click.echo(f"wrote {plot}")


def _table(ds, top):
    """One line per checkpoint, pair kind and σ: the mean contrast (with its sign) and the top sites by pooled
    effect; where every pooled effect is undefined, the reason instead; one note line per kind counting them."""
    for step in ds.step.values:
        for kind in ("rule", "copy"):
            for s in ds.sigma.values:
                cell = ds.sel(step=step, sigma=s)
                da, why = cell[f"{kind}_effect"], cell[f"{kind}_effect_undefined"].values.astype(str)
                total, neg = float(cell[f"{kind}_total"]), int((cell[f"{kind}_total_pair"] < 0).sum())
                order = [i for i in np.argsort(-np.nan_to_num(da.values, nan=-np.inf), kind="stable")[:top]
                         if np.isfinite(da.values[i])]
                cells = (", ".join(f"{ds.site.values[i]} {float(da[i]):+.2f}" for i in order) if order else
                         "undefined (" + ", ".join(sorted(set(why) - {""})) + ")")
                click.echo(f"step {int(step):>7d}  {kind:4s} σ {s:g} (contrast {total:+.3f}, {neg} of "
                           f"{cell[f'{kind}_total_pair'].size} pairs negative): {cells}")
    for kind in ("rule", "copy"):
        why = ds[f"{kind}_effect_undefined"].values.astype(str)
        n = int((why != "").sum())
        if n:
            click.echo(f"note: {n} of {why.size} {kind} pooled effects (step, σ, site) are undefined: "
                       f"{int((why == 'mixed sign').sum())} over contrasts of mixed sign, "
                       f"{int((why == 'below floor').sum())} with |mean contrast| below the floor "
                       f"{ds.attrs.get('floor', 0.01):g}" + ("; a negative copy contrast is what copying looks like"
                                                             if kind == "copy" else ""))
