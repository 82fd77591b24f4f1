"""What a report needs before anything is computed: its sizes, the store of each section (given,
cached or to be computed), the checks that keep other series' and other definitions' results out,
and how long the missing part will take on this machine (`reports.timing`).

The default sizes (REPORT_SIZES) are chosen so that `scoreprobe report` on the shipped series
finishes in about 3 minutes on 2 idle cores from nothing; docs/definitions.md ("The report page")
lists them and what they mean.
"""
import dataclasses
from pathlib import Path

import numpy as np

from scoreprobe.defaults import DEFINITIONS_VERSION
from scoreprobe.errors import ConfigError, StoreError
from scoreprobe.reports.checks import check_dataset, check_meta_size, check_record
from scoreprobe.reports.sizes import (REPORT_SIZES, check_page_size, check_sizes, store_dims,  # noqa: F401
                                      stored_settings)
from scoreprobe.reports.timing import estimate, gallery_rows, measure_rate, section_rows  # noqa: F401
from scoreprobe.reports.timing import is_gpt as _is_gpt
from scoreprobe.store.versions import equivalent

N_AUTO_STEPS = 8                  # --steps auto: about this many checkpoints, log-spread
SECTIONS = ("clocks", "basins", "field", "retention", "dsm")   # sections read from stores
PAGE_SECTIONS = SECTIONS + ("gallery",)   # and the gallery, drawn from the series and the basins store
GPT_SECTIONS = ("clocks", "gallery")   # what a GPT series (no denoiser, no score) can show
PROBE_OF = {"clocks": "clocks", "basins": "basins", "field": "score_field", "retention": "retention",
            "dsm": "dsm_by_sigma"}
SECTION_OF = {probe: section for section, probe in PROBE_OF.items()}
VERSIONED = ("clocks", "basins", "retention")   # probes whose stores record DEFINITIONS_VERSION


@dataclasses.dataclass
class Item:
    """One section's store: `given` (named by the user: read as it is) or in the cache (resumed)."""
    section: str
    path: Path
    given: bool
    have: list      # steps the store holds now
    todo: list      # steps to compute (empty for a given store)
    rows: int = 0   # network rows to evaluate for `todo` (basins, retention: the fixed grid's until `estimate`)
    dims: tuple = ()   # a given store's (n_sigma, res) (plan.store_dims), for the page size
    found: bool = False   # a given store the report found by its default name (reports.found), not named


@dataclasses.dataclass
class Plan:
    series: object
    steps: list          # the checkpoints the computed sections cover
    sizes: dict
    plane_spec: str
    out: Path
    cache: Path
    items: dict          # section -> Item
    notes: list          # (section, text): what the page must say about its inputs
    rate: float = float("nan")   # network rows per second measured here (reports.timing)
    latency: float = float("nan")   # seconds per forward call beside the rows, measured here
    per_checkpoint: float = float("nan")   # fixed seconds per section and checkpoint, measured here
    seconds: float = 0.0         # estimated compute time
    gallery: bool = False        # the page shows the gallery (samples drawn when the page is made)
    skipped: list = dataclasses.field(default_factory=list)   # (path, reason): stores found by name, not used

    @property
    def todo(self):
        return {s: it for s, it in self.items.items() if it.todo}


def auto_steps(series, n=N_AUTO_STEPS):
    """About n checkpoints spread over the (log-spaced) series, first and last included."""
    steps = list(series.steps)
    idx = np.unique(np.round(np.linspace(0, len(steps) - 1, min(n, len(steps)))).astype(int))
    return [steps[i] for i in idx]


# ---------------------------------------------------------------------------------------------
# Checking a store against the series and the definitions
# ---------------------------------------------------------------------------------------------


def store_section(path, config):
    """The report section a store's config belongs to; StoreError when it is no analysis the page shows."""
    probe = (config or {}).get("probe")
    if probe not in SECTION_OF:
        raise StoreError(f"store {path} holds {probe!r}, not one of the analyses a report shows "
                         f"({', '.join(PROBE_OF.values())})")
    return SECTION_OF[probe]


