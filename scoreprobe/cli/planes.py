"""`scoreprobe basins`, `field` and `animate`: PF-ODE basins and score fields on 2D planes."""
import click
import numpy as np

from scoreprobe.cli.app import cli
from scoreprobe.defaults import DEFAULT_N_STEPS
from scoreprobe.limits import FPS_RANGE
from scoreprobe.cli.common import (DEFAULT_FIGURE, ODE_STEPS, SEED, animation_options, autocast_option, check_figure,
                                   check_frame, check_writable, choose_steps, default_output, device_option,
                                   float_list, models_per_pass_option, on_scheduler, output_file, plot_option,
                                   require_denoiser, save_figure, scheduler_of, scheduler_options, solver_of,
                                   solver_options, steps_in_store, store_line)
from scoreprobe.cli.source import source_options


# ---------------------------------------------------------------------------------------------
# basins, field, animate
# ---------------------------------------------------------------------------------------------

PLANE_HELP = ("auto, or three points (the plane's a, b, c): train:I, heldout:J, violating:K (bit K of the first "
              "train item named, flipped) or a string of 0s and 1s, one per bit; e.g. train:5,train:17,heldout:300. "
              "train:I,heldout:J,violating:K in any order keeps that order.")
BASIN_COLUMNS = (("valid_memorized", "train"), ("valid_heldout", "held-out"), ("valid_novel", "novel"),
                 ("rule_violating", "violating"), ("invalid", "non-finite"))


def _sigmas(values, name):
    """--sigma / --sigma-start values, checked (positive, finite) before any output is touched."""
    from scoreprobe.errors import ConfigError
    from scoreprobe.probes.field import as_sigma_list
    sig = float_list(values, name)
    try:
        as_sigma_list(sig, name)
    except ConfigError as e:
        raise click.BadParameter(str(e).replace(f"{name} must", "must"), param_hint=name) from None
    return sig


def _plane_setup(source, plane_spec, seed, steps, outputs, command):
    """Everything a plane command checks before computing: the series, the plane, the steps, and
    that each output can be written: `outputs` {option: (path given or None, default name)}, the
    default named after the source (`default_output`). Returns (series, plane, chosen steps,
    {option: path}); `command` (basins, field) names the refusal of a GPT run.
    --overwrite is passed on to the probe, which writes the new store beside the old one and swaps
    it in when complete: a run that fails or is interrupted leaves the old store as it was."""
    from scoreprobe.slices import plane_from_spec
    s = source()
    require_denoiser(s, command)   # a GPT run: refused before the plan is printed
    plane = plane_from_spec(plane_spec, s.dataset, s.rule, seed=seed)
    chosen = choose_steps(steps, s)
    paths = {option: default_output(s, name, given) if name else given for option, (given, name) in outputs.items()}
    for option, path in paths.items():
        if option == "--out":
            check_writable(path, option, store=True)
        else:
            check_figure(path, option)
    return s, plane, chosen, paths


CONVERGENCE_COLUMNS = (("label_change_fraction", "chg@2N"), ("label_change_fraction_item", "item@2N"))


def _worst_bound(ds):
    b = ds.audit_bound.values
    return "undefined (nothing filled)" if np.isnan(b).all() else f"at most {float(np.nanmax(b)):.3g} (95%)"


