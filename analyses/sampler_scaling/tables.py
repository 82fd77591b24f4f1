"""The tables of analyses/sampler_scaling, from the exports only: per N, τ_mem and τ_rule under the Heun PF-ODE
(the scaling study's exports, or the run's own where the regenerated model differed) and under the stochastic
sampler, paired per run; τ_mem = a·N^b per sampler over thresholds, and b_stochastic − b_heun from the paired
ratios (least squares of ln(τ_stochastic / τ_heun) on ln N over every seed, t interval)."""
import json

import numpy as np

from analyses.sampler_scaling.grid import SAMPLER
from scoreprobe.stats import curves as C
from scoreprobe.studies.export import load_exports, read_export
from scoreprobe.studies.format import curve_table, fmt, not_done, pooled_cell
from scoreprobe.stats.runs import run_stats
from scoreprobe.studies.presets import keys_to_str as _keys_to_str
from scoreprobe.stats.curves import curves_of
from scoreprobe.atomic import atomic_write_text
from scoreprobe.store import normalize_config

SAMPLERS = ("heun", "stochastic")


def collect(args, runs):
    """{sampler: rows}, identity rows, missing {run: why}: every run with a stochastic export and its Heun result."""
    done, missing = load_exports(runs, args.exports)
    rows = {s: [] for s in SAMPLERS}
    identity = []
    for run in runs:
        if run.name not in done:
            continue
        info = done[run.name]
        own = args.exports / "heun" / f"{run.name}.npz"
        heun = read_export(own) if own.is_file() else load_exports([run], args.scaling_exports)[0].get(run.name)
        if heun is None:
            missing[run.name] = "no Heun result of the same model"
            continue
        rows["stochastic"].append(run_stats(run.name, run, info)[0])
        rows["heun"].append(run_stats(run.name, run, heun)[0])
        identity.append({"run": run.name, "N": run.meta["N"], "seed": run.seed, **{k: info["meta"].get(k) for k in (
            "identical", "identity_share", "identity_n")}, "heun_from": "own" if own.is_file() else "scaling export"})
    return rows, identity, missing


def by_N(rows):
    out = {}
    for r in rows:
        out.setdefault(r["meta"]["N"], []).append(r)
    return {N: sorted(rs, key=lambda r: r["seed"]) for N, rs in sorted(out.items())}


def ratio_curves(heun, stoch):
    """{run: {"tau_mem", "tau_rule": (T,) τ_stochastic / τ_heun}}, inf where either is not reached."""
    ch, cs = curves_of(heun), curves_of(stoch)
    out = {}
    for r in heun:
        out[r["run"]] = {}
        for k in ("tau_mem", "tau_rule"):
            a, b = ch[r["run"]][k], cs[r["run"]][k]
            with np.errstate(invalid="ignore", divide="ignore"):
                out[r["run"]][k] = np.where(np.isfinite(a) & np.isfinite(b), b / a, np.inf)
    return out


def section_N(rows):
    """Per N and seed-pooled: τ_mem and τ_rule under both samplers and the paired ratio at the paper's thresholds."""
    h, s = by_N(rows["heun"]), by_N(rows["stochastic"])
    lines = ["## τ_mem and τ_rule per N under both samplers (G = 2)", "", "| N | seeds | τ_mem Heun | τ_mem stochastic | "
             "τ_mem stochastic / Heun (paired) | τ_rule Heun | τ_rule stochastic |", "|---:|---:|---|---|---|---|---|"]
    out = {}
    for N in h:
        rc = ratio_curves(h[N], s[N])
        paired = C.pooled_curve([dict(r) for r in h[N]], rc, "tau_mem")
        at = C.at(paired, 0.1)
        out[N] = {"paired_tau_mem": paired}
        cells = [pooled_cell(C.at(C.pooled_curve(g[N], curves_of(g[N]), k), C.PAPER[k])).split(" (")[0]
                 for g, k in ((h, "tau_mem"), (s, "tau_mem"))]
        rule = [pooled_cell(C.at(C.pooled_curve(g[N], curves_of(g[N]), "tau_rule"), 0.9)).split(" (")[0] for g in (h, s)]
        ratio = "censored (a seed does not reach 0.1 under one sampler)" if at["lower_bound"] else \
            f"{fmt(at['pooled'], 2)} [{fmt(at['ci'][0], 2)}, {fmt(at['ci'][1], 2)}]"
        lines.append(f"| {N} | {len(h[N])} | {cells[0]} | {cells[1]} | {ratio} | {rule[0]} | {rule[1]} |")
    return lines + [""], out


