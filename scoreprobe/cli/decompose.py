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

LETTERS = {"memorizer": "M", "rule": "R", "gaussian": "G", "rule_gaussian": "Q", "local": "L",
           "local_equivariant": "E", "local_boundary": "B"}
ORACLE_NAMES = tuple(LETTERS)
MARKS = {"undecided": "~", "indistinguishable": "=", "shrinkage": "s", "undefined": "?", "none": "0", "linear": "A"}


def _letter(name):
    """M, R, … for an oracle; L3, E5, … for a local family at one of several patch sizes."""
    fam, _, p = name.rpartition("_p")
    return LETTERS[fam] + p if fam in LETTERS and p.isdigit() else LETTERS.get(name, name[:2])


def _patch(ctx, param, value):
    """--patch '3' or '3,5' -> tuple of odd ints."""
    try:
        out = tuple(int(v) for v in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected odd integers separated by commas, got {value!r}") from None
    if not out or len(set(out)) != len(out) or any(not (1 <= v <= 63) or v % 2 == 0 for v in out):
        raise click.BadParameter("the window must be odd (centred on its pixel), 1 to 63, each size once")
    return out


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
@click.option("--oracles", default="all", show_default=True,
              help="Comma-separated oracles, or all: " + ", ".join(ORACLE_NAMES) + ".")
@click.option("--patch", callback=_patch, default="3", show_default=True,
              help="Window side(s) of the local oracles, odd; several (3,5) calibrate p per σ.")
@click.option("--n-boot", type=click.IntRange(20, 100_000), default=1000, show_default=True,
              help="Bootstrap resamples of the points behind the mixture weights' interval (one model).")
@click.option("--level", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True,
              help="Level of the intervals; 1 − the calls' family-wise error (Holm over the cells).")
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
def decompose(source, sigmas, n_points, n_noise, oracles, patch, n_boot, level, split, seed, steps, out, overwrite,
              plot, device):
    """Compare the denoiser of every checkpoint of SOURCES (default: the shipped series) with the exact
    oracles — the memorizer, the rule oracle, the Gaussian (Wiener) baselines of the training set and
    of the rule, and the local (patch) oracles — per σ, on noised training items, held-out items and
    fresh valid images. Prints, per step, the call at each σ (an oracle only where it explains r² ≥ 0.8,
    beats the runner-up, the shrinkage c·x and the network's own held-out affine fit by sign-flip tests
    over points, Holm over the cells; docs/oracles.md, "Calls"), the called leads with their intervals,
    and the mixture weights at σ = 1 over the offered oracles (docs/definitions.md, "What kind of
    denoiser")."""
    from scoreprobe.probes.decompose import decompose as run
    names = None if oracles.strip() == "all" else tuple(o.strip() for o in oracles.split(",") if o.strip())
    if names is not None and (not names or any(o not in ORACLE_NAMES for o in names)):
        raise click.BadParameter(f"choose among {', '.join(ORACLE_NAMES)}, or all", param_hint="--oracles")
    parse_steps(steps, words=("all", "auto"))
    check_writable(out, "--out", store=True)
    s = source()
    require_denoiser(s, "decompose")
    plot = plot_file(plot, s, "decompose.png")
    check_figure(plot, "--plot")
    chosen = choose_steps(steps, s)
    reused = steps_in_store(out, overwrite)
    click.echo(f"decompose {s.path} ({len(chosen)} of {len(s.steps)} checkpoints) on "
               f"{', '.join(names) if names else 'all oracles'}; {n_points} points per split, {n_noise} noise "
               f"draws, patch {','.join(map(str, patch))}, seed {seed}")
    ds = run(s, sigmas=sigmas, n_points=n_points, n_noise=n_noise, seed=seed, oracles=names, patch=patch,
             steps=chosen, out=out, overwrite=overwrite, device=device)
    _table(ds, split, n_boot=n_boot, level=level)
    if out is not None:
        click.echo(store_line(out, list(ds.step.values), reused))
    if plot:
        from scoreprobe.viz.decompose import plot_decompose
        save_figure(plot_decompose(ds, split=split, level=level), plot, dpi=120)
        click.echo(f"wrote {plot}")


def _table(ds, split, band=(0.2, 2.0), n_boot=1000, level=0.95):
    """Per step: the call at each σ (an oracle's letter; ~ undecided, = indistinguishable, s shrinkage,
    ? undefined), each oracle's mean r² over the band (NaN when r² is NaN at any σ of the band); then the
    called cells' leads with their intervals and the mixture weights at the σ nearest 1."""
    import numpy as np

    from scoreprobe.stats.decompose_calls import decompose_summary, mixture_weights
    d = ds.sel(split=split)
    if "step" not in d.dims:
        d = d.expand_dims(step=[0])
    names = [str(n) for n in d.oracle.values]
    sig = d.sigma.values
    inband = (sig >= band[0]) & (sig <= band[1])
    if not inband.any():
        inband[:] = True
    summary = decompose_summary(d, level=level)
    marks = {**MARKS, **{n: _letter(n) for n in names}}
    click.echo(f"calls on {split} points at each σ ({', '.join(f'{_letter(n)} = {n}' for n in names)}; "
               f"~ undecided, = indistinguishable, s shrinkage, ? undefined, "
               f"0 none fits (r² < {summary.attrs['min_r2']:g}), "
               f"A linear (its own held-out affine fit): no oracle is named there); "
               f"mean r² over σ in [{band[0]}, {band[1]}]")
    click.echo(f"{'step':>8s}  " + "".join(f"{s:>5.2g}" for s in sig) + "  " + "".join(f"{n[:10]:>11s}" for n in names))
    for i in range(d.sizes["step"]):
        r2 = d.r2.isel(step=i).transpose("sigma", "oracle").values                 # (sigma, oracle)
        best = summary.best_oracle.isel(step=i).values                             # (sigma,)
        means = "".join(f"{np.mean(r2[inband, k]):>11.3f}" for k in range(len(names)))
        click.echo(f"{int(d.step[i]):>8d}  " + "".join(f"{marks[b]:>5s}" for b in best) + f"  {means}")
    _leads(summary, level)
    _mixture(mixture_weights(d, n_boot=n_boot, level=level), names)
    click.echo(f"on {split} points: {summary.attrs['sentence']} (sp.decompose_summary gives each cell's lead and "
               "interval; sp.mixture_weights the mixture with intervals)")


def _leads(summary, level):
    """One line per step with called cells: σ, oracle, r² lead over the runner-up [interval]."""
    click.echo(f"called cells: the oracle's r² lead over the runner-up [{level:.0%} interval]")
    for i in range(summary.sizes["step"]):
        row = summary.isel(step=i)
        parts = [f"σ {s:g} {b} +{lead:.3f} [{lo:.3f}, {hi:.3f}]"
                 for s, b, lead, lo, hi in zip(row.sigma.values, row.best_oracle.values, row.lead.values,
                                                row.lead_lower.values, row.lead_upper.values) if b not in MARKS]
        if parts:
            click.echo(f"{int(row.step):>8d}  " + "; ".join(parts))


def _mixture(mw, names):
    """Per step: the mixture weights with their intervals at the σ nearest 1 (NaN: undefined)."""
    import numpy as np
    s = float(mw.sigma.values[np.argmin(np.abs(np.log(mw.sigma.values)))])
    click.echo(f"mixture weights at σ {s:g} (≥ 0, summing to 1) [{mw.attrs['level']:.0%} interval]")
    for i in range(mw.sizes["step"]):
        row = mw.isel(step=i).sel(sigma=s)
        if bool(row.shrinkage):
            click.echo(f"{int(mw.step[i]):>8d}  shrinkage (r² of c·x {float(row.r2_shrink):.4f}): the weights are "
                       "not read")
            continue
        if not np.isfinite(float(row.r2_simplex)):
            click.echo(f"{int(mw.step[i]):>8d}  undefined (the network's output is NaN or constant): no weights")
            continue
        parts = [f"{_letter(n)} {w:.2f} [{lo:.2f}, {hi:.2f}]" for n, w, lo, hi in
                 zip(names, row.weight.values, row.lower.values, row.upper.values)]
        click.echo(f"{int(mw.step[i]):>8d}  " + "  ".join(parts) + f"   r² {float(row.r2_simplex):.3f}")