def _basin_table(ds):
    """Lines of the per-step table: share of the plane flowing to each kind of endpoint, and with
    --check-convergence the share whose label changes when the steps are doubled."""
    extra = [(k, h) for k, h in CONVERGENCE_COLUMNS + (("integrated_fraction", "integr."),) if k in ds]
    lines = []
    for s0 in ds.sigma_start.values:
        d = ds.sel(sigma_start=s0)
        lines.append(f"sigma_start = {float(s0):g}: share of the plane flowing to")
        lines.append(f"{'step':>8s}" + "".join(f"{h:>11s}" for _, h in BASIN_COLUMNS + tuple(extra))
                     + f"{'off-vertex':>11s}")
        for i in range(d.sizes["step"]):
            row = d.isel(step=i)
            cells = [float(row.fraction.sel(state=k)) for k, _ in BASIN_COLUMNS] + [float(row[k]) for k, _ in extra]
            cells.append(float(row.endpoint_off_vertex.mean()) if "endpoint_off_vertex" in row else float("nan"))
            lines.append(f"{int(d.step[i]):>8d}" + "".join(f"{c:>11.3f}" for c in cells))
    lines.append("the five states add up to 1 (by the endpoint's thresholded bits); off-vertex: share of "
                 "endpoints not at a vertex, a flag (docs/definitions.md)")
    if "integrated_fraction" in ds:
        lines.append("integr.: share of the grid integrated (boundary band, lattice, audit; the rest filled); "
                     f"audit bound on the filled points' disagreement {_worst_bound(ds)}; "
                     f"{int((ds.refine_outcome > 0).sum())} map(s) integrated densely (audit failed twice or a "
                     "fractal-looking boundary)")
    if "warm_start" in ds:
        lines.append(f"warm start: {int((ds.warm_start > 0).sum())} of {ds.warm_start.size} map(s) started from the "
                     "previous checkpoint's (warm_seed_step in the store)")
    if any(k in ds for k, _ in CONVERGENCE_COLUMNS):
        lines.append("chg@2N: share of the grid whose endpoint state differs with the finer setting (2x --n-steps; "
                     "the engine: tolerances tightened, ode.finer); item@2N: whose state or item reached differs")
    return lines


def _refine_of(dense, no_warm_start, res):
    """basins' refine= for --dense and --no-warm-start (refinement itself stays automatic: from res 32 on)."""
    from scoreprobe.probes.refine import AUTO_RES, RefineSettings
    if dense:
        return False
    return RefineSettings(warm_start=False) if no_warm_start and res >= AUTO_RES else None


@cli.command()
@click.option("--plane", "plane_spec", default="auto", help=PLANE_HELP)
@click.option("--sigma-start", multiple=True, default=("1.0",), help="Starting noise level(s); repeat or comma-separate.")
@click.option("--res", type=click.IntRange(min=2), default=24, help="Grid points per axis.")
@solver_options
@click.option("--n-steps", type=ODE_STEPS, default=DEFAULT_N_STEPS,
              help="Fixed-grid steps from sigma_start to 0 (--solver heun / euler).")
@click.option("--steps", default="auto", help="Checkpoints: auto (about 8), all, or S1,S2,...")
@click.option("--seed", type=SEED, default=0, help="Seed of the automatic plane choice.")
@click.option("--out", type=click.Path(), default=None,
              help="Zarr store (resumable; reruns reuse it) [default: <source>.basins.zarr, named after the run; "
                   "basins.zarr for the shipped series].")
@click.option("--overwrite", is_flag=True, help="Replace an existing store at --out.")
@click.option("--animate", "animate_path", type=click.Path(dir_okay=False), default=None,
              help="Animation over steps (.gif, or .mp4 with ffmpeg) [default: <source>.basins.gif; basins.gif for "
                   "the shipped series].")
@click.option("--no-animate", is_flag=True, help="Skip the animation.")
@click.option("--dense", is_flag=True,
              help="Integrate every grid point. Without it, grids of --res 32 and more integrate a coarse lattice, "
                   "the boundary band between labels and an audit sample, and fill the rest (column 'integr.': the "
                   "share integrated; docs/definitions.md, 'Basin maps'). A store written either way is a "
                   "different analysis from one written the other.")
@click.option("--no-warm-start", is_flag=True,
              help="Refine each checkpoint's map on its own. Without it, a refined map starts from the previous "
                   "checkpoint's: its boundary points integrated, changes followed, the rest filled from it and "
                   "audited as a cold map is (docs/definitions.md, 'Basin maps'). Recorded in the store's config.")
@animation_options
@click.option("--check-convergence", is_flag=True,
              help="Integrate every grid again with the finer setting (2x --n-steps on the fixed grid, the "
                   "engine's tolerances tightened) and report, per step and sigma_start, the "
                   "share of grid points whose endpoint label changes (columns chg@2N, item@2N; stored as "
                   "label_change_fraction[_item]); warns when the state changes on more than 1% of a grid. "
                   "The extra run costs about twice the map itself (about 3x the time in all). A store "
                   "written with it is a different analysis from one without.")
