"""The decompose study's crossover (section 2) and disjoint-pairs (section 3) summaries, markdown and figures,
from its JSON alone (so --from-results rewrites them byte for byte)."""
import math

import numpy as np
from scipy import stats as st

from scoreprobe.probes.wilson import wilson_interval
from scoreprobe.stats import intervals
from scoreprobe.viz import new_figure
from scoreprobe.viz.common import save_figure

CI = 0.95


def t_interval(values, ci=CI):
    """[mean, lo, hi] of values over units (t, n − 1 df); lo, hi None with fewer than 2 finite units."""
    v = np.asarray(values, np.float64)
    if not np.isfinite(v).all() or len(v) == 0:
        return [None, None, None]
    if len(v) < 2:
        return [float(v.mean()), None, None]
    return [float(x) for x in intervals.t_interval(v, ci)]


def mean_interval(mean, sd, n, ci=CI):
    """[mean, lo, hi] of a mean of n points with standard deviation sd (t, n − 1 df)."""
    if mean is None or not np.isfinite(mean) or n < 2 or not np.isfinite(sd):
        return [None if mean is None or not np.isfinite(mean) else float(mean), None, None]
    half = st.t.ppf(0.5 + ci / 2, n - 1) * sd / np.sqrt(n)
    return [float(mean), float(mean - half), float(mean + half)]


def wilson(share, n, ci=CI):
    """[share, lo, hi]: Wilson interval of a share of n trials (None when undefined: NaN share or n = 0)."""
    if share is None or n <= 0 or not np.isfinite(share):
        return [None, None, None]
    lo, hi = wilson_interval(share, n, st.norm.ppf(0.5 + ci / 2))
    return [float(share), float(lo), float(hi)]


def _at(ag, k=None):
    """One comparison's arrays at step index k (None: a comparison without steps)."""
    pick = (lambda v: np.asarray(v, np.float64)) if k is None else (lambda v: np.asarray(v, np.float64)[k])
    return {v: pick(ag[v]) for v in ("cosine", "cosine_sd", "sample_same", "sample_nonfinite", "basin_same",
                                     "basin_nonfinite")}


def one_pair(a, sizes):
    """Per-pair intervals: cosine per σ over the points (t), same sample and same basin (Wilson)."""
    return {"cosine": [mean_interval(m, s, sizes["n_points"]) for m, s in zip(a["cosine"], a["cosine_sd"])],
            "sample_same": wilson(float(a["sample_same"]), sizes["n_samples"] - int(a["sample_nonfinite"])),
            "basin_same": [wilson(float(b), sizes["n_grid"] - int(nb))
                           for b, nb in zip(a["basin_same"], a["basin_nonfinite"])]}


def over_replicates(parts):
    """Mean with a t interval over the replicate pairs (2 df for 3) of cosine (σ), sample_same, basin_same."""
    return {"cosine": [t_interval(col) for col in np.array([p["cosine"] for p in parts]).T],
            "sample_same": t_interval([float(p["sample_same"]) for p in parts]),
            "basin_same": [t_interval(col) for col in np.array([p["basin_same"] for p in parts]).T],
            "n_pairs": len(parts)}


