"""Does an SAE on the shipped DiT's residual stream find the rule's parity groups, and from which step on?

    python analyses/features --smoke --out /tmp/f    # < 3 min: 2 checkpoints, 1 site, short SAEs
    python analyses/features                         # CPU preset: 6 checkpoints x 4 sites at σ 0.7, 16 min here (2 shared cores), then --last's part
    python analyses/features --last                  # only the last checkpoint's seeds, bootstrap, best latents:
                                                     #   16 min here (12 SAEs, 400 probe refits; 2 cores shared)
    python analyses/features --from-results          # rewrite the .md from the .json (the PNGs are left as they are)

Through the API only. Inputs: the 120 training items and held-out valid items (1024 rows in all), each
noised once at σ (seed 0, per-row noise). At each checkpoint and each site blocks.{i}.hook_resid_post
(9 tokens x 80 = 720 values per row): sp.run_with_cache, ground truth sp.rule_features (each group's parity in
the noisy input's bits, both polarities; the clean pixels; the training item), the probe directions of the
18 'group j odd' features (sp.probe_directions, held-out accuracy), a TopK SAE (sp.train_sae) and
sp.sae_scores. Per site and step: the coverage of the parity groups (groups with a latent of F1 >= 0.8 for
either polarity, of 18), the MCC of the decoder rows against the 18 probe directions, EV, L0, dead latents,
the pixel coverage (of 36) for comparison. MCC is read against the mean-difference directions, not the
ridge readouts: a least-squares readout in 720 dimensions from 512 rows leans on low-variance directions and is
near-orthogonal to any decoder row (MCC 0.01-0.02 in a first run), whatever the SAE learned. The step at which groups appear: the first measured checkpoint
from which the coverage stays >= 9 (half the groups), read against the series' τ_rule (its clocks.json).
One SAE seed per cell over training; at the last checkpoint (last.py) SAE seeds 0-2 and a bootstrap over the rows
give each site's best group F1, coverage and MCC an interval, and each site's best latents are drawn with their
top-activating inputs (sp.top_activating, sp.plot_top_activating).
Results: analyses/results/features_<preset>.{md,json} and features_top_<preset>_blocks<i>.png.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

import scoreprobe as sp
from analyses.features.last import group_best as group_best_f1
from analyses.features.inputs import inputs
from analyses.features.last import best_text, polarity_best, probe_means
from scoreprobe.atomic import atomic_write_text
from scoreprobe.store.json_ready import json_ready

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PRESETS = {
    "cpu": dict(steps=[500, 896, 1322, 1950, 4243, 36000], sites=[0, 1, 2, 3], sigma=0.7,
                n_rows=1024, d_sae=128, k=8, sae_steps=1000),
    "smoke": dict(steps=[500, 36000], sites=[3], sigma=0.7, n_rows=256, d_sae=64, k=4, sae_steps=100),
}
F1_MIN, APPEAR_SHARE = 0.8, 0.5


def measure_step(series, step, cfg, clean, x):
    """Per site: the scores of one SAE against the rule's features at one checkpoint."""
    D = series.denoiser(step)
    names = [f"blocks.{i}.hook_resid_post" for i in cfg["sites"]]
    _, cache = sp.run_with_cache(D, x, cfg["sigma"], names=names)
    truth = sp.rule_features(series.rule, sp.to_bits(x).numpy(), clean=clean, train=series.dataset.train)
    n_groups = int((truth.kind == "group").sum()) // 2
    odd = [f"group{j}=odd" for j in range(n_groups)]
    rows = []
    for site in names:
        probes = sp.probe_directions(cache, truth, site=site)
        sae = sp.train_sae(cache, cfg["d_sae"], site=site, k=cfg["k"], steps=cfg["sae_steps"], seed=0)
        s = sp.sae_scores(sae, cache, truth, probes.mean_difference.sel(feature=odd), site=site)
        rows.append(dict(step=step, site=site, **_summary(s, probes, n_groups, odd)))
    return rows


def _summary(s, probes, n_groups, odd):
    best = s.best_f1
    group_best = group_best_f1(best, n_groups)
    n_pix = sum(str(f).startswith("pixel") for f in best.feature.values) // 2
    pixel_best = polarity_best(best, [(f"pixel{i}=1", f"pixel{i}=0") for i in range(n_pix)])
    return dict(group_coverage=int(np.sum(np.array(group_best) >= F1_MIN)), n_groups=n_groups,
                group_best_f1=[float(v) for v in group_best], mcc=float(s.mcc),
                **probe_means(probes, odd),
                pixel_coverage=int(np.sum(np.array(pixel_best) >= F1_MIN)), n_pixels=n_pix,
                explained_variance=float(s.explained_variance), l0=float(s.l0), dead=int(s.dead))


