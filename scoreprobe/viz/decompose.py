"""Decomposition figures: which oracle explains the network, over step × σ (heat maps with τ marks)."""
import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.viz.common import new_figure

ORACLE_COLORS = {"memorizer": "#ff9f1c", "rule": "#2ca02c", "gaussian": "#d62728", "rule_gaussian": "#8c564b",
                 "local": "#1f77b4", "local_equivariant": "#9467bd", "local_boundary": "#17becf"}
# cells without a call (never an oracle's colour): undecided, indistinguishable, shrinkage, undefined (r² NaN)
LABEL_COLORS = {"undecided": "#d9d9d9", "indistinguishable": "#969696", "shrinkage": "#f7e1d7", "undefined": "#000000",
                "none": "#ffffff", "linear": "#c6dbef"}


def _tau_marks(ax, taus, steps):
    """Vertical lines at τ values (dict name -> step) on an axis whose x is the step index."""
    for name, tau in (taus or {}).items():
        if tau is None or not np.isfinite(tau) or tau <= 0:
            continue
        pos = np.interp(np.log(tau + 1), np.log(np.asarray(steps, float) + 1), np.arange(len(steps)))
        ax.axvline(pos, color="white", lw=1.4, ls="--" if "mem" in name else ":")
        ax.text(pos, 0.97, f" {name}", color="white", fontsize=7, va="top", ha="left",
                transform=ax.get_xaxis_transform())


def plot_decompose(ds, split="heldout", var="r2", taus=None, fig=None, level=0.95):
    """Heat maps over (step, σ) of `var` for each oracle (one panel each) and the calls (`best_oracle`:
    an oracle's colour only where called; level: 1 − its family's error rate).

    Parameters
    ----------
    ds : Dataset from `decompose` over a series (dims step, sigma, split, oracle).
    split : which points ("train", "heldout", "random_valid").
    var : "r2" (oracle alone), "weight" or "weight_simplex".
    taus : {"τ_rule": step, "τ_mem": step}, drawn as vertical lines.

    Returns the Figure.
    """
    if "oracle" not in ds.dims or var not in ds or "step" not in ds.dims:
        raise ConfigError(f"plot_decompose needs a Dataset from decompose() over a series with {var!r}")
    if split not in set(ds.split.values):
        raise ConfigError(f"split {split!r} is not in the data; available: {list(ds.split.values)}")
    from matplotlib.colors import ListedColormap
    d = ds.sel(split=split)
    names = list(d.oracle.values)
    fig = fig or new_figure((3.0 * (len(names) + 1), 3.4))
    axes = fig.subplots(1, len(names) + 1, sharey=True)
    steps, sig = d.step.values, d.sigma.values
    lo, hi = (0.0, 1.0) if var != "weight" else (-0.5, 1.5)
    for ax, name in zip(axes, names):
        im = ax.imshow(d[var].sel(oracle=name).transpose("sigma", "step").values, origin="lower", aspect="auto",
                       vmin=lo, vmax=hi, cmap="viridis", interpolation="nearest")
        ax.set_title(f"{name}: {var}", fontsize=9)
        _tau_marks(ax, taus, steps)
    fig.colorbar(im, ax=axes[len(names) - 1], shrink=0.8)
    from scoreprobe.stats.decompose_calls import LABELS, best_oracle
    labels = best_oracle(d, level=level).transpose("sigma", "step").values
    order = [*names, *LABELS]
    codes = np.vectorize(order.index, otypes=[int])(labels)
    colors = {**{n: ORACLE_COLORS.get(n.rpartition("_p")[0], "grey") for n in names}, **ORACLE_COLORS, **LABEL_COLORS}
    cmap = ListedColormap([colors.get(n, "grey") for n in order])
    axes[-1].imshow(codes, origin="lower", aspect="auto", cmap=cmap, vmin=-0.5, vmax=len(order) - 0.5,
                    interpolation="nearest")
    axes[-1].set_title(f"call by r² (Holm at {1 - level:.0%}; grey: no call)", fontsize=9)
    from matplotlib.lines import Line2D
    shown = [n for n in order if n in names or (labels == n).any()]
    handles = [Line2D([], [], ls="", marker="s", color=colors.get(n, "grey"), label=n) for n in shown]
    # right of the call map, outside every panel (never over a cell): constrained layout makes room
    axes[-1].legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.03, 1.0), borderaxespad=0,
                    title="call", title_fontsize=7)
    _tau_marks(axes[-1], taus, steps)
    ticks = np.unique(np.linspace(0, len(steps) - 1, min(6, len(steps))).round().astype(int))
    for ax in axes:
        ax.set_xticks(ticks, [str(int(steps[i])) for i in ticks], fontsize=7, rotation=45)
        ax.set_xlabel("training step")
    yt = np.arange(len(sig))
    axes[0].set_yticks(yt, [f"{s:.2g}" for s in sig], fontsize=7)
    axes[0].set_ylabel(f"σ ({split} points)")
    return fig


def plot_calls_map(m):
    """Held-out calls of `scoreprobe.stats.decompose_models.calls_over_models` over (step, σ): one colour per label.
    -> Figure (pyplot's, Agg)."""
    import matplotlib

    from scoreprobe.stats.decompose_models import NO_CALL, labels
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    lab = labels(m, "heldout")
    names = sorted(set(lab.ravel()), key=lambda n: (n in NO_CALL, n))
    idx = np.vectorize(names.index)(lab).T.astype(float)                         # (σ, step)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    cmap = matplotlib.colormaps["tab10"].resampled(max(len(names), 2))
    ax.imshow(idx, aspect="auto", origin="lower", cmap=cmap, vmin=-0.5, vmax=len(names) - 0.5)
    ax.set_xticks(range(len(m["steps"])), [str(s) for s in m["steps"]], rotation=60, fontsize=7)
    ax.set_yticks(range(len(m["sigma"])), [f"{x:g}" for x in m["sigma"]], fontsize=7)
    ax.set_xlabel("step"), ax.set_ylabel("σ")
    handles = [matplotlib.patches.Patch(color=cmap(q), label=n) for q, n in enumerate(names)]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title(f"{m.get('series', 'open')} series: held-out calls over {len(m['models'])} models "
                 "(two-level bootstrap)", fontsize=9)
    fig.tight_layout()
    return fig