def n_summary(rec, sizes):
    """One N: members' clocks, and per measured step the disjoint pairs (over replicates and per pair), the
    same-data pairs and the floor."""
    reps = rec["replicates"]
    first = next(iter(reps.values()))["disjoint"]
    steps = first["steps"]
    clocks = {k: {"tau_rule": c["tau_rule"], "tau_mem": c["tau_mem"], "data_seed": c["data_seed"], "seed": c["seed"],
                  "steps": c["steps"], "rule_acc": c["rule_acc"],
                  "rule_acc_at": {str(s): float(np.interp(np.log(s + 1), np.log(np.array(c["steps"]) + 1),
                                                          c["rule_acc"])) for s in steps}}
              for k, c in rec["clocks"].items()}
    out = {"clocks": clocks, "steps": steps, "sigma": first["sigma"], "sigma_start": first["sigma_start"],
           "rule_learned": all(c["tau_rule"] is not None for c in clocks.values()),
           "tau_mem_reached": [k for k, c in clocks.items() if c["tau_mem"] is not None],
           "shared_train_max": max(rec["shared_train"].values()) if rec["shared_train"] else 0,
           "floor": over_replicates([_at(r["floor"]) for r in reps.values()]),
           "floor_per_pair": {r: one_pair(_at(x["floor"]), sizes) for r, x in reps.items()},
           "disjoint": {}, "disjoint_per_pair": {}, "same_data": {}}
    for k, s in enumerate(steps):
        parts = {r: _at(x["disjoint"], k) for r, x in reps.items()}
        out["disjoint"][str(s)] = over_replicates(list(parts.values()))
        out["disjoint_per_pair"][str(s)] = {r: one_pair(a, sizes) for r, a in parts.items()}
        out["same_data"][str(s)] = {r: one_pair(_at(x["same_data"], k), sizes) for r, x in reps.items()
                                    if "same_data" in x}
    return out


def pairs_summary(pairs):
    """The pairs section's summary from res["pairs"]."""
    c = pairs["ceiling"]
    return {"by_n": {n: n_summary(rec, pairs["sizes"]) for n, rec in pairs["by_n"].items()},
            "ceiling": {"cosine": [float(v) for v in c["cosine"]], "sample_same": float(c["sample_same"]),
                        "basin_same": [float(v) for v in c["basin_same"]]}}


