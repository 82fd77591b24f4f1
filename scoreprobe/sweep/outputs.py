"""Where a run's analyses live and what a store is called: the one rule every command follows.

The rule (docs/stores.md, "Where a run's analyses live"): a command that analyses a run directory RUN
writes its outputs to the current folder as `<run>.<name>` -- `<run>.clocks.zarr`, `<run>.dsm.zarr`,
`<run>.basins.zarr`, `<run>.clocks.png` (a bare `--plot`), ... -- where `<run>` is the run directory's
name (`output_stem`); the shipped series keeps the plain names (`clocks.zarr`, ...). The commands that
take a run directory and read its clocks find them by the same rule (`run_store`): `export-tb RUN`
exports `./<run>.clocks.zarr` (or a `RUN/clocks.zarr` put there with --out) with the run's training
log, as one TensorBoard run; `compare RUN` reuses it (`clocks_store_of`) and stores there what it
measures, so a second compare measures nothing again. A store found there is used only when it measured this run (its
recorded source: the run's name and the digest of its settings, `sweep.run_config_digest`).

Names shown for stores (`store_label`): the run a store measured (its recorded source name), so
`compare r1.clocks.zarr r2.clocks.zarr` and `export-tb` name the runs r1 and r2, not after the files
(a store of no run directory, e.g. of a {step: denoiser} mapping, keeps its folder's name).
"""
import json
import re
from pathlib import Path

CHECKPOINT_FOLDERS = ("checkpoints", "ckpt", "ckpts")   # folders of checkpoint files named by the run above them


def output_stem(path):
    """The name a run's default outputs start with: '' for the shipped series (plain names), else the
    run directory's name (for a checkpoints/ or ckpt/ folder the run above it); characters other than
    letters, digits and . _ + - become '-'."""
    path = Path(str(path))
    try:
        from scoreprobe.loading.series import DEFAULT_SERIES, checkpoints_dir
        if path.resolve() == (Path(checkpoints_dir()) / DEFAULT_SERIES).resolve():
            return ""
    except OSError:
        pass
    text = path.parent.name if path.name in CHECKPOINT_FOLDERS and path.parent.name else path.name
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-.")[:80]


def run_output(run_dir, name, folder="."):
    """Path of the default output `name` (e.g. 'clocks.zarr') of the run at `run_dir`: folder/<run>.<name>."""
    stem = output_stem(run_dir)
    return Path(folder) / (f"{stem}.{name}" if stem else name)


def _run_meta(run_dir):
    """run.json of a run directory as a dict, or None when it cannot be read."""
    from scoreprobe.limits import MAX_JSON_BYTES
    path = Path(run_dir) / "run.json"
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            return None
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) and isinstance(meta.get("config"), dict) else None


def measured_run(store, run_dir):
    """'' when the clocks store at `store` measured the run at `run_dir` (its recorded source names the
    run directory and the digest of its settings), else why not (text)."""
    from scoreprobe.errors import ScoreprobeError
    from scoreprobe.store import stored_config
    from scoreprobe.sweep import run_config_digest
    try:
        config = stored_config(store) or {}
    except (ScoreprobeError, OSError, ValueError):
        return "it cannot be read"
    if config.get("probe") != "clocks":
        return f"it holds a {config.get('probe')!r} analysis, not clocks"
    source, meta = config.get("source") or {}, _run_meta(run_dir)
    if meta is None:
        return f"{run_dir}/run.json cannot be read"
    if source.get("name") not in (Path(run_dir).name, Path(run_dir).resolve().name) or \
            source.get("config_sha256") != run_config_digest(meta["config"], meta):
        return f"it measured another run ({source.get('name') or 'unnamed'}, or other settings)"
    return ""


def run_store(run_dir, name="clocks.zarr", folder="."):
    """(path, notes) of the store of `run_dir` that `name`'s command wrote by the rule above: folder/<run>.<name>,
    else run_dir/<name>; path None when neither exists or measured this run (notes: why each found one was
    passed over)."""
    notes = []
    for path in (run_output(run_dir, name, folder), Path(run_dir) / name):
        if (path / "zarr.json").is_file():
            why = measured_run(path, run_dir)
            if not why:
                return path, notes
            notes.append(f"{path} is not used: {why}")
    return None, notes


def clocks_store_of(run_dir, folder="."):
    """Where the clocks of `run_dir` are kept: the store `run_store` finds, else folder/<run>.clocks.zarr (new)."""
    found, _ = run_store(run_dir, "clocks.zarr", folder)
    return found if found is not None else run_output(run_dir, "clocks.zarr", folder)


def store_label(path):
    """The name a store is shown under: the run it measured (its recorded source name) for a store of a
    checkpoint series, else its folder's name as it is (a store of a {step: denoiser} mapping)."""
    from scoreprobe.errors import ScoreprobeError
    from scoreprobe.store import stored_config
    try:
        config = stored_config(path) or {}
    except (ScoreprobeError, OSError, ValueError):
        config = {}
    source = config.get("source") if isinstance(config.get("source"), dict) else {}
    name = source.get("name") if source.get("type") == "series" else None
    return name if isinstance(name, str) and name.strip() else Path(path).resolve().name
