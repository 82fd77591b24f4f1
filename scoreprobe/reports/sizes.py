"""The sizes of a report: REPORT_SIZES (the defaults), each `--size` value checked against
scoreprobe.limits (the probes' own bounds, and the rows the sizes make for a series) and the page's
size estimated from them, all before anything is computed.
"""
import numpy as np

from scoreprobe.defaults import DEFAULT_N_STEPS
from scoreprobe.errors import ConfigError
from scoreprobe.limits import (MAX_ITEMS, MAX_ODE_STEPS, MAX_PAGE_BYTES, MAX_SAMPLES, MAX_SIGMA, MAX_SIGMAS,
                               check_grid, check_int, check_positive, check_rows, check_seed)

# name: default. Sizes of every section the report computes when no store holds it.
REPORT_SIZES = {
    "n_samples": 1000,            # clocks: samples per checkpoint (the clocks' own default)
    "n_steps": DEFAULT_N_STEPS,   # Heun steps of every PF-ODE (clocks, basins, retention)
    "sigma_start": (0.5, 1.0, 2.0),   # basins: starting noise levels; also the σ of the score field
    "res": 16,                    # basins: grid points per axis
    "field_res": 24,              # score field: grid points per axis
    "retention_sigmas": (0.2, 0.5, 1.0, 2.0),
    "retention_items": 16,        # retention: training and held-out items each
    "retention_noise": 4,         # retention: restarts per item and σ
    "dsm_sigmas": 20,             # DSM: log-spaced σ in [0.002, 80]
    "dsm_noise": 2,               # DSM: noise draws per item
    "dsm_heldout": 120,           # DSM: held-out items (all training items are used)
    "seed": 0,
    "gallery": 12,                # gallery: samples per checkpoint shown (0: none; at most MAX_GALLERY)
}
PAGE_ONLY_SIZES = ("gallery",)    # sizes of what the page draws, not of a store (not in the cache's digest)
MAX_GALLERY = 64                  # gallery samples per checkpoint at most
MAX_ENDPOINT_RECORDS = 4096       # distinct basin endpoints (image, state, item) on one page at most
MAX_ENDPOINT_CELL_BYTES = 4 << 20  # ... and at most this many bytes of their cells (H·W bytes each)


def _as_int(name, value):
    """An integer size from the CLI's text or the API's number (integral floats accepted, bools not)."""
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise ConfigError(f"report size {name}: expected an integer, got {value[:40]!r}") from None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value   # checked by limits.check_int (bools, other floats, None refused there)


def _as_floats(name, value):
    """A tuple of floats from the CLI's text(s) or the API's number(s); ConfigError for anything else."""
    try:
        items = [value] if isinstance(value, (str, bytes)) else list(np.atleast_1d(np.asarray(value, dtype=object)))
        if not items or any(isinstance(v, (bool, np.bool_)) for v in items):
            raise ValueError
        values = tuple(float(v) for v in items)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"report size {name}: expected numbers, got {str(value)[:40]!r}") from None
    if len(values) > MAX_SIGMAS:
        raise ConfigError(f"report size {name}: {len(values)} values, more than {MAX_SIGMAS} (scoreprobe.limits)")
    return tuple(check_positive(v, f"report size {name}", hi=MAX_SIGMA) for v in values)


def _checked(name, value, n_bits):
    """One report size checked against scoreprobe.limits (the same bounds the probes apply)."""
    if isinstance(REPORT_SIZES[name], tuple):
        return _as_floats(name, value)
    value, what = _as_int(name, value), f"report size {name}"
    if name in ("res", "field_res"):
        try:
            return check_grid(value, n_bits)
        except ConfigError as e:
            raise ConfigError(f"report size {name}: {e}") from None
    hi = {"n_steps": MAX_ODE_STEPS, "dsm_sigmas": MAX_SIGMAS, "retention_items": MAX_ITEMS,
          "dsm_heldout": MAX_ITEMS, "retention_noise": MAX_SAMPLES, "dsm_noise": MAX_SAMPLES}.get(name)
    if name == "seed":
        return check_seed(value, what)
    if name == "gallery":
        return check_int(value, what, 0, MAX_GALLERY)
    if name == "n_samples":
        return check_rows(value, n_bits, what)
    return check_int(value, what, 1, hi)


