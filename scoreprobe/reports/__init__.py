"""`sp.report`: one self-contained HTML page per checkpoint series (no server, no network).

    plan = make_plan(series, out, stores, cache, steps, sizes)   # where each section comes from; checks
    estimate(plan)                                               # seconds to compute what is missing
    result = build(plan)                                         # compute / resume, then write the page

`report(...)` does the three. The package: `plan` (store checks, time estimate), `sizes` (sizes
checked against scoreprobe.limits, the page's size), `checks` (store contents by type), `gather`
(the probes' public functions and their stores), `payload` (Datasets -> JSON and PNG), `render`
(the HTML), `safe` (the one escaping path and the Content-Security-Policy), `markdown`
(docs/definitions.md into the page); `page.html`, `page.css`, `page.js` are the page's template,
styles and script (package data).

The package also holds the markdown every study shares: the claims tested with Holm (`holm_claims`), the table
cells (`report_cells`, `interval_text`), a study's header and files (`study_md`, `study_report`), and one module per
general kind of report, named after its concept (`clock_tables`: the clocks of trained runs). A study's own
tables live in its folder, analyses/<study>/ (issue 74). They read `stats` and `studies`; nothing below imports them.
"""
import dataclasses
import datetime
import os
import shlex
import time
from pathlib import Path

from scoreprobe.errors import ConfigError
from scoreprobe.limits import MAX_PAGE_BYTES
from scoreprobe.reports.plan import (PAGE_SECTIONS, REPORT_SIZES, SECTIONS, Plan, estimate,  # noqa: F401
                                     make_plan)


@dataclasses.dataclass
class ReportResult:
    path: Path
    bytes: int
    seconds: float          # wall time of `build`
    computed: dict          # section -> steps computed now
    reused: dict            # section -> steps read from stores
    notes: list             # (section, text) shown on the page
    cache: Path = None      # the folder of the stores it computed (plan.cache)


def _series_rows(series, plan):
    """(label, text or Markup) rows of the series section; every value is escaped by `safe` when
    the page is made (run.json, checkpoint and store values are text here, never markup)."""
    from scoreprobe.reports.safe import html
    d = series.describe()
    cfg = d["config"] if isinstance(d["config"], dict) else {}
    arch = d["arch"] if isinstance(d["arch"], dict) else {}
    net = arch.get("net") if isinstance(arch.get("net"), dict) else {}
    gpt = d["kind"] == "gpt"
    if gpt:   # an autoregressive model: no denoiser, so no parameterization and no σ_data to state
        net = {k: v for k, v in arch.items() if k != "image_shape"}
    steps = list(series.steps)
    n_params = d["n_params"]
    rows = [("series", html("<code>{path}</code> ({kind})", path=series.path, kind=d["kind"])),
            ("rule", repr(d["rule"])),
            ("data", f"{d['n_train']} training + {d['n_heldout']} held-out images, "
                     f"{series.rule.n_bits} bits each"
                     + (f", data seed {cfg.get('data_seed')}" if "data_seed" in cfg else "")),
            ("model", ("GPT " if gpt else "") + (" ".join(f"{k}={v}" for k, v in net.items()) or d.get("model")
                                                 or "as read from the files")
             + (f"; {n_params:,} parameters" if isinstance(n_params, int) and n_params else "")),
            _parameterization_row(series, d, cfg, arch),
            ("checkpoints", f"{len(steps)} in the series: {', '.join(map(str, steps[:6]))}"
                            + (f", … {steps[-1]}" if len(steps) > 6 else "")),
            ("measured", ", ".join(map(str, plan.steps)) + f" ({len(plan.steps)} checkpoints)")]
    for section, item in plan.items.items():
        if item.found:
            rows.append((f"{section} store", html("reused <code>{path}</code>, found by its name: this run's store, "
                                                  "the same models and the page's settings; {n} checkpoints",
                                                  path=item.path, n=len(item.have))))
        elif item.given:
            rows.append((f"{section} store", html("<code>{path}</code>: {n} checkpoints", path=item.path,
                                                  n=len(item.have))))
    for path, reason in plan.skipped:
        rows.append(("found, not used", html("<code>{path}</code>: {reason}", path=path, reason=reason)))
    return rows


def _parameterization_row(series, d, cfg, arch):
    """('parameterization', text): how the checkpoints become a denoiser; a GPT has none (it samples token by
    token), a scoreprobe DiT run is EDM-preconditioned with its run.json σ_data, files as read or given."""
    if d["kind"] == "gpt":
        return ("parameterization", "none: an autoregressive GPT, sampled token by token (next-token "
                                    "cross-entropy); it has no denoiser, no σ and no PF-ODE")
    if series.meta.get("format"):
        sd = arch.get("sigma_data")
        return ("parameterization", f"{cfg.get('parameterization') or 'edm'} (a scoreprobe run: EDM preconditioning, "
                                    f"σ_data = {'not recorded' if sd is None else sd} (run.json))")
    how = d.get("parameterization_how") or "read from the files, or as given with --set (see scoreprobe info)"
    return ("parameterization", f"{cfg.get('parameterization') or 'unknown'} ({how})")


