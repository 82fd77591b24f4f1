"""The decompose study's summaries, markdown and figures, from its JSON alone (so --from-results works)."""
import json
import math

import numpy as np
import xarray as xr

from scoreprobe.probes.decompose import TIE, TIE_MARGIN, UNDEFINED, best_oracle
from scoreprobe.atomic import atomic_write_text
from scoreprobe.viz import new_figure
from scoreprobe.viz.common import save_figure
from scoreprobe.viz.decompose import plot_decompose


def decompose_dataset(dec):
    """The decompose arrays of the JSON back as a Dataset (step, sigma, split, oracle)."""
    dims4, dims3 = ("step", "sigma", "split", "oracle"), ("step", "sigma", "split")
    data = {v: (dims4, np.array(dec[v], float)) for v in ("r2", "weight", "weight_simplex")}
    data.update({v: (dims3, np.array(dec[v], float)) for v in ("r2_joint", "r2_simplex", "residual", "condition")})
    return xr.Dataset(data, coords={"step": dec["steps"], "sigma": dec["sigma"],
                                    "split": np.array(dec["split"], object), "oracle": np.array(dec["oracle"], object)})


def best_runs(ds, split):
    """Per σ: runs of consecutive steps with the same best oracle (r², tie margin), with the mean r²."""
    d = ds.sel(split=split)
    best = best_oracle(d).transpose("sigma", "step").values
    out = []
    for i, s in enumerate(d.sigma.values):
        j = 0
        while j < d.sizes["step"]:
            k = j
            while k + 1 < d.sizes["step"] and best[i, k + 1] == best[i, j]:
                k += 1
            name = best[i, j]
            cells = d.r2.isel(sigma=i, step=slice(j, k + 1))
            r2 = (float("nan") if name == UNDEFINED else float(cells.max("oracle").mean()) if name == TIE
                  else float(cells.sel(oracle=name).mean()))                  # undefined: r² NaN, no oracle
            out.append({"sigma": float(s), "oracle": str(name), "from": int(d.step[j]), "to": int(d.step[k]),
                        "r2": r2})
            j = k + 1
    return out


def oracle_regions(ds, split):
    """For each oracle: the cells (step, σ) where it is best: count, step and σ range, mean r² there."""
    d = ds.sel(split=split)
    best = best_oracle(d).transpose("step", "sigma").values
    out = {}
    for name in list(d.oracle.values) + [TIE, UNDEFINED]:
        mask = best == name
        if not mask.any():
            continue
        si, gi = np.nonzero(mask)
        r2 = d.r2.transpose("step", "sigma", "oracle").values
        vals = r2[mask].max(-1) if name in (TIE, UNDEFINED) else r2[..., list(d.oracle.values).index(name)][mask]
        out[name] = {"cells": int(mask.sum()), "steps": [int(d.step[si.min()]), int(d.step[si.max()])],
                     "sigma": [float(d.sigma[gi.min()]), float(d.sigma[gi.max()])], "r2_mean": float(vals.mean()),
                     "r2_min": float(vals.min())}
        if name == UNDEFINED:                                                  # r² NaN there: no mean to give
            out[name].update(r2_mean=None, r2_min=None)
    return out


def first_best(ds, split, name):
    """Per σ: the first step from which `name` is the best oracle at every later checkpoint (None: never)."""
    d = ds.sel(split=split)
    best = best_oracle(d).transpose("sigma", "step").values
    out = {}
    for i, s in enumerate(d.sigma.values):
        is_b = best[i] == name
        if not is_b[-1]:
            out[f"{s:g}"] = None
            continue
        k = len(is_b) - 1
        while k > 0 and is_b[k - 1]:
            k -= 1
        out[f"{s:g}"] = int(d.step[k])
    return out


