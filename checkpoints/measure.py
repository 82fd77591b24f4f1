"""Measure the clocks of a checkpoint series and write `<series>/clocks.json` plus a markdown table.

    python checkpoints/measure.py checkpoints/parity-default [--n-samples 1000] [--out clocks.zarr]

`clocks.json` holds, per checkpoint, the sample metrics of `n_samples` PF-ODE samples (seed 0,
the default step count), τ_rule / τ_novel / τ_mem and the window with their bootstrap CIs
(docs/definitions.md), the same read from every third checkpoint only (`taus_every_third`: the
definitions must not depend on which checkpoints were measured beyond their CI), and
`window_step`: the checkpoint with the highest rule accuracy among those with memorization
ratio < 0.1 (tests re-measure it).
"""
import argparse
import json
from pathlib import Path

import scoreprobe as sp
from scoreprobe.defaults import DEFAULT_N_STEPS
from scoreprobe.store import normalize_config

COLUMNS = ("rule_acc", "novel_valid", "group_acc", "mem_ratio", "heldout_hit", "violating_ratio", "off_vertex")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("series")
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--out", default=None, help="zarr store to keep per-step results in (a rerun only adds new steps)")
    args = ap.parse_args()
    series = sp.load_series(args.series)
    ds = sp.clocks(series, n_samples=args.n_samples, seed=0, out=args.out)
    rows = [{"step": int(s), **{c: float(ds[c].sel(step=s)) for c in COLUMNS}} for s in ds.step.values]
    inside = [r for r in rows if r["mem_ratio"] < 0.1]
    window = max(inside, key=lambda r: r["rule_acc"])["step"] if inside else None
    taus = {k: v for k, v in ds.attrs.items()
            if not k.startswith("scoreprobe_") and k not in ("history", "Conventions")}
    third = sp.tau_summary(ds.isel(step=slice(None, None, 3)))
    out = {"n_samples": args.n_samples, "seed": 0, "n_steps": DEFAULT_N_STEPS, "window_step": window,
           "taus": taus, "taus_every_third": third, "table": rows}
    Path(args.series, "clocks.json").write_text(json.dumps(normalize_config(out), indent=1))
    print("| step | " + " | ".join(COLUMNS) + " |\n|---:|" + "---:|" * len(COLUMNS))
    for r in rows:
        print(f"| {r['step']} | " + " | ".join(f"{r[c]:.3f}" for c in COLUMNS) + " |")
    for name, t in (("all checkpoints", taus), ("every third checkpoint", third)):
        print(f"\n{name}: " + ", ".join(f"{k} = {t[k]:.0f} [{t[k + '_ci'][0]:.0f}, {t[k + '_ci'][1]:.0f}]"
                                        for k in ("tau_rule", "tau_novel", "tau_mem")
                                        if t.get(k) == t.get(k) and t.get(k + "_ci")))
        print(f"  window {t['window_intervals']}, log10 width {t['window_log10_width']:.2f} "
              f"{t.get('window_log10_width_ci')}, under-resolved {t['under_resolved']}")
    print(f"window_step = {window}")


if __name__ == "__main__":
    main()
