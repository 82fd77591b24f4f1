"""Figures of the battery (scoreprobe.studies.battery) on one trained model, drawn from its report dict: basin shares and
retention vs log step with CI ribbons and τ bands, the DSM significance heat map, and the basin-evolution
animation of one plane with the step and the clocks marked in every frame.

A τ that is not reached is named in the legend ("τ_rule: not reached"), never drawn at a step.
"""
import math

import numpy as np
from matplotlib.ticker import NullFormatter

from scoreprobe.viz.common import new_figure, save_figure, save_gif

COLORS = {"training": "#ff9f1c", "heldout": "#1f77b4", "novel": "#2ca02c", "violating": "#d62728",
          "off_vertex": "#7f7f7f", "train": "#ff9f1c"}
TAU_STYLE = {"tau_rule": ("#2ca02c", "τ_rule"), "tau_mem": ("#9467bd", "τ_mem")}


def _finite(v):
    return isinstance(v, (int, float)) and math.isfinite(v)


def tau_bands(ax, taus):
    """τ_rule and τ_mem as vertical lines with their CI as a band, the window shaded; unreached τ only
    in the legend."""
    for key, (color, label) in TAU_STYLE.items():
        v, ci = taus.get(key), taus.get(key + "_ci") or [None, None]
        if _finite(v):
            ax.axvline(v, color=color, lw=1.2, ls="--", label=f"{label} {v:.0f}")
            if _finite(ci[0]):
                ax.axvspan(ci[0], ci[1] if _finite(ci[1]) else ax.get_xlim()[1], color=color, alpha=0.12, lw=0)
        else:
            ax.plot([], [], color=color, ls="--", label=f"{label}: not reached")
    for lo, hi in taus.get("window_intervals") or []:
        if _finite(lo) and _finite(hi):
            ax.axvspan(lo, hi, color="#2ca02c", alpha=0.05, lw=0)


def ribbon(ax, steps, curve, color, label, ls="-"):
    """Mean curve with its CI ribbon (NaN points are left out)."""
    m, lo, hi = (np.asarray(curve[k], dtype=float) for k in ("mean", "lo", "hi"))
    ax.plot(steps, m, ls, color=color, marker="o", ms=2.5, lw=1.3, label=label)
    ax.fill_between(steps, lo, hi, color=color, alpha=0.2, lw=0)


def _step_axis(ax, ylabel):
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())   # a range under a decade would label every minor tick
    ax.set_xlabel("training step (log)")
    ax.set_ylabel(ylabel)


def basins_figure(summary, path):
    """One row per series, one column per plane kind / extent: shares of each endpoint state vs step."""
    names = list(summary)
    keys = sorted({k for r in summary.values() for k in r["basins"]})
    fig = new_figure((4.2 * max(1, len(keys)), 3.3 * len(names)))
    axes = np.atleast_2d(fig.subplots(len(names), max(1, len(keys)), squeeze=False))
    for i, name in enumerate(names):
        r = summary[name]
        for j, key in enumerate(keys):
            ax = axes[i, j]
            by_sigma = r["basins"].get(key)
            if not by_sigma:
                ax.text(0.5, 0.5, f"{name}: no {key} planes in this dataset", ha="center", transform=ax.transAxes)
                ax.set_axis_off()
                continue
            sigma, cur = next(iter(by_sigma.items()))
            for q in ("training", "heldout", "novel", "violating", "off_vertex"):
                ribbon(ax, r["steps"], cur[q], COLORS[q], q.replace("_", "-"))
            tau_bands(ax, r["taus"])
            _step_axis(ax, "share of the plane's grid")
            ax.set_ylim(-0.02, 1.02)
            n = (r.get("units", {}).get(key) or {}).get("distinct_planes", 0)
            ax.set_title(f"{name}: {key} planes ({n} distinct), σ_start {sigma}", fontsize=9)
            ax.legend(fontsize=6, loc="best")
    save_figure(fig, path, dpi=110)
    return path


def retention_figure(summary, path, sigma="1.0"):
    """Per series: retention of training / held-out items, capture and capture although the start is nearer
    its own item, at σ, vs step."""
    names = list(summary)
    fig = new_figure((5.2, 3.4 * len(names)))
    axes = fig.subplots(len(names), 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, names):
        r = summary[name]
        for split, ls in (("train", "-"), ("heldout", "-")):
            cur = r["retention"].get(split, {}).get(sigma)
            if cur:
                ribbon(ax, r["steps"], cur["retained"], COLORS.get(split, "k"), f"{split}: returns to itself", ls)
        ho = r["retention"].get("heldout", {}).get(sigma)
        if ho:
            ribbon(ax, r["steps"], ho["captured"], "#8c564b", "held-out: captured by a training item", "--")
            if "captured_nearer_own" in ho:
                ribbon(ax, r["steps"], ho["captured_nearer_own"], "#e377c2",
                       "held-out: captured although nearer its own item", ":")
        tau_bands(ax, r["taus"])
        _step_axis(ax, f"share of restarts (σ = {sigma})")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{name}: retention at σ = {sigma}", fontsize=9)
        ax.legend(fontsize=6)
    save_figure(fig, path, dpi=110)
    return path