def slope(x, y):
    """Least-squares slope of log y on log x (None with fewer than 2 positive points)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = (x > 0) & (y > 0) & np.isfinite(y)
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0]) if ok.sum() >= 2 else None


def pair_summary(pair):
    """Agreement means over the checkpoints (step > 0) before min(τ_mem) and after max(τ_mem) of the
    two members; without τ_mem, "before" is every checkpoint after step 0."""
    taus = [pair["clocks"][t]["tau_mem"] for t in "ab"]
    steps = np.array(pair["steps"])
    lo = min((t for t in taus if t is not None), default=None)
    hi = max(taus) if all(t is not None for t in taus) else None
    sig = np.array(pair["sigma"])
    j = int(np.argmin(abs(sig - 1.0)))

    def mean_over(mask):
        if mask is None or not mask.any():
            return None
        return {"n_checkpoints": int(mask.sum()),
                "sample_same": float(np.mean(np.array(pair["sample_same"])[mask])),
                "basin_same": float(np.mean(np.array(pair["basin_same"])[mask])),
                "cosine_sigma1": float(np.mean(np.array(pair["cosine"])[mask, j])),
                "sample_hamming": float(np.mean(np.array(pair["sample_hamming"])[mask]))}
    trained = steps > 0          # step 0 is the zero-output initialization, D = c_skip·x for every seed
    return {"tau_mem": taus, "tau_rule": [pair["clocks"][t]["tau_rule"] for t in "ab"],
            "shared_train": pair["shared_train"],
            "before": mean_over(trained & (steps < lo)) if lo is not None else mean_over(trained),
            "after": mean_over(steps > hi) if hi is not None else None, "sigma_cosine": float(sig[j])}


def gap_closed(cross, taus):
    """(L_rule − L_net)/(L_rule − L_mem) of the σ-averaged training losses per step, and interpolated
    (in ln(step + 1)) at τ_rule and τ_mem."""
    avg = dict(zip(cross["oracle"], cross["oracle_loss_avg"]))
    g = (avg["rule"] - np.array(cross["loss_avg"])) / (avg["rule"] - avg["memorizer"])
    x = np.log(np.array(cross["steps"], float) + 1)
    at = {k: float(np.interp(np.log(taus[k] + 1), x, g)) for k in ("tau_rule", "tau_mem")}
    return {"per_step": dict(zip(map(str, cross["steps"]), g.round(4).tolist())), "at": at}


def summaries(res):
    ds = decompose_dataset(res["decompose"])
    cross, ex = res["crossover"], res["excess_by_n"]
    out = {"regions": {sp: oracle_regions(ds, sp) for sp in ds.split.values},
           "runs_heldout": best_runs(ds, "heldout"),
           "memorizer_from": {sp: first_best(ds, sp, "memorizer") for sp in ds.split.values},
           "rule_from": {sp: first_best(ds, sp, "rule") for sp in ds.split.values},
           "tau_cross": cross["tau_cross"], "tau_cross_sigma": dict(zip([f"{s:.3g}" for s in cross["sigma"]],
                                                                      cross["tau_cross_sigma"])),
           "gap_closed": gap_closed(cross, res["taus"]),
           "excess_slope_N": slope(ex["N"], ex["excess"]),
           "pairs": {n: pair_summary(p) for n, p in res["pairs"].items()}}
    meas = ex.get("tau_mem_measured") or {}
    if meas:
        ns = sorted(int(n) for n in meas)
        out["tau_mem_slope_N"] = slope(ns, [meas[str(n)] for n in ns])
    return out


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------

def fig_heatmap(res, path):
    ds = decompose_dataset(res["decompose"])
    t = res["taus"]
    fig = plot_decompose(ds, split="heldout", taus={"τ_rule": t["tau_rule"], "τ_mem": t["tau_mem"]})
    save_figure(fig, path, dpi=110)


def fig_crossover(res, path):
    c, ex, t = res["crossover"], res["excess_by_n"], res["taus"]
    fig = new_figure((11.5, 4.0))
    a1, a2 = fig.subplots(1, 2)
    steps = np.array(c["steps"]) + 1
    a1.plot(steps, c["loss_avg"], "k.-", label="network")
    for name, v in zip(c["oracle"], c["oracle_loss_avg"]):
        a1.axhline(v, ls="--", lw=1, label=name, color={"memorizer": "#ff9f1c", "rule": "#2ca02c",
                                                         "local": "#1f77b4"}.get(name, "#9467bd"))
    for name, v, ls in (("τ_mem", t["tau_mem"], "-"), ("τ_cross", c["tau_cross"], ":")):
        if v:
            a1.axvline(v + 1, color="grey", ls=ls, label=f"{name} = {v:.0f}")
    a1.set(xscale="log", yscale="log", xlabel="training step + 1", ylabel="weighted training loss (σ-averaged)",
           title="loss crossover, shipped series (N = 120)")
    a1.legend(fontsize=7)
    a2.loglog(ex["N"], ex["excess"], "o-", color="#2ca02c", label="L_rule − L_mem (σ-averaged)")
    a2.set(xlabel="N (training items)", ylabel="generalizer's excess training loss")
    meas = ex.get("tau_mem_measured") or {}
    if meas:
        b = a2.twinx()
        ns = sorted(int(n) for n in meas)
        b.loglog(ns, [meas[str(n)] for n in ns], "s--", color="#ff9f1c", label="τ_mem measured (two_clocks)")
        b.set_ylabel("τ_mem (steps)")
        b.legend(fontsize=7, loc="lower left")
    a2.legend(fontsize=7, loc="upper right")
    save_figure(fig, path, dpi=110)


def fig_pairs(res, path):
    pairs = res["pairs"]
    fig = new_figure((5.2 * len(pairs), 3.8))
    axes = np.atleast_1d(fig.subplots(1, len(pairs)))
    for ax, (n, p) in zip(axes, pairs.items()):
        steps = np.array(p["steps"]) + 1
        j = int(np.argmin(abs(np.array(p["sigma"]) - 1.0)))
        ax.plot(steps, p["sample_same"], "o-", label="same sample (same noise)")
        ax.plot(steps, np.mean(p["basin_same"], axis=1), "s-", label="same basin endpoint (planes)")
        ax.plot(steps, np.array(p["cosine"])[:, j], "^-", label=f"cosine of D at σ = {p['sigma'][j]:g}")
        for tag, ls in (("a", "--"), ("b", ":")):
            ck = p["clocks"][tag]
            ax.plot(np.array(ck["steps"]) + 1, ck["mem_ratio"], color="#ff9f1c", ls=ls, lw=1,
                    label=f"mem_ratio {tag}")
            if ck["tau_mem"]:
                ax.axvline(ck["tau_mem"] + 1, color="#ff9f1c", ls=ls, lw=0.8)
        ax.set(xscale="log", ylim=(-0.03, 1.03), xlabel="training step + 1", title=f"disjoint pair, N = {n} each")
        ax.legend(fontsize=6)
    save_figure(fig, path, dpi=110)


# ---------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------

def _f(v, fmt="{:.0f}"):
    return "never" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt.format(v)


def findings(res, s):
    """The headline numbers as a list of markdown lines (computed, so --from-results rewrites them)."""
    t = res["taus"]
    mem = {k: v for k, v in s["memorizer_from"]["heldout"].items() if v is not None}
    rule = {k: v for k, v in s["rule_from"]["heldout"].items() if v is not None}
    reg = s["regions"]["heldout"]
    g = s["gap_closed"]["at"]
    out = ["## Findings (held-out points unless said)", ""]
    if "rule" in reg:
        first = min(rule.values()) if rule else None
        when = "never stays best" if first is None else (
            f"stays best from step {first}, {'before' if first < t['tau_rule'] else 'after'} τ_rule = {t['tau_rule']:.0f}")
        out.append(f"- Rule oracle best in {reg['rule']['cells']} (step, σ) cells, steps {reg['rule']['steps'][0]}–"
                   f"{reg['rule']['steps'][1]}, σ {reg['rule']['sigma'][0]:g}–{reg['rule']['sigma'][1]:g}, mean r² "
                   f"{reg['rule']['r2_mean']:.2f}; at some σ it {when}.")
    if mem:
        lowest = min(float(k) for k in mem)
        out.append(f"- Memorizer stays best from step {min(mem.values())} at σ = {min(mem, key=mem.get)}, later at "
                   f"smaller σ ({', '.join(f'σ {k}: {v}' for k, v in mem.items())}); at no σ below {lowest:g} "
                   f"(τ_mem = {t['tau_mem']:.0f}).")
    for name in ("local", "local_equivariant"):
        if name in reg:
            out.append(f"- {name} best in {reg[name]['cells']} cells, steps {reg[name]['steps'][0]}–{reg[name]['steps'][1]} "
                       f"(mean r² {reg[name]['r2_mean']:.2f}).")
    if "tie" in reg:
        out.append(f"- Ties (lead < {TIE_MARGIN}) in {reg['tie']['cells']} cells, σ from {reg['tie']['sigma'][0]:g}.")
    if UNDEFINED in reg:
        out.append(f"- Undefined (r² NaN: NaN or constant network output) in {reg[UNDEFINED]['cells']} cells, steps "
                   f"{reg[UNDEFINED]['steps'][0]}–{reg[UNDEFINED]['steps'][1]}: no oracle is named there.")
    tc = s["tau_cross"]
    if tc:
        out.append(f"- Loss crossover: τ_cross = {tc:.0f} (τ_rule = {t['tau_rule']:.0f}, τ_mem = {t['tau_mem']:.0f}: "
                   f"τ_mem/τ_cross = {t['tau_mem'] / tc:.1f}); the network has closed {g['tau_mem']:.0%} of the "
                   f"generalizer's excess at τ_mem, {g['tau_rule']:.0%} at τ_rule.")
    out.append(f"- The generalizer's σ-averaged excess scales as N^{_f(s['excess_slope_N'], '{:.2f}')} over N = "
               f"{res['excess_by_n']['N'][0]}…{res['excess_by_n']['N'][-1]}; the measured τ_mem as "
               f"N^{_f(s.get('tau_mem_slope_N'), '{:.2f}')}.")
    for n, ps in s["pairs"].items():
        b, a = ps["before"], ps["after"]
        rule_note = "neither member reaches τ_rule" if all(v is None for v in ps["tau_rule"]) else "τ_rule reached"
        line = f"- Disjoint pair N = {n} ({rule_note}): "
        line += (f"cosine at σ = 1 {b['cosine_sigma1']:.2f}, same basin {b['basin_same']:.2f}, same sample "
                 f"{b['sample_same']:.2f} before τ_mem" if b else "no checkpoint before τ_mem")
        line += (f"; {a['cosine_sigma1']:.2f}, {a['basin_same']:.2f}, {a['sample_same']:.2f} after." if a
                 else "; τ_mem not reached.")
        out.append(line)
    return out


def markdown(res, s, prefix):
    t, p = res["taus"], res["params"]
    L = [f"# What kind of denoiser is it? ({res['preset']} preset)", "",
         "Made by `analyses/decompose` (issue 38). Shipped series: parity G = 2 (offset layout), N = 120, "
         f"τ_rule = {t['tau_rule']:.0f} [{t['tau_rule_ci'][0]:.0f}, {t['tau_rule_ci'][1]:.0f}], "
         f"τ_mem = {t['tau_mem']:.0f} [{t['tau_mem_ci'][0]:.0f}, {t['tau_mem_ci'][1]:.0f}] "
         "(checkpoints/parity-default/clocks.json).", "",
         f"Sizes: decompose {p['n_points']} points per split × {p['n_noise']} noise draws, σ = "
         f"{', '.join(f'{x:g}' for x in p['sigmas'])}; crossover on all training items × {p['cross_noise']} draws, "
         f"{len(p['cross_sigmas'])} σ in [{min(p['cross_sigmas']):.2g}, {max(p['cross_sigmas']):.2g}]; pairs: DiT width "
         f"{p['pair_width']}, depth {p['pair_depth']}, batch {p['pair_batch']}, {p['pair_steps']} steps. "
         f"Wall times (s, 1 torch thread, shared machine): {json.dumps(res.get('timings_s', {}))}.", "",
         *findings(res, s), ""]
    L += _oracles(s, t, prefix) + _crossover(res, s, t, prefix) + _disjoint(s, prefix)
    return "\n".join(L)


def _oracles(s, t, prefix):
    """Section 1: which oracle is best per (step, σ) cell, per split, and from when each stays best."""
    L = ["## 1. Which oracle explains the network (r² of each oracle alone, no fit)", "",
         f"\"Best\" = highest r²; a lead under {TIE_MARGIN} is a tie (the oracles agree there: small σ). "
         "Per split, the (step × σ) cells where each oracle is best:", ""]
    for split, reg in s["regions"].items():
        L += [f"**{split} points**", "", "| oracle | cells | steps | σ | mean r² | min r² |", "|---|---|---|---|---|---|"]
        L += [f"| {n} | {r['cells']} | {r['steps'][0]}–{r['steps'][1]} | {r['sigma'][0]:g}–{r['sigma'][1]:g} | "
              f"{r['r2_mean']:.3f} | {r['r2_min']:.3f} |" for n, r in reg.items()]
        L += [""]
    L += ["Held-out points, per σ: consecutive checkpoints with the same best oracle (mean r² of that oracle):", "",
          "| σ | runs |", "|---|---|"]
    by_sigma = {}
    for r in s["runs_heldout"]:
        by_sigma.setdefault(r["sigma"], []).append(f"{r['oracle']} {r['from']}–{r['to']} ({r['r2']:.2f})")
    L += [f"| {sg:g} | {'; '.join(v)} |" for sg, v in by_sigma.items()]
    L += ["", f"First step from which the memorizer stays best, per σ (compare τ_mem = {t['tau_mem']:.0f}):", ""]
    for split, d in s["memorizer_from"].items():
        L.append(f"- {split}: " + ", ".join(f"σ {k}: {_f(v)}" for k, v in d.items()))
    L += ["", f"First step from which the rule oracle stays best, per σ (compare τ_rule = {t['tau_rule']:.0f}):", ""]
    for split, d in s["rule_from"].items():
        L.append(f"- {split}: " + ", ".join(f"σ {k}: {_f(v)}" for k, v in d.items()))
    return L + ["", f"![heat maps]({prefix}decompose_heatmap.png)", ""]


def _crossover(res, s, t, prefix):
    """Section 2: τ_cross, the share of the generalizer's excess closed, the excess by N."""
    L = ["## 2. The loss crossover", "",
          f"τ_cross (the network's σ-averaged weighted training loss stays below the rule oracle's from this step): "
          f"**{_f(s['tau_cross'])}** vs τ_mem = {t['tau_mem']:.0f}. Per σ: "
          + ", ".join(f"σ {k}: {_f(v)}" for k, v in s["tau_cross_sigma"].items()) + ".", "",
          "Share of the generalizer's excess over the memorizer closed by the network's σ-averaged training loss, "
          "(L_rule − L_net)/(L_rule − L_mem): "
          f"{s['gap_closed']['at']['tau_rule']:.2f} at τ_rule, {s['gap_closed']['at']['tau_mem']:.2f} at τ_mem, "
          f"{list(s['gap_closed']['per_step'].values())[-1]:.2f} at the last checkpoint.", ""]
    ex = res["excess_by_n"]
    L += ["| N | L_rule | L_mem | excess | τ_mem measured |", "|---|---|---|---|---|"]
    meas = ex.get("tau_mem_measured") or {}
    L += [f"| {n} | {r:.4f} | {m:.4f} | {e:.4f} | {_f(meas[str(n)]) if str(n) in meas else 'not measured'} |"
          for n, r, m, e in zip(ex["N"], ex["rule"], ex["memorizer"], ex["excess"])]
    L += ["", f"log-log slope of the excess in N: {_f(s['excess_slope_N'], '{:.2f}')}; of the measured τ_mem in N: "
          f"{_f(s.get('tau_mem_slope_N'), '{:.2f}')}.", "", f"![crossover]({prefix}decompose_crossover.png)", ""]
    return L


