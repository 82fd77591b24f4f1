"""`scoreprobe decompose`: which exact oracle describes the network, per checkpoint and σ."""
import click

from scoreprobe.cli.app import cli
from scoreprobe.cli.common import (
    SEED,
    check_figure,
    check_writable,
    choose_steps,
    device_option,
    parse_steps,
    plot_file,
    plot_option,
    require_denoiser,
    save_figure,
    steps_in_store,
    store_line,
)
from scoreprobe.cli.source import source_options

LETTERS = {"memorizer": "M", "rule": "R", "local": "L", "local_equivariant": "E"}
ORACLE_NAMES = tuple(LETTERS)


def _sigmas(ctx, param, value):
    """--sigmas '0.1,0.5,1' -> tuple of positive floats (None: the library's default)."""
    if value is None:
        return None
    try:
        out = tuple(float(v) for v in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}") from None
    if not out or any(not (0 < v <= 1e4) for v in out):
        raise click.BadParameter("noise levels must be positive and at most 1e4")
    return out


@cli.command()
@click.option("--sigmas", callback=_sigmas, default=None,
              help="Comma-separated noise levels [default: 0.05,0.1,0.2,0.35,0.5,0.7,1,1.4,2,3,5].")
@click.option("--n-points", type=click.IntRange(1, 4096), default=64,
              help="Points per split: training items, held-out items, fresh valid images.")
@click.option("--n-noise", type=click.IntRange(1, 1024), default=2, help="Noise draws per point (shared by all).")
@click.option("--oracles", default=",".join(ORACLE_NAMES), show_default=True,
              help="Comma-separated oracles: memorizer, rule, local, local_equivariant.")
@click.option("--patch", type=click.IntRange(1, 63), default=3, help="Window side of the local oracles (odd).")
@click.option("--split", type=click.Choice(("train", "heldout", "random_valid")), default="heldout",
              help="Points the printed table and the figure show.")
@click.option("--seed", type=SEED, default=0, help="Seed of the noise bank and of the fresh valid images.")
@click.option("--steps", default="auto", help="Checkpoints: auto (about 8, log-spread), all, or S1,S2,...")
@click.option("--out", type=click.Path(), default=None, help="Zarr store (resumable).")
@click.option("--overwrite", is_flag=True, help="Replace an existing store at --out.")
@plot_option("Write the heat maps (r² of each oracle over step × σ, and the best oracle) here.",
             "<source>.decompose.png (decompose.png for the shipped series)")
@device_option()
@source_options
def decompose(source, sigmas, n_points, n_noise, oracles, patch, split, seed, steps, out, overwrite, plot, device):
    """Regress the denoiser of every checkpoint of SOURCES (default: the shipped series) on the exact
    oracles — the memorizer, the rule oracle and the local (patch) oracles — per σ, on noised
    training items, held-out items and fresh valid images. Prints, per step, the oracle with the
    highest r² at each σ and the mean r² of each oracle over σ in [0.2, 2] (docs/definitions.md,
    "What kind of denoiser")."""
    from scoreprobe.probes.decompose import decompose as run
    names = tuple(o.strip() for o in oracles.split(",") if o.strip())
    if not names or any(o not in ORACLE_NAMES for o in names):
        raise click.BadParameter(f"choose among {', '.join(ORACLE_NAMES)}", param_hint="--oracles")
    if patch % 2 == 0:
        raise click.BadParameter("the window must be odd (centred on its pixel)", param_hint="--patch")
    parse_steps(steps, words=("all", "auto"))
    check_writable(out, "--out", store=True)
    s = source()
    require_denoiser(s, "decompose")
    plot = plot_file(plot, s, "decompose.png")
    check_figure(plot, "--plot")
    chosen = choose_steps(steps, s)
    reused = steps_in_store(out, overwrite)
    click.echo(f"decompose {s.path} ({len(chosen)} of {len(s.steps)} checkpoints) on {', '.join(names)}; "
               f"{n_points} points per split, {n_noise} noise draws, patch {patch}, seed {seed}")
    ds = run(s, sigmas=sigmas, n_points=n_points, n_noise=n_noise, seed=seed, oracles=names, patch=patch,
             steps=chosen, out=out, overwrite=overwrite, device=device)
    _table(ds, split)
    if out is not None:
        click.echo(store_line(out, list(ds.step.values), reused))
    if plot:
        from scoreprobe.viz.decompose import plot_decompose
        save_figure(plot_decompose(ds, split=split), plot, dpi=120)
        click.echo(f"wrote {plot}")


def _table(ds, split, band=(0.2, 2.0)):
    """Per step: the best oracle's letter at each σ ("=" a tie, "?" undefined: r² NaN), then each oracle's
    mean r² over the band (NaN when r² is NaN at any σ of the band: never an average of the rest)."""
    import numpy as np

    from scoreprobe.probes.decompose import TIE, TIE_MARGIN, UNDEFINED, best_oracle, decompose_summary
    d = ds.sel(split=split)
    names = list(d.oracle.values)
    sig = d.sigma.values
    inband = (sig >= band[0]) & (sig <= band[1])
    if not inband.any():
        inband[:] = True
    click.echo(f"best oracle by r² on {split} points at each σ ({', '.join(f'{LETTERS[n]} = {n}' for n in names)}); "
               f"= a tie (lead < {TIE_MARGIN}), ? {UNDEFINED} (r² NaN: NaN or constant output); "
               f"mean r² over σ in [{band[0]}, {band[1]}]")
    click.echo(f"{'step':>8s}  " + "".join(f"{s:>5.2g}" for s in sig) + "  " + "".join(f"{n[:10]:>11s}" for n in names))
    for i in range(d.sizes["step"]):
        r2 = d.r2.isel(step=i).transpose("sigma", "oracle").values                 # (sigma, oracle)
        best = best_oracle(d.isel(step=i)).values                                  # (sigma,)
        letters = "".join(f"{({TIE: '=', UNDEFINED: '?'} | LETTERS)[b]:>5s}" for b in best)
        means = "".join(f"{np.mean(r2[inband, k]):>11.3f}" for k in range(len(names)))
        click.echo(f"{int(d.step[i]):>8d}  {letters}  {means}")
    summary = decompose_summary(d)
    n_undefined = int((summary.best_oracle.values == UNDEFINED).sum())
    if n_undefined:
        click.echo(f"{UNDEFINED} (?): {n_undefined} of {summary.best_oracle.size} cells, where r² is NaN "
                   "(the network's output is NaN or constant there); no oracle is named for them")
    click.echo(f"on {split} points: {summary.attrs['sentence']} (sp.decompose_summary gives each cell's lead)")
