"""Disjoint-pairs figure: how far two networks trained on disjoint data agree, per σ between a floor (their
training sets' memorizers) and a ceiling (the rule oracle with itself), beside the members' rule clocks."""
import numpy as np

from scoreprobe.viz.common import new_figure


def _band(ax, x, trip, color, label, marker):
    m = np.array([np.nan if v[0] is None else v[0] for v in trip])
    ax.plot(x, m, marker + "-", color=color, label=label)
    lo = np.array([np.nan if v[1] is None else v[1] for v in trip])
    hi = np.array([np.nan if v[2] is None else v[2] for v in trip])
    if np.isfinite(lo).any():
        ax.fill_between(x, lo, hi, color=color, alpha=0.2, lw=0)


def plot_disjoint_pairs(s):
    """The disjoint-pairs summary `s` ({"pairs": scoreprobe.stats.disjoint_pairs.pairs_summary(...)}; per N its
    σ (S,), steps (T,) and [mean, lo, hi] triples) per N, one column each: top, the cosine of the two members'
    denoisers per σ at the last measured step, between floor and ceiling; bottom, the members' rule_acc over steps
    beside the disjoint pairs' agreement at σ nearest 1 at the measured steps. -> Figure (2 × number of N axes)."""
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
        mems = [c["tau_mem"] for c in ps["clocks"].values() if c.get("tau_mem") is not None]
        for k, t in enumerate(mems):
            bot.axvline(t + 1, color="#2ca02c", ls=":", lw=0.9, label="members' τ_mem" if k == 0 else None)
        bot.set(xscale="log", ylim=(-0.05, 1.05), xlabel="training step + 1", title="agreement beside the rule clock")
        bot.legend(fontsize=6)
    return fig