def _disjoint(s, prefix):
    """Section 3: two models on disjoint training sets, before and after τ_mem."""
    L = ["## 3. Disjoint training sets", ""]
    L += ["| N | shared train items | τ_rule a, b | τ_mem a, b | before τ_mem: same sample / same basin / cosine | "
          "after τ_mem: same sample / same basin / cosine |", "|---|---|---|---|---|---|"]
    for n, ps in s["pairs"].items():
        def cell(x):
            return "—" if x is None else (f"{x['sample_same']:.2f} / {x['basin_same']:.2f} / {x['cosine_sigma1']:.3f} "
                                          f"({x['n_checkpoints']} ckpts)")
        L.append(f"| {n} | {ps['shared_train']} | {', '.join(_f(v) for v in ps['tau_rule'])} | "
                 f"{', '.join(_f(v) for v in ps['tau_mem'])} | {cell(ps['before'])} | {cell(ps['after'])} |")
    L += ["", "Step 0 is left out of both means: the DiT's output layer starts at zero, so D = c_skip·x for every "
          "initialization and the two members agree exactly there.", "",
          f"![pairs]({prefix}decompose_disjoint.png)", ""]
    return L


def write_all(res, out, prefix=""):
    s = summaries(res)
    res_s = dict(res, summary=s)
    atomic_write_text(out / f"{prefix}decompose.json", json.dumps(res_s, indent=1))
    fig_heatmap(res, out / f"{prefix}decompose_heatmap.png")
    fig_crossover(res, out / f"{prefix}decompose_crossover.png")
    fig_pairs(res, out / f"{prefix}decompose_disjoint.png")
    atomic_write_text(out / f"{prefix}decompose.md", markdown(res, s, prefix))
    return s
