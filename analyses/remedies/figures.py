"""Figures of runs that differ by a variant (analyses/remedies): rule accuracy and the memorized share over training
steps, one colour per variant and one line style per seed. The rule accuracy drawn for a run is `rule_of(row)`
(for a curriculum run: its reading beyond, or among the samples that break, the curriculum's pieces)."""
import numpy as np

from scoreprobe.viz.common import agg_figure, new_figure, save_figure


def variant_figure(rows_by, path, labels, rule_of):
    """One colour per variant of `rows_by` ({variant: rows}), a line style per training seed; legend: labels[v]."""
    fig = agg_figure((11, 4.2))
    ax1, ax2 = fig.subplots(1, 2)
    for i, (v, rs) in enumerate(rows_by.items()):
        for r in rs:
            x = np.asarray(r["curve"]["step"]) + 1
            ls = ("-", "--", ":", "-.", (0, (1, 3)))[r["seed"] % 5]
            ax1.plot(x, rule_of(r), ls, color=f"C{i}", label=f"{labels[v]} s{r['seed']}")
            ax2.plot(x, r["curve"]["mem_ratio"], ls, color=f"C{i}")
    for ax, name in ((ax1, "rule accuracy (curriculum, control: among piece-breaking samples)"), (ax2, "memorized share")):
        ax.set(xscale="log", xlabel="training step + 1", ylabel=name)
    if rows_by:
        ax1.legend(fontsize=6)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def run_figure(rows, path, variants, rule_of):
    """The rows of one table (each with "variant", "seed", "curve"), coloured by their place in `variants`, the first
    seed solid, the others dashed; a curriculum run ("beyond" in its row) also draws every valid sample faint and its
    switch step dotted."""
    fig = new_figure((11, 4.2))
    ax1, ax2 = fig.subplots(1, 2)
    colours = dict(zip(variants, ("black", "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:gray")))
    for r in rows:
        c, ls = r["curve"], "-" if r["seed"] == rows[0]["seed"] else "--"
        x = np.asarray(c["step"]) + 1
        colour, label = colours[r["variant"]], f"{r['variant']} s{r['seed']}"
        if "beyond" in r:   # the curriculum's own images count too in the faint line; the reported clock does not
            ax1.plot(x, c["rule_acc"], ls, color=colour, lw=0.8, alpha=0.35)
            ax1.axvline(r["switch"] + 1, color="0.6", ls=":", lw=0.8)
        ax1.plot(x, rule_of(r), ls, color=colour, label=label)
        ax2.plot(x, c["mem_ratio"], ls, color=colour)
    for ax, name in ((ax1, "rule accuracy (curriculum runs: beyond the pieces;\nfaint: every valid sample; dotted: switch)"),
                     (ax2, "memorized share")):
        ax.set_xscale("log")
        ax.set_xlabel("training step + 1")
        ax.set_ylabel(name)
    if rows:
        ax1.legend(fontsize=7)
    save_figure(fig, path, dpi=110)
