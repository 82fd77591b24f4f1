"""The run grid of analyses/exactk_ladder: exact-K k = 3, 9, 18 and parity G = 2, 3, 4 at one N, one model.

Every run is a scaling run (`scoreprobe.studies.recipes`): exact-K through `rule_run` (the 80×4 DiT, two_clocks'
recipe: 12 000 views per training image, step 0 and 20 log-spaced checkpoints from step 200, 1000 samples
per checkpoint; held-out set within the valid set), parity through `parity_run` (two_clocks' own runs,
offset layout). Exact-K runs measure their clocks with the bits kept and export to
<results>/exactk_ladder_<preset>/<name>.npz with each sample's Σ bits (export version 2); parity runs are
the scaling study's, read from (and, when missing, exported to) <results>/scaling_<preset>/.

N = 240 for the CPU preset (N = 256 on the GPU, the scaling GPU preset's G axis), not 120:
- parity G = 2, 3, 4 exist at N = 240 with 3 seeds (the scaling study's G axis, 9 exports reused as they are,
  no training); at N = 120 there is no G = 4 (3 more runs);
- exact-K k = 18 exists only at N = 120, and those exports predate the bit sums: at N = 120 the count error
  of k = 18, the ladder's reference rung, would need the three runs trained again anyway;
- at N = 240, 30 000 steps, parity G = 2 reaches 0.9 in every seed (τ_rule 1800–2700) long before it copies
  (τ_mem ≈ 25 000), so the ratios against it are readable over every threshold; G = 3 peaks at 0.88–0.92 and
  G = 4 at 0.03–0.05 (ratios against them are censored above those, with a bound where every exact-K seed
  reaches and no parity seed does); exact-K gets twice the N = 120 budget to climb past the 0.62–0.76 peak
  where k = 18 stopped at N = 120.
Cost: 9 new exact-K runs of 30 000 steps (3 k × 3 seeds) ≈ 25 min each on one idle thread (scaling grid's
rates: 23 steps/s, 10 s of clocks per checkpoint; keeping the bits costs nothing measurable) = 3.8
thread-hours, two at a time 5 rounds ≈ 2.1 h on 2 idle cores. N = 120 would cost 12 runs of 15 000 steps
(≈ 14 min each: parity G = 4, exact-K k = 3, 9, and k = 18 again for its Σ bits), 6 rounds ≈ 1.4 h, and its
G = 2 reference is censored at 0.9 in one seed (peak 0.893).

Launch (resumable; a later session): `python analyses/exactk_ladder --jobs 2` (`--plan` first; `--hours H`
starts no run that would end after H hours). Order: by training seed, then exact-K k = 18, 9, 3, then any
parity run not yet exported, so an interrupted preset has every rung at the first seeds.
"""
from scoreprobe.studies import recipes as scaling_grid

PRESETS = {
    "smoke": dict(scaling="smoke", N=8, ks=[3, 9, 18], Gs=[2, 3, 4], seeds=[0, 1], jobs=1),
    "cpu": dict(scaling="cpu", N=240, ks=[3, 9, 18], Gs=[2, 3, 4], seeds=[0, 1, 2], jobs=2),
    "gpu": dict(scaling="gpu", N=256, ks=[3, 9, 18], Gs=[2, 3, 4], seeds=[0, 1, 2, 3, 4], jobs=1),
}
CPU_BUDGET_H = 2.1   # the CPU preset on 2 idle cores at scaling.grid's rates (see the docstring)


def exactk_run(args, k, N, seed):
    """The scaling study's exact-K run (rule_run) for k of the 36 pixels."""
    return scaling_grid.rule_run(args, {"name": "exactk", "k": int(k)}, N, seed)


def has_counts(run):
    """True for the runs whose export holds Σ bits (exact-K: the count error is read from them)."""
    return run.meta["rule"] == "exactk"


def label(run):
    """'exact-K k = 18' or 'parity G = 3'."""
    m = run.meta
    return f"exact-K k = {run.cfg.rule['k']}" if m["rule"] == "exactk" else f"parity G = {m['G']}"


def plan(preset):
    """The runs of `preset` in the order they train (see the module docstring)."""
    p = PRESETS[preset]
    args = scaling_grid.base_args(p["scaling"])
    runs = []
    for s in p["seeds"]:
        runs += [exactk_run(args, k, p["N"], s) for k in sorted(p["ks"], reverse=True)]
        runs += [scaling_grid.parity_run(args, G, p["N"], s) for G in p["Gs"]]
    for r in runs:
        r.axes = ("ladder",)
    return runs


def export_folders(results, preset, run):
    """Where `run`'s export may be, first the one it is written to: exact-K runs export to
    exactk_ladder_<preset>/ (with Σ bits), the scaling folder second (an export there has no Σ bits: it
    stands in for τ and accuracy until the run is measured again); parity runs are scaling_<preset>/'s."""
    scaling = results / f"scaling_{PRESETS[preset]['scaling']}"
    return [results / f"exactk_ladder_{preset}", scaling] if has_counts(run) else [scaling]
