"""Race check of scoreprobe stores: two `scoreprobe basins --out same.zarr` released at one instant.

Each trial starts two processes running the real CLI (`scoreprobe.cli.main`) on the shipped
series with a tiny grid. Both import everything first, then wait at a gate (a directory each one
touches) and start the command together. Three scenarios:

  fresh      no store at --out;
  resume     a store holding the first checkpoint already (both try to add the others);
  overwrite  a store of another analysis (σ_start 0.5), both pass --overwrite.

A trial is clean when each process exits 0 or 2, an exit 2 prints one `error:` line and no
traceback, at least one process succeeds, the final store opens with `scoreprobe.open_store` and
with a plain `xr.open_zarr`, equals an uninterrupted run (history aside), and nothing is left
beside it (no lock, no `.scoreprobe-new` / `-old`). Anything else counts as a damaged store.

    python bench/race.py --n 8            # 8 trials per scenario (about 4 minutes on 2 cores)
    python bench/race.py --n 2 --scenarios fresh

Prints one line per trial and the counts; exit status 1 when any trial was not clean.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ARGS = ["basins", "--res", "6", "--n-steps", "4", "--steps", "0,2368,20092", "--no-animate", "--device", "cpu"]
OLD = ["--sigma-start", "0.5"]   # the analysis an `overwrite` trial replaces
FIRST = ["--steps", "0"]         # what a `resume` trial finds already written


def racer(gate, argv):
    """Import everything, wait at the gate for the other racer, then run the CLI once."""
    import torch  # noqa: F401  (imported before the gate so both start the command together)
    import xarray  # noqa: F401
    import zarr  # noqa: F401

    import scoreprobe.probes.basins  # noqa: F401
    from scoreprobe.cli import main
    gate = Path(gate)
    (gate / str(os.getpid())).touch()
    while len(list(gate.iterdir())) < 2:
        pass
    return main(argv) or 0


def _cli(out, extra, racer_gate=None):
    cmd = [sys.executable, __file__]
    cmd += ["--racer", str(racer_gate), "--"] if racer_gate else ["--once", "--"]
    return cmd + ARGS + extra + ["--out", str(out)]


def run_once(out, extra):
    p = subprocess.run(_cli(out, extra), capture_output=True, text=True, env=_env(), timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"setup run failed: {p.stderr.strip().splitlines()[-1:]}")


def _env():
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def _load(path, plain):
    import xarray as xr

    from scoreprobe import store
    ds = xr.open_zarr(str(path), chunks=None).load() if plain else store.open_store(path).load()
    ds.attrs.pop("history", None)
    return ds.sortby("step")


def check(path, ref, results):
    """(clean, description) of one trial's processes and final store."""
    import xarray as xr
    for rc, err in results:
        if rc not in (0, 2) or "Traceback" in err:
            return False, f"racer exit {rc}: {err.strip().splitlines()[-3:]}"
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        if rc == 2 and len(errors) != 1:
            return False, f"racer exit 2 with {len(errors)} error lines"
    if not any(rc == 0 for rc, _ in results):
        return False, "neither racer succeeded"
    leftovers = sorted(p.name for p in path.parent.iterdir() if p.name != path.name)
    if leftovers:
        return False, f"left beside the store: {leftovers}"
    try:
        for plain in (False, True):
            xr.testing.assert_identical(_load(path, plain), ref[plain])
    except Exception as e:  # noqa: BLE001 -- any failure to open or any difference is damage
        return False, f"store damaged: {type(e).__name__}: {str(e).splitlines()[0]}"
    codes = sorted(rc for rc, _ in results)
    loser = next((line for rc, err in results if rc for line in err.splitlines() if line.startswith("error:")), "")
    return True, f"exits {codes}" + (f"; loser: {loser[:90]}" if loser else "")


def trial(work, scenario, t, ref):
    d = work / f"{scenario}-{t}"
    (d / "gate").mkdir(parents=True)
    out = d / "store" / "s.zarr"
    out.parent.mkdir()
    extra = ["--overwrite"] if scenario == "overwrite" else []
    if scenario == "overwrite":
        run_once(out, OLD)
    elif scenario == "resume":
        run_once(out, FIRST)
    procs = [subprocess.Popen(_cli(out, extra, d / "gate"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, env=_env()) for _ in range(2)]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    ok, note = check(out, ref, results)
    shutil.rmtree(d)
    return ok, note


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8, help="trials per scenario")
    ap.add_argument("--scenarios", default="fresh,resume,overwrite")
    ap.add_argument("--workdir", default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--racer", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("cli_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cli_args = args.cli_args[1:] if args.cli_args[:1] == ["--"] else args.cli_args
    if args.racer:
        return racer(args.racer, cli_args)
    if args.once:
        from scoreprobe.cli import main as cli_main
        return cli_main(cli_args) or 0
    work = Path(args.workdir or tempfile.mkdtemp(prefix="race_"))
    work.mkdir(parents=True, exist_ok=True)
    ref_path = work / "ref" / "s.zarr"
    run_once(ref_path, [])
    ref = {plain: _load(ref_path, plain) for plain in (False, True)}
    totals = {}
    for scenario in args.scenarios.split(","):
        clean = 0
        for t in range(args.n):
            ok, note = trial(work, scenario, t, ref)
            clean += ok
            print(f"{scenario:9s} trial {t + 1}/{args.n}: {'clean  ' if ok else 'DAMAGED'} {note}", flush=True)
        totals[scenario] = clean
    for scenario, clean in totals.items():
        print(f"{scenario}: {args.n} trials, {clean} clean, {args.n - clean} damaged or unclean")
    if not args.workdir:
        shutil.rmtree(work)
    return 0 if all(c == args.n for c in totals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