def slope(x, y):
    """Least-squares slope of log y on log x (None with fewer than 2 positive points)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = (x > 0) & (y > 0) & np.isfinite(y)
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0]) if ok.sum() >= 2 else None


def excess_slopes(ex):
    """The excess-vs-N log-log slope per data seed and its t interval over the seeds."""
    by = ex.get("excess_by_seed") or [ex["excess"]]
    per = [slope(ex["N"], row) for row in by]
    return {"seeds": ex.get("excess_seeds", [0]), "per_seed": per,
            "interval": t_interval([np.nan if v is None else v for v in per])}


# ---------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------

def _f(v, fmt="{:.0f}"):
    return "never" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt.format(v)


def _ci(x, fmt="{:.2f}"):
    """"m [lo, hi]" of a [mean, lo, hi] triple ("—" for an undefined mean, no bracket without an interval)."""
    m, lo, hi = x
    if m is None:
        return "—"
    return fmt.format(m) + ("" if lo is None else f" [{fmt.format(lo)}, {fmt.format(hi)}]")


def cross_findings(res, s):
    """The crossover headline lines."""
    t, out = res["taus"], []
    tc, ci = s["tau_cross"], res.get("cross_ci")
    if tc:
        g = s["gap_closed"]["at"]
        out.append(f"- Loss crossover, shipped series: τ_cross = {tc:.0f} (τ_rule = {t['tau_rule']:.0f}, τ_mem = "
                   f"{t['tau_mem']:.0f}); the network has closed {g['tau_mem']:.0%} of the generalizer's excess at "
                   f"τ_mem, {g['tau_rule']:.0%} at τ_rule.")
    for c, who in ((ci, "trained model (training seeds, one training set)"),
                   (res.get("cross_ci_data"), "data seed (training seed 0)")):
        if c and c["series"]:
            per = ", ".join(f"{_f(v)} [{_f(lo)}, {_f(hi)}]" for v, lo, hi in zip(c["tau_cross"], c["lo"], c["hi"]))
            over = (f"; mean over the {len(c['series'])} models {_ci([c['mean'], c['mean_lo'], c['mean_hi']], '{:.0f}')}"
                    if len(c["series"]) > 1 else "")
            out.append(f"- τ_cross per {who} (95% bootstrap over noise draws): {per}{over}.")
    es = s["excess_slopes"]
    out.append(f"- The generalizer's σ-averaged excess over the memorizer scales as N^{_ci(es['interval'])} over N = "
               f"{res['excess_by_n']['N'][0]}…{res['excess_by_n']['N'][-1]} (mean and 95% t interval over data seeds "
               f"{', '.join(map(str, es['seeds']))}); the measured τ_mem as N^{_f(s.get('tau_mem_slope_N'), '{:.2f}')}.")
    return out


def pairs_findings(s):
    """The disjoint-pairs headline lines (last measured step, σ = 1)."""
    out, ceil = [], s["pairs"]["ceiling"]
    for n, ps in s["pairs"]["by_n"].items():
        last, j = str(ps["steps"][-1]), _j1(ps["sigma"])
        d, fl = ps["disjoint"][last], ps["floor"]
        rule = ("every member reaches τ_rule" if ps["rule_learned"] else "NOT every member reaches τ_rule")
        mem = "no member reaches τ_mem" if not ps["tau_mem_reached"] else f"τ_mem reached by {ps['tau_mem_reached']}"
        out.append(f"- Disjoint pairs N = {n} at step {last} ({rule}; {mem}): cosine at σ = {ps['sigma'][j]:g} "
                   f"{_ci(d['cosine'][j])} over {d['n_pairs']} pairs, against the memorizers' floor "
                   f"{_ci(fl['cosine'][j])} and the rule oracle's ceiling {ceil['cosine'][j]:.0f}; same sample "
                   f"{_ci(d['sample_same'])} (floor {_ci(fl['sample_same'])}).")
    return out


def _j1(sigma):
    return int(np.argmin(abs(np.array(sigma) - 1.0)))


def _cross_table(ci, group):
    """The τ_cross table of one group of models, with its over-models interval."""
    if not ci:
        return []
    L = [f"τ_cross with intervals over {group}: per model, a 95% percentile bootstrap over the (training item, noise "
         f"draw) cells ({ci['n_draws']} draws per item, {ci['n_boot']} resamples, the same cells at every "
         "checkpoint); over models, a t interval (models as units).", "",
         "| model | last step | τ_cross | 95% interval | resamples never crossing |", "|---|---|---|---|---|"]
    L += [f"| {m} | {ls} | {_f(v)} | [{_f(lo)}, {_f(hi)}] | {nv:.3f} |" for m, ls, v, lo, hi, nv in
          zip(ci["series"], ci["last_step"], ci["tau_cross"], ci["lo"], ci["hi"], ci["boot_never"])]
    return L + ["", f"Mean over models: {_ci([ci['mean'], ci['mean_lo'], ci['mean_hi']], '{:.0f}')}"
                + (f"; left out (still training when measured): {', '.join(ci['skipped_unfinished'])}"
                   if ci.get("skipped_unfinished") else "") + ".", ""]


def crossover_section(res, s, t, prefix):
    """Section 2: τ_cross (with intervals), the share of the generalizer's excess closed, the excess by N."""
    L = ["## 2. The loss crossover", "",
         f"τ_cross (the network's σ-averaged weighted training loss stays below the rule oracle's from this step), "
         f"shipped series: **{_f(s['tau_cross'])}** vs τ_mem = {t['tau_mem']:.0f}. Per σ: "
         + ", ".join(f"σ {k}: {_f(v)}" for k, v in s["tau_cross_sigma"].items()) + ".", ""]
    L += _cross_table(res.get("cross_ci"), "training seeds 0, 1, 2 on the shipped training set")
    cd = res.get("cross_ci_data")
    if cd:
        L += _cross_table(cd, f"data seeds {', '.join(map(str, cd['data_seeds']))} (training seed 0; read over the "
                              f"checkpoints up to step {cd['up_to_step']}: the data-seed models are trained that far)")
    L += ["Share of the generalizer's excess over the memorizer closed by the network's σ-averaged training loss, "
          "(L_rule − L_net)/(L_rule − L_mem), shipped series: "
          f"{s['gap_closed']['at']['tau_rule']:.2f} at τ_rule, {s['gap_closed']['at']['tau_mem']:.2f} at τ_mem, "
          f"{list(s['gap_closed']['per_step'].values())[-1]:.2f} at the last checkpoint.", ""]
    ex, es = res["excess_by_n"], s["excess_slopes"]
    meas = ex.get("tau_mem_measured") or {}
    L += [f"Excess by N (data seed {es['seeds'][0]}; the slope below is over all seeds):", "",
          "| N | L_rule | L_mem | excess | τ_mem measured |", "|---|---|---|---|---|"]
    L += [f"| {n} | {r:.4f} | {m:.4f} | {e:.4f} | {_f(meas[str(n)]) if str(n) in meas else 'not measured'} |"
          for n, r, m, e in zip(ex["N"], ex["rule"], ex["memorizer"], ex["excess"])]
    L += ["", "log-log slope of the excess in N per data seed: "
          + ", ".join(f"seed {k}: {_f(v, '{:.3f}')}" for k, v in zip(es["seeds"], es["per_seed"]))
          + f"; mean {_ci(es['interval'], '{:.3f}')} (95% t over seeds). Of the measured τ_mem in N (one run per N): "
          f"{_f(s.get('tau_mem_slope_N'), '{:.2f}')}.", "", f"![crossover]({prefix}decompose_crossover.png)", ""]
    return L


