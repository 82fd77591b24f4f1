"""Gather the Datasets of a report's sections: read the given stores, resume or compute the cached
ones through the public probe functions (`clocks`, `basins`, `score_field`, `retention`,
`dsm_by_sigma`), so the page shows exactly what those functions and their stores hold."""
import json
from pathlib import Path

from scoreprobe.errors import StoreError


def _plane(plan):
    from scoreprobe.slices import plane_from_spec
    s = plan.series
    return plane_from_spec(plan.plane_spec, s.dataset, s.rule, seed=plan.sizes["seed"])


def _compute(section, plan, plane, device, progress):
    """Run (or resume) one section into its cache store with the report's sizes; returns its Dataset."""
    from scoreprobe.probes.basins import basins
    from scoreprobe.probes.retention import retention
    from scoreprobe.stats.clocks import clocks
    from scoreprobe.probes.dsm import dsm_by_sigma
    from scoreprobe.probes.field import score_field
    s, z, item = plan.series, plan.sizes, plan.items[section]
    kw = dict(steps=plan.steps, out=str(item.path), progress=progress)
    if section == "clocks":
        return clocks(s, n_samples=z["n_samples"], seed=z["seed"], n_steps=z["n_steps"], device=device, **kw)
    if section == "basins":
        return basins(s, plane, sigma_start=z["sigma_start"], res=z["res"], n_steps=z["n_steps"], device=device,
                      keep_bits=_keep_bits(item.path), **kw)
    if section == "field":
        return score_field(s, plane, list(z["sigma_start"]), res=z["field_res"], oracles=True, device=device, **kw)
    if section == "retention":
        return retention(s, sigmas=z["retention_sigmas"], n_noise=z["retention_noise"], seed=z["seed"],
                         n_train=min(z["retention_items"], len(s.dataset.train)),
                         n_heldout=min(z["retention_items"], len(s.dataset.heldout)), n_steps=z["n_steps"],
                         device=device, **kw)
    return dsm_by_sigma(s, sigmas=z["dsm_sigmas"], n_noise=z["dsm_noise"], seed=z["seed"],
                        n_heldout=min(z["dsm_heldout"], len(s.dataset.heldout)), device=device, **kw)


def _keep_bits(path):
    """Whether the basins cache keeps the endpoints' bits (the gallery's endpoint images): a new cache
    does; one made before the gallery is resumed as it is (the page then shows only the endpoints
    that are items or anchors as images)."""
    from scoreprobe.store import inspect, stored_config
    if inspect(path)[0] in ("absent", "empty"):
        return True
    return bool((stored_config(path) or {}).get("keep_bits", False))


def _read(section, path):
    """A given store as a Dataset; a clocks store without τ in its attrs, or with τ read under an earlier
    τ definition (store.versions.READING_ONLY), gets them computed (same function)."""
    from scoreprobe.store import open_store
    from scoreprobe.store.versions import tau_attrs_current
    ds = open_store(path)
    if section == "clocks" and not tau_attrs_current(ds.attrs):
        from scoreprobe.stats.taus import tau_summary
        ds.attrs.update(tau_summary(ds, warn=False))
    return ds.load()


def gather(plan, device="cpu", progress=None):
    """{section: Dataset} for every section of `plan`, computing what is missing.

    The cache folder is created when something is computed; a cached store refused by its probe
    (StoreError) is named with the report's own advice."""
    plane = _plane(plan) if any(not it.given for it in plan.items.values()) else None
    out = {}
    for section, item in plan.items.items():
        if item.given:
            out[section] = _read(section, item.path)
            continue
        item.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            out[section] = _compute(section, plan, plane, device, progress).load()
        except StoreError as e:
            raise StoreError(f"report cache: {e} (or choose another --cache)") from e
    return out


def store_record(path):
    """What a store records about itself: its commit record (steps, per-step chunk checksums) and
    the digest of that record, the config and the CF history. Plain JSON values."""
    import hashlib
    from scoreprobe.store import commit
    from scoreprobe.store.format import CONFIG_ATTR, RECORD_ATTR
    root = commit.read_json(Path(path) / "zarr.json")
    attrs = root.get("attributes") or {}
    record = attrs.get(RECORD_ATTR) or {}
    digest = hashlib.blake2b(json.dumps(record, sort_keys=True).encode(), digest_size=16).hexdigest()
    per_step = [hashlib.blake2b(json.dumps(d, sort_keys=True).encode(), digest_size=8).hexdigest() if d else None
                for d in record.get("digests") or []]
    extra = {k: v for k, v in record.items() if k not in ("steps", "digests", "static")}
    return {"path": str(path), "record_digest": digest, "steps": record.get("steps") or [],
            "step_digests": per_step, "n_checksums": sum(len(d or {}) for d in record.get("digests") or [])
            + len(record.get("static") or {}), "static": record.get("static") or {}, "extra": extra,
            "config": json.loads(attrs.get(CONFIG_ATTR) or "{}"), "history": attrs.get("history", "")}