@device_option()
@models_per_pass_option()
@autocast_option()
@scheduler_options
@source_options
def basins(source, plane_spec, sigma_start, res, solver, tol, n_steps, steps, seed, out, overwrite, animate_path, no_animate,
           dense, no_warm_start, dpi, frame_size, check_convergence, device, models_per_pass, autocast, scheduler,
           dask_local):
    """Basin maps of the PF-ODE on a plane through a training item, a nearby held-out item and a
    rule-violating vertex, at the checkpoints of SOURCES (default: the shipped
    series; or a run directory, checkpoint files, a glob or a folder of them: see --dataset, --set)."""
    import time
    from scoreprobe.ode import describe_solver, finer
    from scoreprobe.probes.basins import basins as run_basins
    from scoreprobe.viz import animate_basins
    t0 = time.perf_counter()
    scheduler = scheduler_of(scheduler, dask_local)
    if animate_path and not animate_path.lower().endswith((".gif", ".mp4")):  # fail before computing
        raise click.BadParameter(f"use a .gif or .mp4 file name, got {animate_path!r}", param_hint="--animate")
    check_frame(dpi, frame_size)
    sig = _sigmas(sigma_start, "--sigma-start")
    solver = solver_of(solver, tol)
    s, plane, chosen, paths = _plane_setup(source, plane_spec, seed, steps, {
        "--out": (out, "basins.zarr"), "--animate": (None, None) if no_animate else (animate_path, "basins.gif")},
        "basins")
    out, animate_path = paths["--out"], paths["--animate"]
    reused = steps_in_store(out, overwrite)
    click.echo(f"basins of {s.path}: {len(chosen)} of {len(s.steps)} checkpoints, plane {', '.join(plane.labels)}, "
               f"{res}x{res} grid, sigma_start {sig}, {describe_solver(solver, n_steps)}"
               f"{f' (and {describe_solver(*finer(solver, n_steps))} to check convergence)' if check_convergence else ''}"
               f", on {device}")
    with on_scheduler(scheduler):
        ds = run_basins(s, plane, sigma_start=sig, res=res, n_steps=n_steps, solver=solver, steps=chosen, out=out or None,
                        device=device, check_convergence=check_convergence, overwrite=overwrite,
                        models_per_pass=models_per_pass, autocast=autocast, refine=_refine_of(dense, no_warm_start, res))
    for line in _basin_table(ds):
        click.echo(line)
    if out:
        click.echo(store_line(out, list(ds.step.values), reused))
    if animate_path:
        with output_file(animate_path):
            written = animate_basins(ds, animate_path, sigma_start=sig[0], dpi=dpi, size=frame_size)
        others = (f" (of {', '.join(f'{v:g}' for v in sig)}; `scoreprobe animate {out} --sigma-start S` for another)"
                  if len(sig) > 1 and out else "")
        click.echo(f"wrote {written}: sigma_start {sig[0]:g}{others}")
    click.echo(f"done in {time.perf_counter() - t0:.1f} s")


@cli.command()
@click.option("--plane", "plane_spec", default="auto", help=PLANE_HELP)
@click.option("--sigma", multiple=True, default=("0.3", "1.0"), help="Noise level(s); repeat or comma-separate.")
@click.option("--res", type=click.IntRange(min=2), default=32, help="Grid points per axis.")
@click.option("--steps", default="auto", help="Checkpoints: auto (about 8), all, or S1,S2,...")
@click.option("--seed", type=SEED, default=0, help="Seed of the automatic plane choice.")
@click.option("--oracles/--no-oracles", default=True, help="Also the memorizer's and the rule oracle's fields.")
@click.option("--out", type=click.Path(), default=None,
              help="Zarr store (model fields; resumable) [default: <source>.field.zarr; field.zarr for the shipped "
                   "series].")
@click.option("--overwrite", is_flag=True, help="Replace an existing store at --out.")
@plot_option("Figure at the last step (its title names it and the computed ones): one row per sigma, one column "
             "per field, one shared colour scale; always drawn.", "<source>.field.png (field.png for the shipped "
                                                                 "series), also when not given")