def appearance(rows, site, n_groups):
    """The first measured step from which the site's group coverage stays >= APPEAR_SHARE·n_groups; None if never."""
    seq = sorted((r["step"], r["group_coverage"]) for r in rows if r["site"] == site)
    need = APPEAR_SHARE * n_groups
    for i, (step, _) in enumerate(seq):
        if all(c >= need for _, c in seq[i:]):
            return step
    return None


def report_md(report):
    cfg, rows = report["config"], report["rows"]
    last = max(r["step"] for r in rows)
    lines = [f"# Features: SAEs on the shipped DiT's residual stream against the rule ({report['preset']})", "",
             f"Series `{report['series']}`, σ = {cfg['sigma']}, {cfg['n_rows']} rows (training items first), TopK SAE "
             f"d_sae {cfg['d_sae']}, k {cfg['k']}, {cfg['sae_steps']} steps, seed 0; τ_rule = "
             f"{_fmt(report['tau_rule'])} (clocks.json). Coverage: groups (of {rows[0]['n_groups']}) with a latent "
             f"of F1 >= {F1_MIN} for either polarity of the group's parity in the noisy input's bits. MCC: decoder "
             "rows against the 18 'group odd' mean-difference directions (sp.probe_directions). Probe acc: held-out "
             "accuracy of the linear readout of 'group odd', mean over groups, against always answering 'even' "
             "(majority). Best F1: the best latent's F1 for the best group. One SAE seed per cell over training; the last "
             "checkpoint's seeds and bootstrap intervals are below.", "",
             f"## At the last checkpoint (step {last})", "",
             "| site | group coverage | best F1 | MCC | probe acc (majority) | pixel coverage | EV | L0 | dead | groups appear |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in (r for r in rows if r["step"] == last):
        app = report["appear"][r["site"]]
        lines.append(f"| {r['site']} | {r['group_coverage']}/{r['n_groups']} | {best_text(r['group_best_f1'])} | "
                     f"{r['mcc']:.3f} | "
                     f"{r['probe_accuracy']:.3f} ({r['probe_majority']:.3f}) | {r['pixel_coverage']}/{r['n_pixels']} | "
                     f"{r['explained_variance']:.3f} | {r['l0']:.1f} | {r['dead']} | "
                     f"{'never' if app is None else app} |")
    lines += ["", "## Over training (group coverage / MCC)", "",
              "| step | " + " | ".join(report["sites"]) + " |", "|---:|" + "---:|" * len(report["sites"])]
    for step in sorted({r["step"] for r in rows}):
        cells = {r["site"]: f"{r['group_coverage']} / {r['mcc']:.2f}" for r in rows if r["step"] == step}
        lines.append(f"| {step} | " + " | ".join(cells.get(s, "") for s in report["sites"]) + " |")
    lines += ["", f"'groups appear': the first measured step from which the coverage stays >= {APPEAR_SHARE:g} of "
              "the groups ('never': not within the measured steps).", ""]
    if "training_seeds" in report:
        from analyses.features.seeds import seeds_md
        lines += seeds_md(report)
    if "sweep" in report:
        from analyses.features.sweep import sweep_md
        lines += sweep_md(report["sweep"], report["tau_rule"])
    if "last" in report:
        from analyses.features.last import last_md
        lines += last_md(report["last"])
    return "\n".join(lines)


def _fmt(v):
    return "not reached" if v is None else f"{v:.0f}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--out", default=str(ROOT / "analyses" / "results"))
    p.add_argument("--from-results", action="store_true")
    p.add_argument("--causal", action="store_true", help="the causal check only (causal.py): features_causal_<preset>")
    p.add_argument("--last", action="store_true", help="only the last checkpoint's intervals and best latents "
                   "(last.py), added to the existing features_<preset>.json")
    p.add_argument("--seeds", nargs="+", metavar="RUN_DIR", default=None,
                   help="only the over-training table on other training seeds of the recipe (run directories with a "
                        "clocks.json), added to the existing json (seeds.py)")
    p.add_argument("--sweep", action="store_true", help="only the SAE settings x σ cells (sweep.py), added to the "
                   "existing json")
    a = p.parse_args(argv)
    preset = "smoke" if a.smoke else "cpu"
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.causal:
        return causal_main(preset, out, a.from_results)
    path = out / f"features_{preset}.json"
    adds = a.last or a.sweep or a.seeds
    if adds and not path.is_file():
        p.error(f"--last / --sweep / --seeds add to {path}, which is not there: run the study first")
    if a.seeds:
        from analyses.features.seeds import check_seed_dirs
        check_seed_dirs(a.seeds, p.error)
    report = json.loads(path.read_text()) if a.from_results or adds else run(preset)
    if not a.from_results:
        if a.seeds:
            from analyses.features.seeds import seed_tables
            report["training_seeds"] = seed_tables(report, a.seeds, lambda d: run(preset, d))
        if a.sweep or not adds:
            report["sweep"] = sweep_main(report)
        if a.last or not adds:
            report["last"] = last_main(report, out)
        atomic_write_text(path, json.dumps(json_ready(report), indent=1, sort_keys=True))
    md = report_md(report)
    atomic_write_text(out / f"features_{preset}.md", md)
    print(md)


