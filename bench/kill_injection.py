"""Kill-injection check of scoreprobe stores: SIGKILL a writer at N points, then read and resume.

The writer is a subprocess computing a tiny analysis on the oracles (`--probe` clocks, basins,
field or dsm; 4 steps) into a zarr store through the public API. It counts its file-system events (zarr writes, atomic
JSON writes, renames, tree removals) and SIGKILLs itself just before event K. For every K the
parent checks:

  (a) a plain `xr.open_zarr` of the store opens (when the store exists) and shows only complete
      steps: every visible step equals the same step of an uninterrupted run (mode `fresh`), or
      the store is exactly the old one or exactly the new one (mode `overwrite`);
  (b) rerunning the same command gives a store equal to the uninterrupted run (history aside),
      with no lock or leftover directories beside it.

    python bench/kill_injection.py --n 20                  # 20 points per mode, both modes
    python bench/kill_injection.py --n 10 --probe basins   # the same for basins (field, dsm)
    python bench/kill_injection.py --n 3 --modes fresh     # quick
    python bench/kill_injection.py --points 255-273        # every event in a range (e.g. the last commit and swap)
    python bench/kill_injection.py --swap rename --modes overwrite --points 270-280   # the fallback swap

`--swap rename` makes the writer replace a store by two renames (the fallback for file systems
without an atomic exchange) so that a kill between them is injected too; a plain reader then finds
no store at `--out` (counted apart), and the rerun must restore or finish the swap.

Prints one line per point and the counts; exit status 1 when any check failed.
"""
import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the checkout's scoreprobe, installed or not

NEW_SEED, OLD_SEED = 0, 1


# ---------------------------------------------------------------------------------------------
# The writer (child process)
# ---------------------------------------------------------------------------------------------


