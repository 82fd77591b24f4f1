"""τ_mem ∝ N^b per group, drawn (analyses/capacity_exponent): τ_mem (memorization 0.1) against N per DiT size,
log-log, every run a point (hollow: not reached, drawn at its last step), the censored fit's line, and the
field's b = 1."""
import math

import numpy as np

from scoreprobe.viz.common import agg_figure, save_figure


def figure(rows_by, fits, path):
    """rows_by {size: rows (each with "tau_mem", "steps", meta "N")}, fits {size: {"b_curve", "Ns", "params"}}
    (`censored_slopes.censored_slope_curve`, full): one colour per size, its line through the crossed runs' centre."""
    fig = agg_figure((5.6, 4.2))
    ax = fig.subplots()
    for i, (size, rows) in enumerate(rows_by.items()):
        c = f"C{i}"
        for r in rows:
            v, N = r["tau_mem"], r["meta"]["N"]
            ok = math.isfinite(v)
            ax.scatter([N], [v if ok else r["steps"]], facecolors=c if ok else "none", edgecolors=c, s=28)
        row = next(r for r in fits[size]["b_curve"] if abs(r["threshold"] - 0.1) < 1e-9)
        if math.isfinite(row["b"]):
            Ns = np.array(fits[size]["Ns"], dtype=float)
            x = np.log(Ns)
            tau = np.array([r["tau_mem"] for r in rows], dtype=float)
            xs = np.log([float(r["meta"]["N"]) for r in rows])
            ok = np.isfinite(tau)
            a = np.mean(np.log(tau[ok]) - row["b"] * xs[ok])   # drawn through the crossed runs' centre
            ax.plot(Ns, np.exp(a + row["b"] * x), color=c,
                    label=f"{size} ({fits[size]['params'] / 1e6:.2f}M): b = {row['b']:.2f}")
        else:
            ax.plot([], [], color=c, label=f"{size}: no slope yet")
    lo = min((r["meta"]["N"] for rs in rows_by.values() for r in rs), default=30)
    ref = np.array([lo, 2 * lo])
    ax.plot(ref, 1000 * ref / lo, "k:", label="slope b = 1 (the field)")
    ax.set(xscale="log", yscale="log", xlabel="N (training images)", ylabel="τ_mem at memorization 0.1 [steps]")
    ax.legend(fontsize=7)
    fig.text(0.01, 0.005, "hollow: not reached by the last checkpoint (drawn there: a lower bound)", fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