def check_identity(path, config, series, advice="leave it out of the report"):
    """StoreError unless the store was computed from `series` under this DEFINITIONS_VERSION."""
    from scoreprobe.store import config_diff
    from scoreprobe.sweep import source_identity
    probe = config.get("probe")
    if probe in VERSIONED and not equivalent(config.get("definitions"), config):
        raise StoreError(f"store {path} was written under definitions version {config.get('definitions')} "
                         f"and this scoreprobe uses {DEFINITIONS_VERSION} (docs/definitions.md): recompute it "
                         f"or {advice}")
    want = source_identity(series)
    diff = config_diff(config.get("source") or {}, want)
    if diff:
        name = (config.get("source") or {}).get("name") or "an unnamed source"
        raise StoreError(f"store {path} holds {probe} of another series ({name}; differs in "
                         f"{', '.join(diff)}), not of {series.path}: {advice}")


def _check_cached(path, config, section, sizes, plane):
    """StoreError when a cached store holds the section at other sizes or on another plane (its
    probe would refuse it half-way through the report). `plane`: () -> the plane's spec."""
    if config.get("probe") != PROBE_OF[section]:
        raise StoreError(f"report cache {path} holds {config.get('probe')}, not {PROBE_OF[section]}: "
                         "choose another --cache or remove it")
    from scoreprobe.store import commit
    record = _record(commit.read_json(Path(path) / "zarr.json"))
    if "models" not in record:   # its probe would refuse to resume it (docs/definitions.md, "Which model")
        raise StoreError(f"report cache {path} was written before scoreprobe recorded which model each step "
                         "measured, so it cannot be resumed: choose another --cache or remove it")
    want = stored_settings(section, sizes)
    if section in ("basins", "field"):
        want["plane"] = plane()
    differ = [k for k, v in want.items() if config.get(k) != v]
    if differ:
        raise StoreError(f"report cache {path} holds {section} with other settings ({', '.join(differ)} differ): "
                         "choose another --cache or remove it")
    check_contents(section, path)


def open_checked(path, series):
    """(section, config, steps, note) of an existing store after the series / definitions / model
    checks. StoreError for no store, a store without a complete step, damaged data, another series
    or another model at some step; note: what the page must say about it (or None)."""
    from scoreprobe.store import inspect, stored_config, verify, written_steps
    path = Path(path)
    check_meta_size(path)
    check_record(path)
    state, _ = inspect(path)
    if state in ("absent", "empty"):
        raise StoreError(f"no zarr store at {path}")
    config = stored_config(path) or {}
    if state == "partial":
        raise StoreError(f"store {path} holds no complete step (a run killed before its first step): "
                         "rerun it or leave it out")
    section = store_section(path, config)
    check_identity(path, config, series)
    bad = verify(path)
    if bad:
        raise StoreError(f"store {path} has damaged data (checksums differ at {len(bad)} steps): rerun the "
                         "command that wrote it")
    return section, config, written_steps(path), check_models(path, series)


def _record(root):
    """The commit record of a store's root metadata ({} when there is none or it is no object)."""
    from scoreprobe.store import RECORD_ATTR
    record = ((root or {}).get("attributes") or {}).get(RECORD_ATTR)
    return record if isinstance(record, dict) else {}


def check_contents(section, path):
    """StoreError unless the store at `path` holds what the page reads from `section` (reports.checks:
    variables, integer unique steps, clocks attributes by type); its (n_sigma, res) for the page size.
    Opens the store lazily: nothing but metadata and coordinates is read."""
    from scoreprobe.store import open_store
    ds = open_store(path)
    check_dataset(section, ds, path, required=False)
    return store_dims(ds)


