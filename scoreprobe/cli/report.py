"""`scoreprobe report`: one self-contained HTML page about a series (sp.report)."""
import click

from scoreprobe.cli.app import cli
from scoreprobe.cli.common import check_writable, default_output, device_option
from scoreprobe.cli.planes import PLANE_HELP
from scoreprobe.cli.source import source_options


def _sizes(ctx, param, values):
    """--size NAME=VALUE (repeatable, or several pairs in one value separated by spaces) -> {name:
    value}; lists as comma-separated numbers."""
    out = {}
    for pair in (p for value in values for p in value.split()):
        name, sep, text = pair.partition("=")
        if not sep or not name.strip() or not text.strip():
            raise click.BadParameter(f"expected NAME=VALUE, got {pair!r}")
        parts = [t for t in text.split(",") if t.strip()]
        out[name.strip()] = parts if len(parts) > 1 or "," in text else parts[0]
    return out


def _duration(seconds):
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _announce(plan):
    """Lines saying what is reused and what will be computed, and how long that takes, before it starts."""
    for section, item in plan.items.items():
        if item.found:
            yield (f"  {section:<10s} reuse {item.path}, found by its name: this run's store, same models and "
                   f"settings ({len(item.have)} checkpoints)")
        elif item.given:
            yield f"  {section:<10s} given store {item.path} ({len(item.have)} checkpoints)"
        elif item.todo:
            kept = len(item.have) and f", {len(set(item.have) & set(plan.steps))} reused" or ""
            yield f"  {section:<10s} compute {len(item.todo)} checkpoints into {item.path}{kept}"
        else:
            yield f"  {section:<10s} reuse {item.path} (all {len(plan.steps)} checkpoints there)"
    for path, reason in plan.skipped:
        yield f"  {'not used':<10s} {path}: {reason}"
    n = min(plan.sizes["gallery"], plan.sizes["n_samples"]) if plan.gallery else 0
    if n:
        yield f"  {'gallery':<10s} draw the first {n} samples of the clocks at each of {len(plan.steps)} checkpoints"
    if plan.todo:
        yield (f"about {_duration(plan.seconds)} to compute (this machine does {plan.rate:,.0f} network rows/s "
               "now; progress below)")
    else:
        yield "nothing to compute" + (" but the gallery's samples" if n else "")


def _run_stores(series, given):
    """Where the commands write this run's stores by default (docs/commands.md: `<run>.clocks.zarr` ... in
    the current folder, `default_output`), then the same names inside the run directory; not those given."""
    import os
    from pathlib import Path
    from scoreprobe.reports.found import FOUND_NAMES
    paths = [Path(default_output(series, name)) for name in FOUND_NAMES.values()]
    paths += [Path(str(series.path)) / name for name in FOUND_NAMES.values()]
    given = {os.path.realpath(g) for g in given}
    out = []
    for p in paths:
        if os.path.realpath(p) not in given and os.path.realpath(p) not in {os.path.realpath(q) for q in out}:
            out.append(p)
    return out


@cli.command()
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="The HTML page [default: <source>.report.html, named after the run; report.html for the shipped "
                   "series].")
@click.option("--store", "stores", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="A store already computed (clocks, basins, field, retention or dsm; repeatable): read as it is, "
                   "after checking it holds this series under this scoreprobe's definitions.")
@click.option("--cache", type=click.Path(file_okay=False), default=None,
              help="Folder of the stores the report computes (default: report.cache/<series>-<digest of the sizes "
                   "and plane>/ next to --out, shared by every page of the series at those sizes); reruns reuse them.")
@click.option("--steps", default="auto", help="Checkpoints: auto (about 8, log-spread), all, or S1,S2,...")
@click.option("--size", "sizes", multiple=True, metavar="NAME=VALUE", callback=_sizes,
              help="Change a default size (repeatable, or 'A=1 B=2'): n_samples, n_steps, sigma_start, res, field_res, "
                   "retention_sigmas, retention_items, retention_noise, dsm_sigmas, dsm_noise, dsm_heldout, seed "
                   "(docs/definitions.md, 'The report page').")
@click.option("--sae", "saes", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="An SAE folder (sp.save_sae, sp.sae_sweep's out_dir cells; repeatable): adds a features section "
                   "with its best latents and their top-activating inputs.")
@click.option("--sections", default="all", help="all, or some of clocks,basins,field,retention,dsm,gallery.")
@click.option("--plane", "plane_spec", default="auto", help=PLANE_HELP)
@device_option()
@source_options
def report(source, out, stores, cache, steps, sizes, sections, plane_spec, device, saes):
    """One self-contained HTML page about the checkpoints of SOURCES (default: the shipped series):
    the series, the clocks, a gallery of samples, anchors and endpoints (click the basin map), basin
    evolution with a step slider, the score field, retention, the DSM loss by σ and the provenance. Opens offline (no server, nothing fetched). Stores already
    computed are reused: --store, the report's cache, and the run's own stores under the names the
    commands write by default (<run>.clocks.zarr, .basins.zarr, .field.zarr, .dsm.zarr in the current
    folder, or those names inside the run directory) when they hold this run's models at the report's settings for every checkpoint shown; what is
    missing is computed first, with the time it will take said up front."""
    from scoreprobe.cli.common import parse_steps
    from scoreprobe.reports import PAGE_SECTIONS, build, estimate, make_plan
    chosen = parse_steps(steps, words=("all", "auto"))
    chosen = "all" if chosen is None else chosen
    wanted = PAGE_SECTIONS if sections == "all" else tuple(s.strip() for s in sections.split(",") if s.strip())
    s = source()
    out = default_output(s, "report.html", out)
    check_writable(out, "--out")
    plan = make_plan(s, out, stores=stores, cache=cache, steps=chosen, sizes=sizes, plane=plane_spec, sections=wanted,
                     found=_run_stores(s, stores))
    estimate(plan, device)
    click.echo(f"report of {s.path} ({getattr(s, 'kind_label', s.kind)}): {len(plan.steps)} of {len(s.steps)} "
               f"checkpoints, on {device}")
    for line in _announce(plan):
        click.echo(line)
    result = build(plan, device=device, sources=None, saes=saes)
    for section, note in result.notes:
        click.echo(f"note ({section}): {note}")
    click.echo(f"wrote {result.path} ({result.bytes / 1e6:.2f} MB) in {_duration(result.seconds)}")