@device_option()
@models_per_pass_option()
@autocast_option()
@scheduler_options
@source_options
def field(source, plane_spec, sigma, res, steps, seed, oracles, out, overwrite, plot, device, models_per_pass,
          autocast, scheduler, dask_local):
    """Score field on a plane at the checkpoints of SOURCES (default: the shipped
    series; or a run directory, checkpoint files, a glob or a folder of them: see --dataset, --set), next to the
    memorizer's and the rule oracle's."""
    from scoreprobe.probes.field import score_field
    scheduler = scheduler_of(scheduler, dask_local)
    sig = _sigmas(sigma, "--sigma")
    plot = None if plot == DEFAULT_FIGURE else plot   # field always draws its figure: a bare --plot is the default
    s, plane, chosen, paths = _plane_setup(source, plane_spec, seed, steps,
                                           {"--out": (out, "field.zarr"), "--plot": (plot, "field.png")}, "field")
    out, plot = paths["--out"], paths["--plot"]
    reused = steps_in_store(out, overwrite)
    click.echo(f"score field of {s.path}: {len(chosen)} checkpoints, plane {', '.join(plane.labels)}, "
               f"{res}x{res} grid, sigma {sig}, on {device}")
    with on_scheduler(scheduler):
        ds = score_field(s, plane, sig, res=res, oracles=oracles, steps=chosen, out=out or None, device=device,
                         overwrite=overwrite, models_per_pass=models_per_pass, autocast=autocast)
    click.echo(f"{'step':>8s}{'sigma':>8s}{'mean|s_uv|':>12s}{'mean|s_off|':>13s}")
    for st in ds.step.values:
        for sg in ds.sigma.values:
            d = ds.sel(step=st, sigma=sg)
            uv = float(((d.score_u ** 2 + d.score_v ** 2) ** 0.5).mean())
            click.echo(f"{int(st):>8d}{float(sg):>8.3g}{uv:>12.3f}{float(d.score_off_norm.mean()):>13.3f}")
    click.echo("mean|s_uv|: mean length of the model's score within the plane; mean|s_off|: mean norm of its part "
               "orthogonal to the plane (over the grid; docs/definitions.md)")
    if out:
        click.echo(store_line(out, list(ds.step.values), reused))
    if plot:
        _field_figure(ds, sig, oracles, plot)
        click.echo(f"wrote {plot}: the model field at step {int(ds.step.values[-1])}"
                   + (f", the last of {ds.sizes['step']} computed" if ds.sizes["step"] > 1 else ""))


def _field_figure(ds, sigmas, oracles, path):
    from scoreprobe.viz import plot_field_panels
    fig = plot_field_panels(ds, sigmas=sigmas, prefixes=("", "mem_", "rule_") if oracles else ("",))
    save_figure(fig, path, dpi=110)


@cli.command()
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Output .gif or .mp4 [default: the store's name with .gif, here: basins.zarr -> basins.gif, "
                   "run.basins.zarr -> run.basins.gif].")
@click.option("--fps", type=click.FloatRange(*FPS_RANGE), default=4.0, help="Frames per second.")
@click.option("--sigma-start", type=float, default=None, help="Which starting noise level (default: the middle one).")
@animation_options
def animate(store, out, fps, sigma_start, dpi, frame_size):
    """Animate a basins STORE (written by `scoreprobe basins --out`) over training steps."""
    import os
    from scoreprobe.viz import animate_basins
    if out is None:
        name = os.path.basename(os.path.normpath(store))
        out = (name[:-5] if name.endswith(".zarr") else name) + ".gif"
    check_figure(out, "--out")
    check_frame(dpi, frame_size)
    from scoreprobe.store import open_store
    from scoreprobe.viz.common import _pick_level
    ds = open_store(store)
    have = [float(v) for v in ds.sigma_start.values] if "sigma_start" in ds.dims else []
    shown = float(_pick_level(ds, "sigma_start", sigma_start).sigma_start) if have else None
    with output_file(out):
        written = animate_basins(ds, out, fps=fps, sigma_start=sigma_start, dpi=dpi, size=frame_size)
    click.echo(f"wrote {written}" + (f": sigma_start {shown:g} (of {', '.join(f'{v:g}' for v in have)})"
                                     if shown is not None else ""))