def check_models(path, series):
    """StoreError when a step of the store was measured on another model than the series' checkpoint
    at that step (the identities the store records, `scoreprobe.sweep.identity`); a note (str) when
    the store records none, else None."""
    from scoreprobe.store import commit
    from scoreprobe.sweep import identity
    record = _record(commit.read_json(Path(path) / "zarr.json"))
    if "models" not in record:
        return (f"store {path} does not record which model each step measured (written before scoreprobe "
                "did); only its series' identity is checked")
    if _is_gpt(series):
        return None
    for step, old in zip(record.get("steps") or [], record["models"]):
        if int(step) not in set(series.steps):
            raise StoreError(f"store {path} holds step {step}, which is not a checkpoint of {series.path}")
        new = identity.model_identity(series.denoiser(int(step)), series.rule.n_bits)
        if not identity.same(old, new):
            raise StoreError(f"store {path}: step {step} was measured on another model than {series.path} has "
                             f"there (stored: {identity.describe(old)}; now: {identity.describe(new)}): leave it "
                             "out of the report")
    return None


# ---------------------------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------------------------


def default_cache(out, series, sizes, plane="auto"):
    """The cache of a page of `series` at `sizes` on `plane`: `report.cache/<series>-<digest>/` next
    to the page, the digest over the series' identity (as stores record it), the sizes and the
    plane, not the page's name: every page of one series with one set of sizes shares it, and a
    page at other sizes gets its own (its steps are not part of it: a page of more steps extends it)."""
    import hashlib
    import json
    from scoreprobe.sweep import source_identity
    from scoreprobe.reports.sizes import PAGE_ONLY_SIZES
    stored = {k: v for k, v in check_sizes(sizes).items() if k not in PAGE_ONLY_SIZES}
    key = json.dumps({"source": source_identity(series), "sizes": stored, "plane": str(plane)},
                     sort_keys=True, default=str)
    name = "".join(c if c.isalnum() or c in "._+-" else "-" for c in Path(str(series.path)).name).strip("-.")[:60]
    return Path(out).parent / "report.cache" / f"{name or 'series'}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def make_plan(series, out="report.html", stores=(), cache=None, steps=None, sizes=None, plane="auto",
              sections=PAGE_SECTIONS, found=()):
    """Decide, before computing anything, where each section of the page comes from.

    Parameters
    ----------
    series : CheckpointSeries. out : the HTML file.
    stores : paths of stores already computed (any of clocks, basins, score_field, retention,
        dsm_by_sigma); each is read as it is, after checks (same series, same definitions version,
        complete and undamaged: else StoreError).
    cache : folder of the stores the report computes (default: `report.cache/<series>-<digest>/`
        next to `out`, one per series, sizes and plane: `default_cache`); existing ones are resumed,
        and must hold the same sizes (else StoreError).
    steps : checkpoints of the computed sections (default: about 8, log-spread).
    sizes : overrides of REPORT_SIZES. sections : which of PAGE_SECTIONS to show.
    found : paths where the run's own stores would be (the CLI passes the commands' default names,
        `<run>.clocks.zarr` ...); one that exists is read as it is, like a store in `stores`, for a
        section the cache does not hold complete, when it passes `reports.found.check_found` (this
        series and its models, every checkpoint of the page, the report's settings); the others are
        listed in `Plan.skipped` with the reason. Missing paths are ignored.

    Returns
    -------
    Plan (with `seconds` still 0: `estimate` measures the rate and fills it).
    """
    from scoreprobe.store import inspect, stored_config, written_steps
    from scoreprobe.sweep import select_steps
    sizes = check_sizes(sizes, series)
    unknown = [s for s in sections if s not in PAGE_SECTIONS]
    if unknown:
        raise ConfigError(f"unknown report sections {unknown}; known: {', '.join(PAGE_SECTIONS)}")
    sections, gpt_notes = _gpt_sections(series, tuple(sections))
    chosen = auto_steps(series) if steps in (None, "auto") else list(series.steps) if steps == "all" else \
        [s for s, _ in select_steps([(s, None) for s in series.steps], steps)]
    cache = default_cache(out, series, sizes, plane) if cache is None else Path(cache)
    if cache.exists() and not cache.is_dir():
        raise ConfigError(f"the report cache {cache} is a file, not a folder: move it away or choose another "
                          "--cache")
    items, notes = _given(stores, series, chosen)
    notes = gpt_notes + notes
    for section in sections:
        if section in items or section not in SECTIONS:
            continue
        path = cache / f"{section}.zarr"
        have = []
        check_meta_size(path)
        check_record(path)
        if inspect(path)[0] == "store":
            config = stored_config(path) or {}
            check_identity(path, config, series, advice="choose another --cache or remove it")
            _check_cached(path, config, section, sizes, lambda: _plane_spec(series, plane, sizes["seed"]))
            have = written_steps(path)
        todo = [s for s in chosen if s not in set(have)]
        items[section] = Item(section, path, False, have, todo, len(todo) * section_rows(section, sizes, series))
    skipped = _use_found(items, found, series, chosen, sizes, lambda: _plane_spec(series, plane, sizes["seed"]))
    plan = Plan(series, chosen, sizes, plane, Path(out), cache, {s: items[s] for s in sections if s in items}, notes,
                gallery="gallery" in sections, skipped=skipped)
    check_page_size(plan)
    return plan


