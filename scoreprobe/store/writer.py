"""StoreWriter: the single, crash-safe writer of one store (see `scoreprobe.store`).

    with StoreWriter(path, config, overwrite=False) as w:   # lock, clean leftovers, repair, verify
        for step in steps_to_compute(w.done): w.write(ds_of_one_step)
        w.finish()                                            # swap a replacement store into place

Visibility: each `write` ends with one atomic commit of the root metadata (`scoreprobe.store.commit`), so plain
readers only ever see complete steps. A new store (or the replacement of an empty or partial
directory) is built beside `path` as `<name>.scoreprobe-new` and renamed into place after its first
step; with `overwrite`, the existing store stays in place, intact, until `finish`. Damaged steps
(checksum mismatch) are reported with a StoreDamageWarning and rewritten in place by `write`.
"""
import functools
import os
import shutil
import warnings

import numpy as np
import zarr
from xarray.conventions import encode_cf_variable

from scoreprobe.store import check, commit
from scoreprobe.store import format as fmt
from scoreprobe.errors import StoreDamageWarning, StoreError, StoreRepairWarning, user_stacklevel
from scoreprobe.store.lock import StoreLock, file_system_hint

_PENDING_OVERWRITE = set()  # paths `prepare_store(..., overwrite=True)` marked for replacement in this process


def request_overwrite(path):
    """Make the next StoreWriter of `path` in this process replace the store (legacy prepare_store)."""
    _PENDING_OVERWRITE.add(os.path.abspath(fmt.resolve_path(path)))


def _file_system_errors(method):
    """`method` with OSError (a full disk, a read-only mount, a path the system will not create)
    as one StoreError; the steps committed before it are kept, the next writer repairs the rest."""
    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except OSError as e:
            hint = file_system_hint(e, "choose another out=, or rerun to resume")
            where = f" ({e.filename})" if e.filename else ""
            raise StoreError(f"cannot write the store {self.path}: {e.strerror or e}{where}; {hint}") from e
    return wrapped


def _repaired(message):
    """What was done to a store an interrupted run left: a StoreRepairWarning at the caller's line."""
    warnings.warn(message, StoreRepairWarning, stacklevel=user_stacklevel())