def section_b(rows):
    """b per sampler over memorization thresholds, and b_stochastic − b_heun from the paired ratios."""
    h, s = by_N(rows["heun"]), by_N(rows["stochastic"])
    Ns = [N for N in h if len(h[N]) and N in s]
    if len(Ns) < 2:
        return ["## The exponent b of τ_mem = a·N^b", "", "Fewer than two N done.", ""], {}
    ch, cs = curves_of(rows["heun"]), curves_of(rows["stochastic"])
    rc = ratio_curves(rows["heun"], rows["stochastic"])
    fits = {"heun": C.fit_curve([h[N] for N in Ns], Ns, ch, "tau_mem", "power"),
            "stochastic": C.fit_curve([s[N] for N in Ns], Ns, cs, "tau_mem", "power"),
            "difference": C.fit_curve([h[N] for N in Ns], Ns, rc, "tau_mem", "power")}
    words = {"above": "steeper under the stochastic sampler", "below": "shallower under the stochastic sampler",
             "includes": "no difference excluded"}
    lines = ["## The exponent b of τ_mem = a·N^b under each sampler", "",
             f"N = {', '.join(map(str, Ns))}; least squares of every seed's ln τ_mem on ln N, t interval on b (an N with a "
             "censored seed is left out at that threshold). The difference column fits the paired ratios "
             "τ_stochastic / τ_heun of each run (same checkpoints): its slope is b_stochastic − b_heun.", ""]
    lines += curve_table("memorization threshold", [("b, Heun", fits["heun"]), ("b, stochastic", fits["stochastic"]),
                                                    ("b_stochastic − b_heun", fits["difference"])], 0.1)
    lines += ["", f"- b_stochastic − b_heun: {C.range_text(fits['difference'])}; "
              f"{C.robust(fits['difference'], 0.0, words)}.", ""]
    return lines, fits


def section_identity(identity):
    lines = ["## Are the regenerated runs the shipped ones?", "", "The last checkpoint re-measured with the default "
             "sampler after regenerating the run from its TrainConfig: the share of its sample states equal to the "
             "shipped export's (1.000 of 1000: the same model).", "", "| run | N | training seed | data seed | equal "
             "states | Heun result from |", "|---|---:|---:|---:|---|---|"]
    for i in identity:
        lines.append(f"| {i['run']} | {i['N']} | {i['seed']} | 0 | {i['identity_share']:.3f} of {i['identity_n']} | "
                     f"{i['heun_from']} |")
    return lines + [""]


def write_all(args, runs):
    """Write <results>/sampler_scaling_<preset>.md and .json; returns the .md path."""
    rows, identity, missing = collect(args, runs)
    cmd = "python analyses/sampler_scaling" + ("" if args.preset == "cpu" else f" --preset {args.preset}") + \
        " --from-results"
    lines = ["# τ_mem's exponent in N under the stochastic sampler", "",
             f"Regenerate: `{cmd}`. {len(rows['heun'])} of {len(runs)} runs done. Sampler: EDM stochastic "
             f"(S_churn {SAMPLER['s_churn']:g}, S_noise {SAMPLER['s_noise']:g}, S_tmin 0, S_tmax ∞) against the "
             "default Heun PF-ODE, the same 1000 initial noises, 32 steps. τ reliably exceeds (definitions version 6); "
             "95% CIs: t intervals over training seeds (data seed 0 everywhere).", ""]
    lines += section_identity(identity)
    text, rep_n = section_N(rows)
    lines += text
    text, rep_b = section_b(rows)
    lines += text
    lines += [not_done(missing)]
    rep = {"preset": args.preset, "identity": identity, "per_N": rep_n, "b": rep_b, "missing": missing,
           "runs": {s: [{k: v for k, v in r.items() if k not in ("curve", "curves")} for r in rs] for s, rs in rows.items()}}
    stem = args.results / f"sampler_scaling_{args.preset}"
    stem.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(stem.with_suffix(".md"), "\n".join(lines) + "\n")
    atomic_write_text(stem.with_suffix(".json"), json.dumps(normalize_config(_keys_to_str(rep)), indent=1))
    return stem.with_suffix(".md")