def _use_found(items, found, series, chosen, sizes, plane):
    """Replace the cache items with something to compute by the usable stores among `found`
    (reports.found); returns [(path, reason)] of the found stores not used. Nothing is looked at
    when the cache (or a given store) covers every section."""
    todo = {s for s, it in items.items() if it.todo and not it.given}
    if not todo or not found:
        return []
    from scoreprobe.reports.found import find_stores
    use, skipped = find_stores(found, lambda path: open_checked(path, series), series, chosen, sizes, plane, todo)
    for section, (path, have) in use.items():
        items[section] = Item(section, path, True, have, [], dims=check_contents(section, path), found=True)
    return skipped


def _gpt_sections(series, sections):
    """(sections, notes): for a GPT series the default sections become GPT_SECTIONS, each left out
    with a note on the page; ConfigError when sections a GPT cannot show were asked for by name."""
    if not _is_gpt(series):
        return sections, []
    other = [s for s in sections if s not in GPT_SECTIONS]
    if other and sections != PAGE_SECTIONS:
        raise ConfigError(f"a GPT series has no denoiser, so it has no {', '.join(other)}: a GPT page shows "
                          f"{', '.join(GPT_SECTIONS)}")
    note = "not measured: a GPT series has no denoiser (no score field, no probability-flow ODE, no DSM loss)"
    return tuple(s for s in sections if s in GPT_SECTIONS), [(s, note) for s in other]


def _plane_spec(series, spec, seed):
    """The stored form of the plane a report of `series` uses (as the probes record it)."""
    from scoreprobe.slices import plane_from_spec
    from scoreprobe.store import normalize_config
    return normalize_config(plane_from_spec(spec, series.dataset, series.rule, seed=seed).spec())


def _given(stores, series, chosen):
    """({section: Item}, notes) of the stores the user named, checked; a note for each that lacks
    some of the `chosen` checkpoints."""
    items, notes = {}, []
    for path in stores:
        section, config, have, note = open_checked(path, series)
        if note:
            notes.append((section, note))
        if section in items:
            raise StoreError(f"two stores of {section} given ({items[section].path} and {path}); give one")
        items[section] = Item(section, Path(path), True, have, [], dims=check_contents(section, path))
        missing = sorted(set(chosen) - set(have))
        if missing:
            notes.append((section, f"store {path} holds {len(have)} checkpoints; {len(missing)} of the "
                                   f"{len(chosen)} the other sections show are not in it ({_fmt(missing)})"))
    return items, notes


def _fmt(steps, n=6):
    shown = [str(s) for s in steps[:n]]
    return ", ".join(shown) + (f", ... ({len(steps) - n} more)" if len(steps) > n else "")
