"""The decompose study's loss-crossover figure: the shipped series' σ-averaged training loss against the exact
oracles' with τ_cross, and the generalizer's excess over the memorizer as a function of N beside τ_mem(N) measured
by analyses/two_clocks."""
import numpy as np

from scoreprobe.viz.common import new_figure


def plot_crossover(res, s):
    """Left: σ-averaged training loss of the shipped series against the oracles, τ_cross with its interval.
    Right: the generalizer's excess over the memorizer vs N per data seed, τ_mem(N) measured. `res`: "crossover"
    (`scoreprobe.probes.crossover.crossover_json`), "excess_by_n" (`excess_by_n`, with "tau_mem_measured" where
    known), "taus" (the series' clocks), optionally "cross_ci"; `s`: the study's summary (unused). -> Figure."""
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
    return fig
