"""Circuits figure: patching effect per site (rows) and checkpoint (columns), τ_rule and τ_mem marked."""
import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.viz.common import new_figure


def _top_sites(da, n):
    """The n sites of largest effect at any step (in site order of the Dataset)."""
    peak = np.nan_to_num(np.abs(da.values), nan=0.0).max(axis=0)                # (site,)
    keep = np.sort(np.argsort(-peak, kind="stable")[:n])
    return keep


def plot_circuits(ds, kinds=("rule", "copy"), n_sites=16, taus=None):
    """Heat maps (site × step) of `{kind}_effect` averaged over σ, one panel per kind.

    ds: `circuits` over a series (dim `step`). taus: optional {"tau_rule": step, "tau_mem": step},
    drawn as vertical lines. Rows: the n_sites sites of largest |effect| at any step.
    Step 0 (and any checkpoint without a contrast) is left out. Returns the Figure."""
    if "step" not in ds.dims:
        raise ConfigError("plot_circuits needs circuits over several checkpoints (a `step` dimension)")
    kinds = [k for k in kinds if f"{k}_effect" in ds]
    fig = new_figure((5.2 * len(kinds), 0.28 * n_sites + 2.0))
    for i, kind in enumerate(kinds):
        ax = fig.add_subplot(1, len(kinds), i + 1)
        da = ds[f"{kind}_effect"].mean("sigma").transpose("step", "site")
        da = da.isel(step=np.isfinite(da.values).any(1) & (da.step.values > 0))   # log axis; no contrast at init
        if da.sizes["step"] == 0:
            raise ConfigError(f"no checkpoint after step 0 has a {kind} contrast to plot")
        steps = da.step.values.astype(float)
        mids = np.sqrt(steps[:-1] * steps[1:])
        edges = np.concatenate([[steps[0] ** 2 / mids[0] if len(mids) else steps[0] / 1.2], mids,
                                [steps[-1] ** 2 / mids[-1] if len(mids) else steps[-1] * 1.2]])
        keep = _top_sites(da, n_sites)
        vals = da.values[:, keep].T                                             # (site, step)
        mesh = ax.pcolormesh(edges, np.arange(len(keep) + 1), vals, cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_xscale("log")
        ax.set_xlim(edges[0], edges[-1])
        ax.set_yticks(np.arange(len(keep)) + 0.5, [str(s) for s in ds.site.values[keep]], fontsize=6)
        ax.invert_yaxis()
        for name, style in (("tau_rule", "--"), ("tau_mem", ":")):
            if taus and taus.get(name):
                ax.axvline(taus[name], color="k", ls=style, lw=1, label=name.replace("tau_", "τ_"))
        ax.set_xlabel("training step")
        ax.set_title(f"{kind} pairs: patching effect (mean over σ)", fontsize=9)
        if taus:
            ax.legend(fontsize=7, loc="lower right")
        fig.colorbar(mesh, ax=ax, fraction=0.04)
    return fig