class StoreWriter:
    """Exclusive writer of the store at `path` for an analysis with `config` (None: not checked)."""

    def __init__(self, path, config=None, overwrite=False, history=None):
        self.path = fmt.resolve_path(path)
        self.config = None if config is None else fmt.normalize_config(config)
        self.overwrite = bool(overwrite) or os.path.abspath(self.path) in _PENDING_OVERWRITE
        self.history, self.lock = history, StoreLock(self.path)
        self.target, self.publish = commit.sibling(self.path, "new"), "now"
        self.attrs, self.steps, self.digests, self.static, self.damaged = None, [], [], {}, {}
        self.bad_static = []   # step-free arrays whose chunks fail their checksums (rewritten by `write`)
        self.models, self.legacy = [], False   # per step: identity of the model measured (scoreprobe.sweep.identity)

    @_file_system_errors
    def __enter__(self):
        self.lock.acquire()
        try:
            self._prepare()
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, *exc):
        self.lock.release()

    @property
    def done(self):
        """Committed, undamaged steps in the order they were written."""
        return [s for s in self.steps if s not in self.damaged]

    def _prepare(self):
        note = commit.clean_leftovers(self.path, keep_new=True)
        if note:
            _repaired(note)
        state, root = fmt.inspect(self.path, overwrite=self.overwrite)
        _PENDING_OVERWRITE.discard(os.path.abspath(self.path))
        if self._resume_replacement(state):
            return
        if state != "store":
            return
        if self.overwrite:
            self.publish = "finish"
            return
        if self.config is not None:   # an analysis is to be resumed (not just attributes updated)
            if "models" not in ((root.get("attributes") or {}).get(fmt.RECORD_ATTR) or {}):
                raise StoreError(f"store {self.path} was written before scoreprobe recorded which model each step "
                                 "measured, so it cannot be resumed safely; pass overwrite=True to recompute it "
                                 "or write to another out=")
            fmt.check_config(self.path, root, self.config)
        self.target, self.publish = self.path, None
        self._load(root)

    def _resume_replacement(self, state):
        """Continue the new store an interrupted run left beside `path` when it holds this analysis
        and would replace what is there (`overwrite`, or nothing published yet); else remove it."""
        new = self.target
        if not new.exists():
            return False
        try:
            kind, root = fmt.inspect(new)
            usable = (kind == "store" and self.config is not None and (self.overwrite or state != "store")
                      and not fmt.config_diff(fmt.stored_config(new), self.config))
        except (StoreError, OSError, ValueError):
            usable = False
        if not usable:
            shutil.rmtree(new)
            _repaired(f"removed {new.name}, the unfinished store of an interrupted run")
            return False
        _repaired(f"resuming {new.name}, the unfinished store an interrupted run left beside {self.path}")
        self._load(root)
        self.publish = "finish"
        if state != "store":  # killed before its first publication: nothing to keep at `path`
            self._swap()
        return True

    def _load(self, root):
        """Repair what a killed write (or a deleted array folder) left, read the commit record,
        verify checksums."""
        if (root.get("consolidated_metadata") or {}).get("metadata") is None:  # written before commits
            group = zarr.open_group(str(self.target), mode="r+", zarr_format=3, use_consolidated=False)
            fmt.truncate(group, fmt.committed(root))
        else:
            self._restore(commit.committed_metas(self.target, root))
        self.attrs = dict(root.get("attributes") or {})
        record = self.attrs.get(fmt.RECORD_ATTR) or {}
        self.steps = fmt.written_steps(self.target)
        self.digests = list(record.get("digests") or [None] * len(self.steps))
        self.legacy = "models" not in record   # written before steps recorded their model
        self.models = list(record.get("models") or [None] * len(self.steps))
        self.static = record.get("static") or {}
        if record.get("static") is None or None in self.digests:
            self._commit()  # first write since checksums: record them (trust on first use)
        self._verify()

    def _restore(self, metas):
        """Arrays' metadata back to the last commit; a StoreRepairWarning for what that changed."""
        gone = commit.missing_arrays(self.target, metas)
        fixed = [n for n in commit.restore_arrays(self.target, metas) if n not in gone]
        if gone:
            _repaired(f"repaired {self.target}: {', '.join(gone)} had no metadata (a deleted folder?); restored "
                      "it from the commit record (missing data are recomputed)")
        if fixed:
            _repaired(f"repaired {self.target}: undid the uncommitted part of an interrupted write "
                      f"({', '.join(fixed)})")

    def _verify(self):
        """Damaged steps are recomputed (`write` rewrites them in place); damaged step-free data are
        rewritten from the next step written, one committed step being recomputed if none is due."""
        bad = fmt.verify(self.target, static=False)
        self.damaged = {self.steps[i]: i for i in bad}
        self.bad_static = check.damaged_static(self.target, self.static)
        if bad:
            arrays = sorted({name for names in bad.values() for name in names})
            warnings.warn(f"store {self.path}: damaged data at steps {sorted(self.damaged)} "
                          f"({', '.join(arrays)}); recomputing them",
                          StoreDamageWarning, stacklevel=user_stacklevel())
        if self.bad_static and self.steps:
            if not bad:
                self.damaged[self.steps[-1]] = len(self.steps) - 1
            warnings.warn(f"store {self.path}: damaged step-independent data ({', '.join(self.bad_static)}); "
                          f"rewriting them from the recomputed step {min(self.damaged)}", StoreDamageWarning,
                          stacklevel=user_stacklevel())

    @_file_system_errors
    def write(self, ds, history=None, models=None):
        """Write the step(s) of `ds` (dims step, ...) and commit each one; `models`: the identity of
        the model each step measured (a list, one per step; see `scoreprobe.sweep.identity`), recorded with it."""
        if fmt.STEP_DIM not in ds.dims:
            raise StoreError("StoreWriter.write needs a Dataset with a 'step' dimension")
        ds = fmt.plain(ds)
        models = list(models) if models is not None else [None] * ds.sizes[fmt.STEP_DIM]
        for i in range(ds.sizes[fmt.STEP_DIM]):
            model = None if models[i] is None else fmt.normalize_config(models[i])
            self._write_one(ds.isel({fmt.STEP_DIM: slice(i, i + 1)}), history, model)

    def check_models(self, found):
        """StoreError unless every written step in `found` {step: identity of the model this run
        would measure there} holds that model (see `scoreprobe.sweep.identity.same`); nothing is
        reused silently."""
        from scoreprobe.sweep import identity
        for step in sorted(found):
            old, new = self.models[self.steps.index(step)], found[step]
            if identity.same(old, new):
                continue
            why = ("cannot tell whether it is the same model (no weights, model_id or fingerprint; pass model_id=)"
                   if old is None or new is None else "was measured on another model")
            raise StoreError(f"store {self.path}: step {step} {why} (stored: {identity.describe(old)}; "
                             f"now: {identity.describe(new)}); pass overwrite=True to replace the store "
                             "or write to another out=")

    def _write_one(self, part, history, model=None):
        s = int(part[fmt.STEP_DIM].values[0])
        if s in self.steps and s not in self.damaged:
            raise StoreError(f"steps [{s}] are already in {self.path}; refusing to write them twice")
        if not self.steps and self.attrs is None:
            self._create(part, history)
            self.models, self.legacy = [model], False
        else:
            index = self.damaged.pop(s, len(self.steps))
            self._write_at(part, index)
            if index == len(self.steps):
                self.steps.append(s)
                self.digests.append(None)
                self.models.append(model)
            else:
                self.digests[index] = None
                self.models[index] = model
        self._commit()
        if self.publish == "now":
            self._swap()

    def _create(self, part, history):
        part = part.copy()
        part.attrs.update({"Conventions": "CF-1.11", "history": fmt.history_line(history or self.history),
                           fmt.CONFIG_ATTR: fmt.config_json(self.config)})
        part.to_zarr(str(self.target), mode="w-", encoding=fmt.encoding(part), consolidated=False,
                     zarr_format=3, write_empty_chunks=True)
        self.attrs = commit.read_json(self.target / "zarr.json").get("attributes") or {}
        self.steps, self.digests = [int(part[fmt.STEP_DIM].values[0])], [None]
        metas = commit.disk_metas(self.target)
        self.static = check.static_digests(self.target, [n for n, m in metas.items()
                                                              if commit.step_axis(m) is None])

    def _write_at(self, part, index):
        """Write one step's values at `index` of every step array (resizing when appending)."""
        group = zarr.open_group(str(self.target), mode="r+", zarr_format=3, use_consolidated=False)
        if self.bad_static:
            self._rewrite_static(group, part)
        fmt.check_compatible(self.path, group, part)
        with zarr.config.set({"array.write_empty_chunks": True}):
            for name, var in part.variables.items():
                if fmt.STEP_DIM not in var.dims:
                    continue
                arr, values = group[name], np.asarray(encode_cf_variable(var, name=name).values)
                if index >= arr.shape[0]:
                    arr.resize((index + 1,) + tuple(arr.shape[1:]))
                try:
                    arr[index:index + 1] = values
                except (ValueError, TypeError) as e:
                    raise StoreError(f"cannot append to {self.path}: {name} does not fit the stored array "
                                     f"({type(e).__name__}: {e})") from e

    def _rewrite_static(self, group, part):
        """Write the damaged step-free arrays from `part`; StoreError unless they then match the
        record (the analysis gives other coordinates now: its steps would not fit together)."""
        for name in self.bad_static:
            var = part.variables[name]
            group[name][...] = np.asarray(encode_cf_variable(var, name=name).values)
        still = check.damaged_static(self.target, {n: self.static[n] for n in self.bad_static})
        if still:
            raise StoreError(f"store {self.path}: rewritten step-independent data ({', '.join(still)}) differ from "
                             "what was recorded; rerun what wrote it with overwrite=True")
        self.bad_static = []

    def _commit(self):
        """Checksum what is new and publish it in one atomic root rewrite."""
        metas = commit.disk_metas(self.target)
        step_arrays = [n for n, m in metas.items() if commit.step_axis(m) == 0]
        for i, d in enumerate(self.digests):
            if d is None:
                self.digests[i] = check.step_digests(self.target, metas, step_arrays, i)
        if not self.static:
            self.static = check.static_digests(self.target, [n for n in metas if n not in step_arrays])
        self.attrs.update({fmt.COMMIT_ATTR: len(self.steps),
                           fmt.RECORD_ATTR: {"steps": self.steps, "digests": self.digests, "static": self.static,
                                             **({} if self.legacy else {"models": self.models})}})
        commit.commit(self.target, self.attrs, metas)

    def _swap(self):
        commit.swap_in(self.target, self.path)
        self.target, self.publish = self.path, None

    @_file_system_errors
    def update_attrs(self, attrs):
        """Merge JSON-safe global `attrs` and commit (needs a written store)."""
        if self.attrs is None:
            raise StoreError(f"no zarr store at {self.path}")
        self.attrs.update(fmt.normalize_config(dict(attrs)))
        self._commit()

    def note_history(self, command=None):
        """Append a line (timestamp, version, command) to the CF `history` attribute."""
        old = (self.attrs or {}).get("history", "")
        self.update_attrs({"history": (old + "\n" if old else "") + fmt.history_line(command)})

    @_file_system_errors
    def finish(self):
        """Swap a completed replacement store into place (no-op when writing in place)."""
        if self.publish == "finish" and self.attrs is not None:
            self._swap()
