"""Stores a run already has: the analyses the commands wrote under their default names
(docs/commands.md, "Outputs go to the current folder under names that carry the source's":
`<run>.clocks.zarr`, `<run>.basins.zarr`, `<run>.field.zarr`, `<run>.dsm.zarr`; the plain names for
the shipped series). A report reuses such a store, read as it is (as `--store` would), only when

- it passes every check a `--store` gets (`plan.open_checked`: this series, this definitions version,
  a complete undamaged step, the same model at every step it holds),
- it holds every checkpoint the page shows, and
- it was computed at the report's own settings (`expected_settings`: the sizes, plane, sampler,
  solver, dtype, no autocast): the page is then what the report would have computed itself.

Otherwise the report computes the section into its cache as before, and says why the store was not used.
"""
from pathlib import Path

from scoreprobe.errors import ScoreprobeError, StoreError

FOUND_NAMES = {"clocks": "clocks.zarr", "basins": "basins.zarr", "field": "field.zarr", "dsm": "dsm.zarr"}


class NotAsComputed(StoreError):
    """A found store of this series and its models that the page would not have computed as it is
    (fewer checkpoints, other settings): `--store` still shows it as it is."""


def expected_settings(section, sizes, series, plane):
    """The config values (a dict) a store of `section` holds when the report computes it at `sizes`:
    `sizes.stored_settings` (what the cache is checked against) and the settings a command may choose
    otherwise (sampler, dtype, margin, the DSM's σ grid and items). `plane`: () -> the plane's spec."""
    from scoreprobe.ode import samplers
    from scoreprobe.probes.dsm import default_sigmas
    from scoreprobe.reports.sizes import stored_settings
    want = dict(stored_settings(section, sizes))
    if section == "clocks":
        want["sampler"] = samplers.as_sampler(None).config()
    if section in ("basins", "field"):
        want.update(plane=plane(), dtype="float32", margin=0.5)
    if section == "dsm":
        data = series.dataset
        want.update(sigmas=default_sigmas(sizes["dsm_sigmas"]).tolist(), n_train=len(data.train),
                    n_heldout=min(sizes["dsm_heldout"], len(data.heldout)), oracles=True, sigma_data=None,
                    dtype="float32")
    want["autocast"] = None   # the report runs the network in its own precision
    return want


def settings_differ(config, want):
    """The keys of `want` whose value the stored `config` does not hold (sorted)."""
    from scoreprobe.store import config_diff
    return config_diff({k: config.get(k) for k in want}, want)


def check_found(opened, series, chosen, sizes, plane):
    """(section, checkpoints held) of a found store the report can read as it is; StoreError saying why
    not (another series or model, damaged: from `plan.open_checked`, which made `opened`; fewer checkpoints
    than the page, other settings: NotAsComputed)."""
    section, config, have, note = opened
    if section not in FOUND_NAMES:
        raise StoreError(f"it holds {section}, which the report does not look for by name")
    if note:
        raise NotAsComputed("it records no model per step (written before scoreprobe did), so it cannot be matched "
                            "to this run's checkpoints")
    missing = sorted(set(chosen) - set(have))
    if missing:
        raise NotAsComputed(f"it holds {len(set(chosen) & set(have))} of the {len(chosen)} checkpoints the page "
                            f"shows (not {', '.join(map(str, missing[:6]))}{', ...' if len(missing) > 6 else ''})")
    differ = settings_differ(config, expected_settings(section, sizes, series, plane))
    if differ:
        raise NotAsComputed(f"it was computed at other settings than the page's ({', '.join(differ)} differ)")
    return section, have


def find_stores(found, open_checked, series, chosen, sizes, plane, sections):
    """({section: (path, steps held)}, [(path, reason)]) of the paths in `found` that exist: the ones
    the report reads as they are, and the ones it does not use with the reason (one line each, ending
    with the advice to pass it with --store where that would show it).
    open_checked(path) -> (section, config, steps, note) or StoreError: `plan.open_checked` for `series`.
    Sections outside `sections` are ignored; the first usable store of a section wins."""
    use, skipped = {}, []
    for path in found:
        path = Path(path)
        if not path.exists():
            continue
        try:
            section, have = check_found(open_checked(path), series, chosen, sizes, plane)
        except (ScoreprobeError, OSError) as e:   # a junk store at a default name fails no report
            hint = f"; --store {path} shows it as it is" if isinstance(e, NotAsComputed) else ""
            skipped.append((path, _reason(str(e), path) + hint))
            continue
        if section in sections and section not in use:
            use[section] = (path, have)
    return use, skipped


def _reason(text, path):
    """A StoreError's text without the advice meant for --store and without repeating the path."""
    text = text.split(": leave it out of the report")[0]
    return text.replace(f"store {path} ", "").replace(f"store {path}: ", "")