def command_line(plan, sources=None, saes=()):
    """The `scoreprobe report` command that regenerates the page of `plan` (with `saes`: its SAE folders)."""
    from scoreprobe.loading.series import checkpoints_dir
    args = ["scoreprobe", "report"]
    shipped = Path(plan.series.path).resolve() == Path(checkpoints_dir()).resolve() / "parity-default"
    if sources:
        args += [str(s) for s in sources]
    elif not shipped and getattr(plan.series, "origin", None) is None:
        args.append(str(plan.series.path))
    args += ["--out", str(plan.out)]
    from scoreprobe.reports.plan import auto_steps, default_cache
    if plan.cache != default_cache(plan.out, plan.series, plan.sizes, plan.plane_spec):
        args += ["--cache", str(plan.cache)]
    for item in plan.items.values():
        if item.given:
            args += ["--store", str(item.path)]
    if plan.steps != auto_steps(plan.series):
        args += ["--steps", ",".join(map(str, plan.steps))]
    for k, v in plan.sizes.items():
        if v != REPORT_SIZES[k]:
            args += ["--size", f"{k}={','.join(f'{x:g}' for x in v) if isinstance(v, tuple) else v}"]
    shown = tuple(plan.items) + (("gallery",) if plan.gallery else ())
    if shown != PAGE_SECTIONS:
        args += ["--sections", ",".join(shown)]
    for folder in saes:
        args += ["--sae", str(folder)]
    origin = getattr(plan.series, "origin", None)    # denoisers (scoreprobe.loading.usercode)
    if origin == "--denoiser":
        args[2:2] = ["--denoiser", plan.series.config["denoiser"], "--trust"]
    line = " ".join(shlex.quote(a) for a in args)
    if "files" in (plan.series.config or {}):
        line += "  # with the SOURCES files and the --dataset / --set options they were read with"
    elif origin == "--denoiser":
        line += "  # with the --dataset (and --steps) it was made with"
    elif origin == "python":
        line = f"sp.report({{step: D, ...}}, {str(plan.out)!r}, dataset=...)  # from Python, with these sizes"
    return line


def _provenance(plan, sources, saes=()):
    import numpy
    import torch
    import xarray
    import zarr
    from scoreprobe import __version__
    from scoreprobe.reports.gather import store_record
    stores = {}
    for section, item in plan.items.items():
        rec = store_record(item.path)
        rec["origin"] = "found by its name, reused" if item.found else "given" if item.given else "report cache"
        stores[section] = rec
    return {"version": __version__, "command": command_line(plan, sources, saes),
            "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "sizes": {k: v for k, v in plan.sizes.items()}, "stores": stores,
            "packages": {"torch": torch.__version__, "numpy": numpy.__version__, "xarray": xarray.__version__,
                         "zarr": zarr.__version__}}


def _plane_notes(datasets):
    """A note when the basin maps and the score field were computed on different planes."""
    import json
    planes = {s: json.loads(ds.attrs.get("scoreprobe_config", "{}")).get("plane") for s, ds in datasets.items()
              if s in ("basins", "field")}
    if len(planes) == 2 and planes["basins"] != planes["field"]:
        return [("field", "the score field store is on another plane than the basin maps: the two are not "
                          "the same points")]
    return []


def write_atomic(path, text):
    """Write `text` to `path` (its folder made if missing) atomically (scoreprobe.atomic: a full disk leaves
    an existing page as it was)."""
    from scoreprobe.atomic import atomic_write_text
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)


def build(plan, device="cpu", progress=None, sources=None, saes=()):
    """Compute (or resume) what `plan` misses, then write the page to plan.out (with a features section when
    `saes`, SAE folders, are given: reports.features_section). Returns ReportResult."""
    from scoreprobe.reports.gather import gather
    from scoreprobe.reports.payload import section_payloads
    from scoreprobe.reports.render import page_html
    t0 = time.perf_counter()
    computed = {s: list(it.todo) for s, it in plan.items.items() if it.todo}
    reused = {s: [st for st in it.have if it.given or st in plan.steps] for s, it in plan.items.items()}
    datasets = gather(plan, device=device, progress=progress)
    notes = list(plan.notes) + _plane_notes(datasets)
    paths = {s: it.path for s, it in plan.items.items()}
    payloads = section_payloads(datasets, paths)
    if plan.gallery:
        from scoreprobe.reports.gallery import gallery_payload
        payloads["gallery"] = gallery_payload(plan.series, datasets, plan, device, paths)
    if saes:
        from scoreprobe.reports.features_section import features_payload
        payloads["features"] = features_payload(plan.series, saes)
    title = f"scoreprobe report — {Path(plan.series.path).name}"
    text = page_html(title, _series_rows(plan.series, plan), payloads, notes, _provenance(plan, sources, saes))
    if len(text.encode("utf-8")) > MAX_PAGE_BYTES:
        raise ConfigError(f"the page would take {len(text.encode()) / 2**20:.0f} MiB, more than the limit "
                          f"{MAX_PAGE_BYTES >> 20} MiB (scoreprobe.limits.MAX_PAGE_BYTES); nothing was written")
    write_atomic(plan.out, text)
    return ReportResult(Path(plan.out), len(text.encode("utf-8")), time.perf_counter() - t0, computed, reused, notes,
                        plan.cache)