def _install_kill_hooks(kill_at, swap="exchange"):
    """Count file-system events of the writer; SIGKILL this process just before event `kill_at`."""
    import zarr.storage
    count = [0]

    def tick():
        count[0] += 1
        if count[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def wrap(owner, name):
        real = getattr(owner, name)
        if asyncio.iscoroutinefunction(real):
            async def hooked(*a, **k):
                tick()
                return await real(*a, **k)
        else:
            def hooked(*a, **k):
                tick()
                return real(*a, **k)
        setattr(owner, name, hooked)

    targets = [(zarr.storage.LocalStore, "set"), (zarr.storage.LocalStore, "delete"), (os, "replace"),
               (os, "rename"), (shutil, "rmtree")]
    try:
        from scoreprobe.store import commit as commit_mod
        targets += [(commit_mod, "write_json_atomic"), (commit_mod, "_exchange")]
        if swap == "rename":  # as on a file system without renameat2: two renames
            commit_mod._exchange = lambda a, b: False
    except ImportError:  # an older scoreprobe (to see what the checks catch there)
        pass
    for owner, name in targets:
        wrap(owner, name)
    return count


def _analysis(probe, seed):
    """(function, {step: oracle}, kwargs) of a tiny analysis; `seed` 0 / 1 gives two different configs."""
    from scoreprobe.data.datasets import make_dataset
    from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
    from scoreprobe.data.rules import Parity
    from scoreprobe.slices import auto_plane
    rule = Parity(2, shape=(3, 4))
    data = make_dataset(rule, 16, 16, seed=0)
    mapping = {0: RuleDenoiser(rule), 10: EmpiricalDenoiser(data.train), 20: RuleDenoiser(rule),
               30: EmpiricalDenoiser(data.train)}
    common = dict(dataset=data, rule=rule, progress=False)
    if probe == "clocks":
        from scoreprobe.stats.clocks import clocks
        return clocks, mapping, dict(n_samples=8, n_steps=6, seed=seed, n_boot=50, **common)
    if probe == "dsm":
        from scoreprobe.probes.dsm import dsm_by_sigma
        return dsm_by_sigma, mapping, dict(sigmas=[0.1, 0.5, 2.0], n_noise=2, seed=seed, **common)
    plane = auto_plane(data, rule, seed=0)
    if probe == "basins":
        from scoreprobe.probes.basins import basins
        return basins, mapping, dict(plane=plane, sigma_start=(1.0, 0.5)[seed], res=6, n_steps=6, **common)
    from scoreprobe.probes.field import score_field
    return score_field, mapping, dict(plane=plane, sigmas=[(1.0, 0.5)[seed]], res=6, **common)


def child(out, kill_at, seed, overwrite, probe="clocks", swap="exchange"):
    """Write the tiny store of `probe`; print the number of file-system events when not killed."""
    fn, mapping, kw = _analysis(probe, seed)   # imports happen before the hooks count events
    count = _install_kill_hooks(kill_at, swap)
    fn(mapping, out=out, overwrite=overwrite, **kw)
    print(f"EVENTS {count[0]}")


# ---------------------------------------------------------------------------------------------
# The checks (parent process)
# ---------------------------------------------------------------------------------------------


PROBE, SWAP = ["clocks"], ["exchange"]   # the analysis the writer runs, how it swaps (--probe, --swap)


def run_child(out, kill_at=0, seed=NEW_SEED, overwrite=False):
    """(return code, stdout+stderr) of one writer run (-9 when it was killed)."""
    cmd = [sys.executable, __file__, "--child", str(out), "--kill-at", str(kill_at), "--seed", str(seed),
           "--probe", PROBE[0], "--swap", SWAP[0]]
    cmd += ["--overwrite"] if overwrite else []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    return p.returncode, p.stdout + p.stderr


def _load(path, plain):
    import xarray as xr

    from scoreprobe import store
    ds = xr.open_zarr(str(path), chunks=None).load() if plain else store.open_store(path).load()
    ds.attrs.pop("history", None)
    return ds.sortby("step") if "step" in ds.dims else ds


def _same_steps(shown, ref):
    """Every step `shown` has is in `ref`, with equal data variables."""
    import xarray as xr
    steps = [int(s) for s in shown.step.values]
    if not set(steps) <= {int(s) for s in ref.step.values}:
        return False
    xr.testing.assert_equal(shown.drop_attrs(), ref.sel(step=steps).drop_attrs())
    return True


def check_reader(path, mode, ref, old):
    """(a): what a plain reader sees after the kill. Returns (ok, description)."""
    if not path.exists():
        from scoreprobe.store.commit import sibling
        if mode == "overwrite" and sibling(path, "old").is_dir():
            return True, "NO STORE: killed between the two renames of the fallback swap"
        return mode == "fresh", "no store yet"
    try:
        shown = _load(path, plain=True)
    except Exception as e:  # noqa: BLE001 -- any failure to open is what we count
        return False, f"plain open_zarr failed: {type(e).__name__}: {e}"
    try:
        if mode == "fresh":
            return _same_steps(shown, ref), f"{shown.sizes.get('step', 0)} complete steps"
        is_old = shown.attrs["scoreprobe_config"] == old.attrs["scoreprobe_config"]
        want = old if is_old else ref
        ok = _same_steps(shown, want) and shown.sizes["step"] == want.sizes["step"]
        return ok, f"{'old' if is_old else 'new'} store, {shown.sizes['step']} steps"
    except AssertionError as e:
        return False, f"visible data differ from a complete run: {str(e).splitlines()[0]}"


def check_resume(path, mode, ref_store):
    """(b): rerun the command; the store must equal the uninterrupted one, without leftovers."""
    import xarray as xr
    rc, text = run_child(path, overwrite=(mode == "overwrite"))
    if rc != 0:
        return False, f"resume failed (rc {rc}): {text.strip().splitlines()[-1:]}"
    extra = sorted(p.name for p in path.parent.iterdir() if p.name != path.name)
    extra += sorted(str(f.relative_to(path)) for f in path.rglob("*") if f.name.endswith((".partial", ".tmp")))
    if extra:
        return False, f"leftovers after resume: {extra}"
    try:
        xr.testing.assert_identical(_load(path, plain=False), _load(ref_store, plain=False))
    except AssertionError as e:
        return False, f"resumed store differs: {str(e).splitlines()[0]}"
    return True, "resumed store equals the uninterrupted one"


def one_point(work, mode, k, refs):
    """Kill a writer before event k in `mode`, then check (a) and (b). Returns (killed, ok_a, ok_b, note)."""
    d = work / f"{mode}-{k}"
    d.mkdir()
    path = d / "s.zarr"
    if mode == "overwrite":
        shutil.copytree(refs["old_store"], path)
    rc, text = run_child(path, kill_at=k, overwrite=(mode == "overwrite"))
    killed = rc == -signal.SIGKILL
    if not killed and rc != 0:
        return killed, False, False, f"writer failed (rc {rc}): {text.strip().splitlines()[-1:]}"
    ok_a, note_a = check_reader(path, mode, refs["new"], refs["old"])
    ok_b, note_b = check_resume(path, mode, refs["new_store"])
    shutil.rmtree(d)
    return killed, ok_a, ok_b, f"{note_a}; {note_b}"


def references(work):
    """Uninterrupted runs: the new store (seed 0), the old one (seed 1); the new run's event count."""
    refs = {}
    for name, seed in (("new", NEW_SEED), ("old", OLD_SEED)):
        p = work / f"ref-{name}" / "s.zarr"
        p.parent.mkdir()
        rc, text = run_child(p, seed=seed)
        if rc != 0:
            raise SystemExit(f"reference run failed: {text}")
        refs[name], refs[f"{name}_store"] = _load(p, plain=False), p
        refs[f"{name}_events"] = int(text.split("EVENTS")[-1].split()[0])
    p = work / "ref-overwrite" / "s.zarr"  # replacing the old store: count its events, check the result
    shutil.copytree(refs["old_store"], p)
    rc, text = run_child(p, overwrite=True)
    if rc != 0 or not check_resume(p, "overwrite", refs["new_store"])[0]:
        raise SystemExit(f"uninterrupted overwrite failed: {text}")
    refs["overwrite_events"] = int(text.split("EVENTS")[-1].split()[0])
    return refs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20, help="injection points per mode (spread over all events)")
    ap.add_argument("--modes", default="fresh,overwrite", help="fresh (new store), overwrite (replace one)")
    ap.add_argument("--points", default=None, help="explicit event range FIRST-LAST instead of --n spread points")
    ap.add_argument("--workdir", default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--probe", default="clocks", choices=["clocks", "basins", "field", "dsm"],
                    help="the analysis the writer runs (tiny, on the oracles)")
    ap.add_argument("--swap", default="exchange", choices=["exchange", "rename"],
                    help="how a replacement is swapped in: atomic exchange (Linux) or the two-rename fallback")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--kill-at", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=NEW_SEED, help=argparse.SUPPRESS)
    ap.add_argument("--overwrite", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    PROBE[0], SWAP[0] = args.probe, args.swap
    if args.child:
        return child(args.child, args.kill_at, args.seed, args.overwrite, args.probe, args.swap)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="kill_injection_"))
    work.mkdir(parents=True, exist_ok=True)
    refs = references(work)
    totals = {}
    for mode in args.modes.split(","):
        n_events = refs[f"{'overwrite' if mode == 'overwrite' else 'new'}_events"]
        points = sorted({max(1, round(1 + i * (n_events - 1) / max(args.n - 1, 1))) for i in range(args.n)})
        if args.points:
            first, last = (int(v) for v in args.points.split("-"))
            points = list(range(first, min(last, n_events) + 1))
        c = totals[mode] = {"points": len(points), "killed": 0, "reader_ok": 0, "resume_ok": 0, "gap": 0}
        for k in points:
            killed, ok_a, ok_b, note = one_point(work, mode, k, refs)
            c["killed"] += killed
            c["reader_ok"] += ok_a
            c["resume_ok"] += ok_b
            c["gap"] += "NO STORE" in note
            print(f"{mode:9s} kill before event {k:3d}/{n_events}: (a) {'ok ' if ok_a else 'BAD'} "
                  f"(b) {'ok ' if ok_b else 'BAD'}  {note}", flush=True)
    print(f"{args.probe}: writer events in an uninterrupted run: {refs['new_events']} (new store), "
          f"{refs['overwrite_events']} (replacing a store)")
    for mode, c in totals.items():
        print(f"{mode}: {c['points']} injection points, {c['killed']} writers killed, plain reader ok "
              f"{c['reader_ok']}/{c['points']}, resume equal {c['resume_ok']}/{c['points']}"
              + (f", reader found no store {c['gap']}" if args.swap == "rename" else ""))
    if not args.workdir:
        shutil.rmtree(work)
    return 0 if all(c["reader_ok"] == c["resume_ok"] == c["points"] for c in totals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
