"""Circuits figure: patching effect per site (rows) and checkpoint (columns), one panel per kind and σ (never
averaged over σ: a copy effect changes sign across σ), τ_rule and τ_mem marked; undefined cells left blank."""
import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.viz.common import new_figure


def _top_sites(da, n):
    """The n sites of largest effect at any step (in site order of the Dataset)."""
    peak = np.nan_to_num(np.abs(da.values), nan=0.0).max(axis=0)                # (site,)
    keep = np.sort(np.argsort(-peak, kind="stable")[:n])
    return keep


def _edges(steps):
    mids = np.sqrt(steps[:-1] * steps[1:])
    return np.concatenate([[steps[0] ** 2 / mids[0] if len(mids) else steps[0] / 1.2], mids,
                           [steps[-1] ** 2 / mids[-1] if len(mids) else steps[-1] * 1.2]])


def _panel(fig, ax, ds, da, kind, sigma, n_sites, taus):
    """One heat map (site × step) of `da` (step, site); NaN (undefined: mixed-sign or tiny contrast) blank."""
    steps = da.step.values.astype(float)
    edges = _edges(steps)
    keep = _top_sites(da, n_sites)
    vals = np.ma.masked_invalid(da.values[:, keep].T)                           # (site, step)
    mesh = ax.pcolormesh(edges, np.arange(len(keep) + 1), vals, cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xscale("log")
    ax.set_xlim(edges[0], edges[-1])
    ax.set_yticks(np.arange(len(keep)) + 0.5, [str(s) for s in ds.site.values[keep]], fontsize=6)
    ax.invert_yaxis()
    for name, style in (("tau_rule", "--"), ("tau_mem", ":")):
        if taus and taus.get(name):
            ax.axvline(taus[name], color="k", ls=style, lw=1, label=name.replace("tau_", "τ_"))
    ax.set_xlabel("training step")
    ax.set_title(f"{kind} pairs, σ = {sigma:g} (blank: undefined)", fontsize=9)
    if taus:
        ax.legend(fontsize=7, loc="lower right")
    fig.colorbar(mesh, ax=ax, fraction=0.04)


def plot_circuits(ds, kinds=("rule", "copy"), n_sites=16, taus=None):
    """Heat maps (site × step) of `{kind}_effect`, one panel per kind (rows) and σ (columns).

    ds: `circuits` over a series (dim `step`). taus: optional {"tau_rule": step, "tau_mem": step},
    drawn as vertical lines. Rows: the n_sites sites of largest |effect| at any step at that σ.
    Step 0 (and any checkpoint without a defined effect) is left out. Returns the Figure."""
    if "step" not in ds.dims:
        raise ConfigError("plot_circuits needs circuits over several checkpoints (a `step` dimension)")
    kinds = [k for k in kinds if f"{k}_effect" in ds]
    sigmas = [float(v) for v in ds.sigma.values]
    fig = new_figure((5.2 * len(sigmas), (0.28 * n_sites + 2.0) * len(kinds)))
    drawn = 0
    for i, kind in enumerate(kinds):
        for j, sg in enumerate(sigmas):
            ax = fig.add_subplot(len(kinds), len(sigmas), i * len(sigmas) + j + 1)
            da = ds[f"{kind}_effect"].sel(sigma=sg).transpose("step", "site")
            da = da.isel(step=np.isfinite(da.values).any(1) & (da.step.values > 0))   # log axis; no contrast at init
            if da.sizes["step"] == 0:
                ax.text(0.5, 0.5, f"{kind}, σ = {sg:g}: undefined at every checkpoint", ha="center", va="center",
                        fontsize=8, transform=ax.transAxes)
                ax.set_axis_off()
                continue
            _panel(fig, ax, ds, da, kind, sg, n_sites, taus)
            drawn += 1
    if not drawn:
        raise ConfigError("no checkpoint after step 0 has a defined effect to plot")
    return fig


def plot_effect_maps(res, n_sites=12):
    """Heat maps (site × step) of the pooled effect over several models, mean over models, one panel per pair kind
    and σ, the n_sites largest at the last step; cells undefined in any model blank. `res`: a patching study's JSON over
    models (models, steps, sigmas, sites, per_model[m].effects[kind].curve (step, σ,
    site)). -> Figure."""
    names, steps = list(res["models"]), np.asarray(res["steps"], float)
    fig = new_figure((3.6 * len(res["sigmas"]), 0.25 * n_sites * 2 + 3.0))
    keep_steps = steps > 0
    for r, kind in enumerate(("rule", "copy")):
        curve = np.array([res["per_model"][n]["effects"][kind]["curve"] for n in names], float).mean(0)  # (step, σ, site)
        for i, s in enumerate(res["sigmas"]):
            ax = fig.add_subplot(2, len(res["sigmas"]), r * len(res["sigmas"]) + i + 1)
            v = curve[keep_steps, i, :]
            top = np.sort(np.argsort(-np.nan_to_num(np.abs(v[-1]), nan=-1.0), kind="stable")[:n_sites])
            mesh = ax.pcolormesh(np.arange(keep_steps.sum() + 1), np.arange(len(top) + 1), v[:, top].T, cmap="RdBu_r",
                                 vmin=-1.5, vmax=1.5)
            ax.set_yticks(np.arange(len(top)) + 0.5, [res["sites"][j] for j in top], fontsize=5)
            ax.set_xticks(np.arange(keep_steps.sum())[::4] + 0.5, [f"{x:.0f}" for x in steps[keep_steps][::4]],
                          fontsize=5, rotation=60)
            ax.invert_yaxis()
            ax.set_title(f"{kind} pairs, σ {s:g} (mean over {len(names)} models)", fontsize=7)
            fig.colorbar(mesh, ax=ax, fraction=0.04)
    return fig