def check_sizes(sizes, series=None):
    """REPORT_SIZES updated with `sizes` ({name: value}), every value checked against scoreprobe.limits
    (and the rows it makes, for `series`' image width and dataset) before anything is computed;
    ConfigError for an unknown name or a bad value."""
    n_bits = series.rule.n_bits if series is not None else 1
    out = dict(REPORT_SIZES)
    for name, value in (sizes or {}).items():
        if name not in REPORT_SIZES:
            raise ConfigError(f"unknown report size {name!r}; known: {', '.join(REPORT_SIZES)}")
        out[name] = _checked(name, value, n_bits)
    n_train, n_held = (len(series.dataset.train), len(series.dataset.heldout)) if series is not None else (1, 1)
    check_rows(2 * min(out["retention_items"], max(n_train, n_held)) * out["retention_noise"]
               * len(out["retention_sigmas"]), n_bits,
               "retention restarts (2 x retention_items x retention_noise x len(retention_sigmas))")
    check_rows((n_train + min(out["dsm_heldout"], n_held)) * out["dsm_noise"], n_bits,
               "DSM rows per sigma ((training items + dsm_heldout) x dsm_noise)")
    return out


def page_bytes(section, n_steps, n_sigma=0, res=0):
    """About how many bytes `section` adds to the page at `n_steps` checkpoints, `n_sigma` noise
    levels and a res x res plane grid: the base64 arrays dominate (int8 maps, three float32 fields
    of the model per step and of two oracles)."""
    b64 = 4 / 3
    return int({"clocks": 200 * n_steps, "dsm": 300_000, "retention": 60 * n_steps * n_sigma,
                "basins": (b64 * res ** 2 + 120) * n_steps * n_sigma,
                "field": b64 * 4 * 3 * n_sigma * res ** 2 * (n_steps + 2)}[section])


def gallery_bytes(n_steps, n_gallery, n_bits, n_cells, max_records):
    """About how many bytes the gallery adds: n_gallery sample records per checkpoint and, on a basin
    grid of n_cells (steps x sigma_start x res²), an int16 record index per cell and at most
    max_records distinct endpoint records (each its cells, at most n_bits bytes, and ~100 bytes of
    state, label and items)."""
    b64 = 4 / 3
    record = b64 * n_bits + 100
    return int(n_steps * n_gallery * record + b64 * 2 * n_cells + min(n_cells, max_records) * record)


def section_dims(section, sizes):
    """(n_sigma, res) of a section computed at `sizes` (see page_bytes)."""
    return {"basins": (len(sizes["sigma_start"]), sizes["res"]), "field": (len(sizes["sigma_start"]), sizes["field_res"]),
            "retention": (len(sizes["retention_sigmas"]), 0)}.get(section, (0, 0))


def store_dims(ds):
    """(n_sigma, res) of a store's Dataset (see page_bytes)."""
    n_sigma = ds.sizes.get("sigma_start", ds.sizes.get("sigma", 0))
    return n_sigma, max(ds.sizes.get("u", 0), ds.sizes.get("v", 0))


def check_page_size(plan):
    """ConfigError, before computing, when the page the plan makes would pass limits.MAX_PAGE_BYTES."""
    total = 400_000 + sum(page_bytes(s, len(it.have) if it.given else len(plan.steps),
                                     *(it.dims or section_dims(s, plan.sizes))) for s, it in plan.items.items())
    if plan.gallery:
        basins = plan.items.get("basins")
        n_sigma, res = (basins.dims or section_dims("basins", plan.sizes)) if basins else (0, 0)
        n_basin_steps = (len(basins.have) if basins.given else len(plan.steps)) if basins else 0
        total += gallery_bytes(len(plan.steps), min(plan.sizes["gallery"], plan.sizes["n_samples"]),
                               plan.series.rule.n_bits, n_basin_steps * n_sigma * res ** 2, MAX_ENDPOINT_RECORDS)
    if total > MAX_PAGE_BYTES:
        raise ConfigError(f"the page would take about {total / 2**20:.0f} MiB, more than the limit "
                          f"{MAX_PAGE_BYTES >> 20} MiB (scoreprobe.limits.MAX_PAGE_BYTES): use smaller --size res / "
                          "field_res values, fewer --steps or smaller stores")


def stored_settings(section, sizes):
    """The config values a store of `section` computed by the report at `sizes` holds (what its cache is
    checked against before it is extended; `reports.found` adds what a command may choose otherwise)."""
    from scoreprobe.defaults import DEFAULT_SOLVER
    from scoreprobe.ode import solver_config
    ode = solver_config(DEFAULT_SOLVER, sizes["n_steps"])   # basins and retention: the default solver
    return {"clocks": {"n_samples": sizes["n_samples"], "n_steps": sizes["n_steps"], "seed": sizes["seed"]},
            "basins": {"res": sizes["res"], "sigma_start": list(sizes["sigma_start"]), **ode},
            "field": {"res": sizes["field_res"], "sigmas": list(sizes["sigma_start"])},
            "retention": {"sigmas": list(sizes["retention_sigmas"]), "n_noise": sizes["retention_noise"],
                          **ode, "seed": sizes["seed"]},
            "dsm": {"n_noise": sizes["dsm_noise"], "seed": sizes["seed"]}}[section]