def _clock_table(ps):
    steps = ps["steps"]
    L = ["| member | data seed | init seed | τ_rule | τ_mem | " + " | ".join(f"rule_acc at {s}" for s in steps) + " |",
         "|---|---|---|---|---|" + "---|" * len(steps)]
    L += [f"| {k} | {c['data_seed']} | {c['seed']} | {_f(c['tau_rule'])} | {_f(c['tau_mem'])} | "
          + " | ".join(f"{c['rule_acc_at'][str(s)]:.2f}" for s in steps) + " |" for k, c in ps["clocks"].items()]
    return L


def _agreement_table(ps, step, ceil):
    """Rows per σ (cosine), then same sample and same basin: floor, disjoint pairs, same-data pairs, ceiling."""
    d, fl, sd = ps["disjoint"][step], ps["floor"], ps["same_data"][step]
    head = ("| measure | floor: memorizers (over pairs) | network, disjoint data (over pairs) | "
            + " | ".join(f"network, same data ({r})" for r in sd) + " | ceiling: rule oracle |")
    L = [head, "|---|---|---|" + "---|" * len(sd) + "---|"]
    for j, sg in enumerate(ps["sigma"]):
        L.append(f"| cosine σ = {sg:g} | {_ci(fl['cosine'][j], '{:.3f}')} | {_ci(d['cosine'][j], '{:.3f}')} | "
                 + " | ".join(_ci(x["cosine"][j], "{:.3f}") for x in sd.values()) + f" | {ceil['cosine'][j]:.3f} |")
    L.append(f"| same sample | {_ci(fl['sample_same'])} | {_ci(d['sample_same'])} | "
             + " | ".join(_ci(x["sample_same"]) for x in sd.values()) + f" | {ceil['sample_same']:.2f} |")
    for j, s0 in enumerate(ps["sigma_start"]):
        L.append(f"| same basin from σ = {s0:g} | {_ci(fl['basin_same'][j])} | {_ci(d['basin_same'][j])} | "
                 + " | ".join(_ci(x["basin_same"][j]) for x in sd.values()) + f" | {ceil['basin_same'][j]:.2f} |")
    return L


def _per_pair_lines(ps, step):
    j = _j1(ps["sigma"])
    return [f"- pair {r}: cosine at σ = {ps['sigma'][j]:g} {_ci(x['cosine'][j], '{:.3f}')} (t over the points), same "
            f"sample {_ci(x['sample_same'])} (Wilson)" for r, x in ps["disjoint_per_pair"][step].items()]


