"""Two measurements of the same runs (analyses/sampler_scaling: the Heun PF-ODE and a stochastic sampler on the
same checkpoints), paired per run: the rows by N and the per-run ratio of τ between the two measurements."""
import numpy as np

from scoreprobe.stats.curves import curves_of


def by_N(rows):
    """{N: rows sorted by seed} in N order (rows with meta "N")."""
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
