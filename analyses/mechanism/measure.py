"""The mechanism study's measurements: presets, the two series, one store per probe / kind / seed (run.py)."""
import argparse
import json
import logging
import time
from pathlib import Path


from scoreprobe.cli.study import names
from scoreprobe.studies.queue import add_overrides, apply_preset, finished, measured_clocks, trained_with_clocks
from scoreprobe.loading.series import load_series
from scoreprobe.studies.battery import KINDS, RET_SIGMAS, chosen_steps, measure_all
from scoreprobe.studies.recipes import closed_window_config

logger = logging.getLogger("mechanism")

SHIPPED = Path(__file__).resolve().parents[2] / "checkpoints" / "parity-default"
ALL_KINDS = KINDS + ("reach", "anim")   # reach: the symmetric planes on the noise-reach grid; anim: the animation

PRESETS = {
    "smoke": dict(n_planes=2, seeds=[0, 1], res=4, sigma_starts=[1.0], reach_sigmas=[1.0], n_ckpt=3,
                  ret_items=3, ret_noise=2, ret_sigmas=[1.0, 2.0], dsm_sigmas=5, dsm_noise=2, dsm_heldout=6,
                  n_steps=4, anim_res=6, max_hamming=6, n_boot=50, clock_samples=32, jobs=1,
                  closed=dict(N=8, n_heldout=32, total_steps=40, hidden_size=32, batch_size=16,
                              n_checkpoints=4, first_checkpoint=5)),
    # 11 planes per kind per seed (33 per kind), 8×8 local grids at σ = 1, noise-reach grids at σ = 1, 2
    # on the symmetric planes, 32 + 32 items × 8 restarts × 8 σ, 10 checkpoints; one series per core.
    # Measured (2026-12-01, load ≈ 17 on the 2 cores, 32 Heun steps): one checkpoint × one seed of all
    # probes costs 81 CPU-s (retention 65%, basins 33%), the animation 4 CPU-s per checkpoint; so
    # ≈ 2 480 CPU-s for the open series and ≈ 2 900 for the closed one (+ training 3 750 steps ≈ 165 s,
    # clocks 1000 samples × 21 checkpoints ≈ 290 s): ≈ 48 min on 2 idle cores (CPU time under load
    # overstates idle CPU time, if anything).
    "cpu": dict(n_planes=11, seeds=[0, 1, 2], res=8, sigma_starts=[1.0], reach_sigmas=[1.0, 2.0], n_ckpt=10,
                ret_items=32, ret_noise=8, ret_sigmas=RET_SIGMAS, dsm_sigmas=24, dsm_noise=4, dsm_heldout=128,
                n_steps=None, anim_res=24, max_hamming=6, n_boot=1000, clock_samples=1000, jobs=2,
                closed=dict(N=30, n_heldout=1024, total_steps=3750, hidden_size=80, batch_size=96,
                            n_checkpoints=20, first_checkpoint=200)),
    # The full size: >= 32 planes per kind per seed, 256 + 256 items, 16 restarts.
    "gpu": dict(n_planes=32, seeds=[0, 1, 2], res=32, sigma_starts=[0.5, 1.0, 2.0], reach_sigmas=[0.5, 1.0, 2.0],
                n_ckpt=16, ret_items=256, ret_noise=16, ret_sigmas=RET_SIGMAS + [3.0], dsm_sigmas=40, dsm_noise=16,
                dsm_heldout=512, n_steps=None, anim_res=64, max_hamming=6, n_boot=2000, clock_samples=1000, jobs=1,
                closed=dict(N=30, n_heldout=1024, total_steps=3750, hidden_size=80, batch_size=96,
                            n_checkpoints=20, first_checkpoint=200)),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/mechanism", help="stores and the closed-window run (git-ignored runs/)")
    p.add_argument("--results", default=None, help="md / json / figures (default analyses/results; --out for --smoke)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None, help="default: gpu on CUDA, else cpu")
    p.add_argument("--smoke", action="store_true", help="same as --preset smoke")
    p.add_argument("--series", default="open,closed", help="which series: open, closed or both")
    p.add_argument("--open-series", default=str(SHIPPED), help="the open-window series (default: shipped)")
    p.add_argument("--measure-only", action="store_true", help="fill the stores, write no report")
    p.add_argument("--report-only", action="store_true", help="report from the stores, measure nothing new")
    p.add_argument("--no-figures", action="store_true", help="write the md and json only")
    p.add_argument("--rereport", default=None, metavar="JSON",
                   help="re-report a shipped mechanism json with the issue-35 statistics (no stores needed)")
    p.add_argument("--suffix", default=None, help="file stem suffix (default '' for cpu, _<preset> otherwise)")
    p.add_argument("--kinds", default=",".join(ALL_KINDS),
                   help=f"basin plane sets to measure and report, of {','.join(ALL_KINDS)} (default: all)")
    add_overrides(p, PRESETS)                  # --n-planes, --seeds 0,1, ...: any preset value
    args = p.parse_args(argv)
    preset = apply_preset(args, PRESETS)
    args.series, args.kinds = names(p, "--series", args.series), names(p, "--kinds", args.kinds, ALL_KINDS)
    args.results = args.results or (args.out if preset == "smoke" else "analyses/results")
    args.suffix = ("" if preset == "cpu" else f"_{preset}") if args.suffix is None else args.suffix
    return args


# ---------------------------------------------------------------------------------------------
# The two series
# ---------------------------------------------------------------------------------------------

def closed_config(args):
    """The closed-window run of the preset (scoreprobe.studies.recipes.closed_window_config)."""
    return closed_window_config(args.closed)


def open_series(args, name):
    """(series, clocks summary dict) of series `name`; trains / measures the closed one if needed."""
    if name == "open":
        series = load_series(args.open_series)
        clocks_json = Path(args.open_series) / "clocks.json"
        if clocks_json.is_file():
            return series, {**json.loads(clocks_json.read_text())["taus"], "source": str(clocks_json)}
        run_dir = Path(args.out) / "open"
        ds = measured_clocks(series, run_dir / "clocks.zarr", n_samples=args.clock_samples, device=args.device,
                             **({} if args.n_steps is None else {"n_steps": args.n_steps}))
    elif name == "closed":
        run_dir, cfg = Path(args.out) / "closed", closed_config(args)
        if args.report_only and not finished(run_dir, cfg):
            raise SystemExit(f"--report-only: the closed-window run {run_dir} is not trained yet")
        series, ds, sec = trained_with_clocks(run_dir, cfg, args.device, args.clock_samples, args.n_steps)
        logger.info("closed: %d steps trained (or found trained) in %.0f s", cfg.total_steps, sec["train"])
    else:
        raise SystemExit(f"unknown series {name!r}: use open and/or closed")
    keep = [k for k in ds.attrs if k.startswith(("tau_", "window_")) or k in ("under_resolved", "log10_ratio")]
    return series, {**{k: ds.attrs[k] for k in keep}, "source": str(run_dir / "clocks.zarr")}


def measure_series(args, name):
    """Fill every store of series `name` (resumable; battery.measure_all); returns {what: seconds}."""
    t0 = time.time()
    series, _ = open_series(args, name)
    t = {"series_and_clocks": time.time() - t0}
    t.update(measure_all(args, name, series, chosen_steps(series, args.n_ckpt)))
    logger.info("%s: measured in %s", name, {k: round(v) for k, v in t.items()})
    return t