def pairs_section(res, s, prefix):
    """Section 3: pairs on disjoint training sets where the rule is learned, between floor and ceiling."""
    p, pz = res["params"], s["pairs"]
    L = ["## 3. Disjoint training sets, at N where the rule is learned", "",
         f"Per N, {p['pair_replicates']} replicate pairs: members a and b of a pair are trained on disjoint training "
         "sets (different data seeds; every training set of one N is disjoint from every other, checked: the most "
         "images any two share is given below) with different init seeds, and replicates differ in both; for "
         f"replicate(s) {p['pair_same_data']} a member c is trained on a's data with a third init seed (a same-data "
         f"pair). Recipe: DiT width {p['pair_width']}, depth {p['pair_depth']}, batch {p['pair_batch']}, lr "
         f"{p.get('pair_lr', 2e-3):g}, {p['pair_steps']} steps (the shipped recipe's network and optimizer, stopped "
         "early: whether each member has reached τ_rule is in its clock table).", "",
         "**Floor**: the two training sets' memorizers compared the same way — their samples are their own training "
         "items, so for disjoint sets their same-sample share is 0 by construction, while their cosine is not small "
         "at large σ. **Ceiling**: the rule oracle compared with itself — 1 for every measure by construction (a "
         "check of the measurement, not a result); the same-data pair is the informative ceiling (two inits, one "
         "training set). Agreement is read beside the members' rule clock, not as its proxy: agreement and rule "
         "recovery are separate transitions (Maillard & Goldt 2026). Intervals: 95%, t over the replicate pairs "
         "(2 df) or, for one pair, t over the points (cosine) and Wilson (shares).", "",
         "An earlier version of this section paired models at N = 8 and 16, where neither member learns the rule "
         "(τ_rule never reached), and read their agreement as a generalization test; it was not one: at such N two "
         "perfect memorizers already agree substantially in cosine, and no member generalizes.", ""]
    for n, ps in pz["by_n"].items():
        L += [f"### N = {n} per member", "",
              f"Training sets shared by two disjoint-data members: at most {ps['shared_train_max']} images. "
              + ("Every member reaches τ_rule." if ps["rule_learned"] else "**Not every member reaches τ_rule**: "
                 "agreement here is not measured where the rule is learned.")
              + (" No member reaches τ_mem within the run." if not ps["tau_mem_reached"] else
                 f" τ_mem reached by {', '.join(ps['tau_mem_reached'])}."), "", *_clock_table(ps), ""]
        for step in map(str, ps["steps"]):
            L += [f"Agreement at step {step}:", "", *_agreement_table(ps, step, pz["ceiling"]), "",
                  *_per_pair_lines(ps, step), ""]
    L += ["Step 0 is not measured: the DiT's output layer starts at zero, so D = c_skip·x for every "
          "initialization and any two members agree exactly there.", "", f"![pairs]({prefix}decompose_disjoint.png)", ""]
    return L


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------

def _band(ax, x, trip, color, label, marker):
    m = np.array([np.nan if v[0] is None else v[0] for v in trip])
    ax.plot(x, m, marker + "-", color=color, label=label)
    lo = np.array([np.nan if v[1] is None else v[1] for v in trip])
    hi = np.array([np.nan if v[2] is None else v[2] for v in trip])
    if np.isfinite(lo).any():
        ax.fill_between(x, lo, hi, color=color, alpha=0.2, lw=0)