def last_main(report, out):
    """The last checkpoint's seeds, bootstrap and best latents (last.py) for `report`; writes the PNG per site."""
    from analyses.features.last import LAST, last_checkpoint
    from scoreprobe.viz.common import save_figure
    preset, cfg = report["preset"], report["config"]
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    series = sp.load_series()
    clean, x = inputs(series, cfg["n_rows"], cfg["sigma"])
    last, drawn = last_checkpoint(series, cfg, clean, x, LAST[preset], _summary)
    shape = series.rule.image_shape[1:]
    for site, (tops, scores) in drawn.items():
        fig = sp.plot_top_activating(tops, clean, noisy=x.numpy(), scores=scores, image_shape=shape)
        fig.suptitle(f"{site}, step {last['step']}\ntop-activating inputs: clean item, noisy x below", fontsize=8)
        name = f"features_top_{preset}_{site.split('.hook')[0].replace('.', '')}.png"
        save_figure(fig, out / name, dpi=90)
        last["sites"][site]["png"] = name
    table = {r["site"]: r for r in report["rows"] if r["step"] == last["step"]}
    first = str(LAST[preset]["seeds"][0])
    last["seed0_equals_table"] = all(
        np.array_equal(last["sites"][s]["seeds"][first][key], table[s][key], equal_nan=True)
        for s in drawn for key in ("group_best_f1", "mcc", "explained_variance"))
    last["seconds"] = time.perf_counter() - t0
    sys.stderr.write(f"features: last checkpoint's seeds and bootstrap done, {last['seconds']:.0f} s\n")
    return last


def sweep_main(report):
    """The SAE settings x σ cells (sweep.py) of `report`'s preset on the shipped series."""
    from analyses.features.sweep import SWEEP, matches_table, run_sweep
    series = sp.load_series()
    clean, _ = inputs(series, report["config"]["n_rows"], report["config"]["sigma"])
    out = run_sweep(series, report["config"], clean, SWEEP[report["preset"]], log=sys.stderr.write)
    out["equals_table"] = matches_table(out, report)
    return out


def causal_main(preset, out, from_results):
    """Run (or reread) the causal check and write features_causal_<preset>.{json,md}."""
    from analyses.features.causal import CAUSAL, causal_check, causal_md
    path = out / f"features_causal_{preset}.json"
    if from_results:
        c = json.loads(path.read_text())
    else:
        cfg = PRESETS[preset]
        torch.set_num_threads(1)
        series = sp.load_series()
        clean, x = inputs(series, cfg["n_rows"], cfg["sigma"])
        c = causal_check(series, cfg, clean, x, CAUSAL[preset])
        atomic_write_text(path, json.dumps(json_ready(c), indent=1, sort_keys=True))
    md = causal_md(c)
    atomic_write_text(out / f"features_causal_{preset}.md", md)
    print(md)


def run(preset, series_dir=None):
    """The over-training table of `series_dir` (None: the shipped series) at the preset's steps and sites."""
    cfg = PRESETS[preset]
    torch.set_num_threads(1)
    series = sp.load_series(series_dir)
    clocks = json.loads((Path(series.path) / "clocks.json").read_text())["taus"]
    clean, x = inputs(series, cfg["n_rows"], cfg["sigma"])
    rows, t0 = [], time.perf_counter()
    for step in cfg["steps"]:
        rows += measure_step(series, step, cfg, clean, x)
        sys.stderr.write(f"features: step {step} done, {time.perf_counter() - t0:.0f} s\n")
    sites = [f"blocks.{i}.hook_resid_post" for i in cfg["sites"]]
    path = Path(series.path).resolve()
    return dict(preset=preset, config=cfg, series=str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path), tau_rule=clocks.get("tau_rule"),
                tau_mem=clocks.get("tau_mem"), sites=sites, rows=rows,
                appear={s: appearance(rows, s, rows[0]["n_groups"]) for s in sites},
                seconds=time.perf_counter() - t0)