def dsm_figure(summary, path):
    """Per series: paired held-out − train z over (step, σ), cells significant under Holm over the whole
    step × σ family marked with a dot."""
    names = [n for n in summary if summary[n]["dsm"]]
    fig = new_figure((5.6, 3.6 * max(1, len(names))))
    axes = fig.subplots(max(1, len(names)), 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, names):
        d, steps = summary[name]["dsm"], summary[name]["steps"]
        z = np.asarray(d["z"], dtype=float).T                                       # (σ, S)
        lim = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
        im = ax.pcolormesh(np.arange(len(steps) + 1), _edges(d["sigma"]), z, cmap="RdBu_r", vmin=-lim, vmax=lim)
        sig = np.asarray(d["p_adjusted"], dtype=float).T < d["alpha"]
        yy, xx = np.nonzero(sig)
        ax.plot(xx + 0.5, np.asarray(d["sigma"])[yy], "k.", ms=3, label=f"Holm over steps × σ: p < {d['alpha']}")
        ax.set_yscale("log")
        ax.set_xticks(np.arange(len(steps)) + 0.5, [str(s) for s in steps], rotation=60, fontsize=6)
        ax.set(xlabel="training step (checkpoints)", ylabel="σ", title=f"{name}: DSM held-out − train, paired z")
        fig.colorbar(im, ax=ax, label="z of the paired gap")
        ax.legend(fontsize=6, loc="upper right")
    save_figure(fig, path, dpi=110)
    return path


def _edges(c):
    c = np.log(np.asarray(c, dtype=float))
    mid = (c[1:] + c[:-1]) / 2 if len(c) > 1 else np.array([])
    first = c[0] - (mid[0] - c[0] if len(mid) else 0.5)
    last = c[-1] + (c[-1] - mid[-1] if len(mid) else 0.5)
    return np.exp(np.concatenate([[first], mid, [last]]))


def animate_plane(ds, taus, path, fps=3, dpi=100):
    """GIF of a basins Dataset (step, sigma_start, v, u): the map at each step, and under it a log-step
    timeline with τ_rule, τ_mem (and their CIs) and the frame's step marked."""
    from PIL import Image
    from scoreprobe.viz import plot_basins
    frames = []
    steps = [int(s) for s in ds.step.values]
    for step in steps:
        fig = new_figure((6.2, 5.4))
        ax, tl = fig.subplots(2, 1, gridspec_kw={"height_ratios": [4, 1]})
        plot_basins(ds, step=step, ax=ax)
        tl.set_xlim(steps[0] / 1.5, steps[-1] * 1.5)
        tau_bands(tl, taus)
        tl.axvline(step, color="k", lw=2.5, label=f"step {step}")
        tl.set_xscale("log")
        tl.xaxis.set_minor_formatter(NullFormatter())
        tl.set_yticks([])
        tl.set_xlabel("training step (log)")
        tl.legend(fontsize=6, loc="upper left", ncol=3)
        fig.canvas.draw()
        frames.append(Image.fromarray(np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()))
    save_gif(frames, path, fps)
    return path


def study_figures(summary, anims, stem):
    """All figures of the study next to `stem` (a Path without suffix); returns their paths."""
    from pathlib import Path
    stem = Path(stem)
    paths = [basins_figure(summary, stem.with_name(stem.name + "_basins.png")),
             retention_figure(summary, stem.with_name(stem.name + "_retention.png")),
             dsm_figure(summary, stem.with_name(stem.name + "_dsm.png"))]
    for name, ds in anims.items():
        if ds is not None:
            paths.append(animate_plane(ds, summary[name]["taus"], stem.with_name(f"{stem.name}_{name}_basins.gif")))
    return paths


# ---------------------------------------------------------------------------------------------
# The battery on several trained models (scoreprobe.studies.battery_series)
# ---------------------------------------------------------------------------------------------

MODELS_PANELS = ("violating basin", "t − h basin (symmetric planes)", "held-out captured (σ 1)",
                 "DSM gap, σ in [0.2, 2.0]")


def models_figure(report, path, panels=MODELS_PANELS):
    """Per series with at least 2 models (rows), the curves `panels` over training (columns): each trained model a
    thin line, the mean over models and units with its 95% interval (a series report of
    scoreprobe.studies.battery_series); x is symlog in steps (step 0 included), dashed: the models' τ_mem.
    Writes `path` (110 dpi)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    series = {k: v for k, v in report["series"].items() if v.get("n_models", 0) >= 2}
    fig = Figure(figsize=(3.3 * len(panels), 2.8 * len(series)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(series), len(panels), squeeze=False)
    for row, (name, rep) in zip(axes, series.items()):
        steps = np.asarray(rep["steps"], dtype=float)
        first = min(s for s in steps if s > 0)
        for ax, q in zip(row, panels):
            c = rep["curves"].get(q)
            ax.set_xscale("symlog", linthresh=first)
            ax.set_title(f"{name}: {q}", fontsize=8)
            if c is None:
                continue
            for i, pm in enumerate(c["per_model"]):
                ax.plot(steps, np.asarray(pm, dtype=float), lw=0.8, alpha=0.6, color=f"C{i}",
                        label=f"training seed {rep['models'][i]['training_seed']}")
            mean, lo, hi = (np.asarray([np.nan if v is None else v for v in c[k]], dtype=float)
                            for k in ("mean", "lo", "hi"))
            ax.fill_between(steps, lo, hi, color="k", alpha=0.15, lw=0)
            ax.plot(steps, mean, color="k", lw=1.6, label="mean [95% CI]")
            for r in rep["models"]:
                if _finite(r["tau_mem"]):
                    ax.axvline(r["tau_mem"], color="grey", ls="--", lw=0.6)
            ax.set_xlabel("training step", fontsize=8)
            ax.tick_params(labelsize=7)
        row[0].legend(fontsize=6)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)