def fig_pairs(s, path):
    """Per N, top: cosine of the two members' denoisers per σ at the last measured step, between floor and ceiling;
    bottom: the members' rule_acc over steps, beside the disjoint pairs' agreement at the measured steps."""
    by = s["pairs"]["by_n"]
    fig = new_figure((5.2 * len(by), 7.0))
    axes = np.array(fig.subplots(2, len(by))).reshape(2, len(by))
    for (top, bot), (n, ps) in zip(axes.T, by.items()):
        x, last = np.array(ps["sigma"]), str(ps["steps"][-1])
        _band(top, x, ps["floor"]["cosine"], "#ff9f1c", "floor: memorizers of the two sets", "s")
        _band(top, x, ps["disjoint"][last]["cosine"], "#1f77b4", "network pairs, disjoint data", "o")
        for r, sd in ps["same_data"][last].items():
            _band(top, x, sd["cosine"], "#9467bd", f"network pair, same data ({r})", "^")
        top.plot(x, s["pairs"]["ceiling"]["cosine"], "k--", lw=1, label="ceiling: rule oracle with itself")
        top.set(xscale="log", ylim=(-0.05, 1.05), xlabel="σ", ylabel="mean cosine of D_A, D_B (fresh valid images)",
                title=f"N = {n} per member, step {last} (95% intervals)")
        top.legend(fontsize=6)
        for c in ps["clocks"].values():
            bot.plot(np.array(c["steps"]) + 1, c["rule_acc"], "-", color="grey", lw=0.8, alpha=0.7)
        steps = np.array(ps["steps"]) + 1
        j = int(np.argmin(abs(x - 1.0)))
        _band(bot, steps, [ps["disjoint"][str(v)]["cosine"][j] for v in ps["steps"]], "#1f77b4",
              f"disjoint pairs: cosine at σ = {x[j]:g}", "o")
        _band(bot, steps, [ps["disjoint"][str(v)]["sample_same"] for v in ps["steps"]], "#d62728",
              "disjoint pairs: same sample", "s")
        bot.plot([], [], "-", color="grey", label="members' rule_acc (clocks)")
        bot.set(xscale="log", ylim=(-0.05, 1.05), xlabel="training step + 1", title="agreement beside the rule clock")
        bot.legend(fontsize=6)
    save_figure(fig, path, dpi=110)


def fig_crossover(res, s, path):
    """Left: σ-averaged training loss of the shipped series against the oracles, τ_cross with its interval.
    Right: the generalizer's excess over the memorizer vs N per data seed, τ_mem(N) measured."""
    c, ex, t = res["crossover"], res["excess_by_n"], res["taus"]
    fig = new_figure((11.5, 4.0))
    a1, a2 = fig.subplots(1, 2)
    a1.plot(np.array(c["steps"]) + 1, c["loss_avg"], "k.-", label="network")
    for name, v in zip(c["oracle"], c["oracle_loss_avg"]):
        a1.axhline(v, ls="--", lw=1, label=name, color={"memorizer": "#ff9f1c", "rule": "#2ca02c",
                                                         "local": "#1f77b4"}.get(name, "#9467bd"))
    for name, v, ls in (("τ_mem", t["tau_mem"], "-"), ("τ_cross", c["tau_cross"], ":")):
        if v:
            a1.axvline(v + 1, color="grey", ls=ls, label=f"{name} = {v:.0f}")
    ci = res.get("cross_ci")
    if ci and ci["series"] and ci["lo"][0] is not None and ci["hi"][0] is not None:
        a1.axvspan(ci["lo"][0] + 1, ci["hi"][0] + 1, color="grey", alpha=0.2, label="τ_cross 95% (noise draws)")
    a1.set(xscale="log", yscale="log", xlabel="training step + 1", ylabel="weighted training loss (σ-averaged)",
           title="loss crossover, shipped series (N = 120)")
    a1.legend(fontsize=7)
    for k, row in zip(ex.get("excess_seeds", [0]), ex.get("excess_by_seed", [ex["excess"]])):
        a2.loglog(ex["N"], row, "o-", color="#2ca02c", alpha=0.5, lw=1, label=f"L_rule − L_mem, data seed {k}")
    a2.set(xlabel="N (training items)", ylabel="generalizer's excess training loss")
    meas = ex.get("tau_mem_measured") or {}
    if meas:
        b = a2.twinx()
        ns = sorted(int(n) for n in meas)
        b.loglog(ns, [meas[str(n)] for n in ns], "s--", color="#ff9f1c", label="τ_mem measured (two_clocks)")
        b.set_ylabel("τ_mem (steps)")
        b.legend(fontsize=7, loc="lower left")
    a2.legend(fontsize=6, loc="upper right")
    save_figure(fig, path, dpi=110)