def report(source=None, out="report.html", *, dataset=None, stores=(), cache=None, steps=None, sizes=None,
           plane="auto", sections=PAGE_SECTIONS, device="cpu", progress=None, found=(), saes=()):
    """Write one self-contained HTML page about a checkpoint series.

    Parameters
    ----------
    source : CheckpointSeries, a run directory, None (the shipped series), or your own denoisers:
        a mapping {step: D} or one D (step 0), each a callable D(x (B, D), sigma (B,)) -> (B, D).
    dataset : the data denoisers are compared with (a Dataset, an .npz path, a run directory; see
        `sp.open_source`); needed with denoisers, refused with a series (it carries its own).
    out : the HTML file (written atomically; the page needs nothing else to open).
    stores : paths of stores already computed (clocks, basins, score_field, retention,
        dsm_by_sigma): read as they are after checks: a store of another series, of another
        definitions version, without a complete step or with damaged data is refused
        (StoreError); one covering fewer checkpoints than the page is named on it.
    cache : folder of the stores the report computes itself (default `report.cache/<series>-<digest>/`
        next to `out`, shared by every page of the series at the same sizes and plane: `default_cache`):
        resumed on the next run, so a second report, under any page name, computes nothing.
    steps : "auto" / None (about 8 log-spread checkpoints), "all", or a list of steps.
    sizes : overrides of REPORT_SIZES (e.g. {"res": 32, "n_samples": 400}).
    plane : plane spec of the basin maps and field ("auto" or "train:I,heldout:J,violating:K").
    sections : which of PAGE_SECTIONS to show (SECTIONS, from stores, and "gallery": the first
        `gallery` samples of the clocks at each checkpoint, the plane's anchors and, on a click in
        the basin map, its endpoint, as pixel grids with their states). device : where the probes run.
    progress : as for the probes (None: a bar on a terminal, else one line per step).
    found : paths where the run's own stores may be (`scoreprobe report` passes the names the commands
        write by default, `<run>.clocks.zarr` ... in the current folder): each that exists is read as it
        is for a section the cache does not hold complete, if it holds this series' models at the
        report's settings for every checkpoint of the page (`reports.found`); the page names it, and
        each found store it did not use with the reason.
    saes : SAE folders (sp.save_sae, sp.sae_sweep's out_dir cells) for a features section: each one's best
        latents with their top-activating inputs (reports.features_section); one that cannot be shown is named
        there with the reason.

    Returns
    -------
    ReportResult: path, bytes, seconds, computed / reused steps per section, notes on the page.
    The time estimate of what is missing goes to the log (`logging`, INFO) before computing.
    """
    import logging
    series = _as_series(source, dataset)
    plan = make_plan(series, out, stores=stores, cache=cache, steps=steps, sizes=sizes, plane=plane,
                     sections=sections, found=found)
    estimate(plan, device)
    logging.getLogger(__name__).info("report: computing %s; about %.0f s", ", ".join(plan.todo) or "nothing",
                                     plan.seconds)
    saes = (saes,) if isinstance(saes, (str, os.PathLike)) else tuple(saes)
    return build(plan, device=device, progress=progress, saes=saes)


def _as_series(source, dataset):
    """The series `report` describes: a run directory or the shipped series loaded, a series as it
    is, denoisers wrapped with their data (ConfigError without it, or with data for a series)."""
    from scoreprobe.errors import ConfigError
    from scoreprobe.sweep import is_series
    if source is None or isinstance(source, (str, os.PathLike)) or is_series(source):
        if dataset is not None:
            raise ConfigError("dataset= is for denoisers: a checkpoint series carries its own data")
        from scoreprobe.loading.series import load_series
        return source if is_series(source) else load_series(source)
    from scoreprobe.sweep import as_steps
    as_steps(source)   # ConfigError for what is no denoiser, no mapping of them
    if dataset is None:
        raise ConfigError("a report of denoisers needs the data to compare with: pass dataset= (a Dataset, an .npz "
                          "of train/heldout bits or a run directory)")
    from scoreprobe.loading.sources import dataset_from
    from scoreprobe.loading.usercode import DenoiserSeries
    data = dataset_from(os.fspath(dataset) if isinstance(dataset, os.PathLike) else dataset)
    return DenoiserSeries.of(source, data)
