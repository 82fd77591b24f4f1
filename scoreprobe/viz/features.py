"""Each chosen SAE latent's top-activating inputs, drawn as the binary images they are.

    tops = sp.top_activating(sae, cache, k=6, latents=[3, 17], site=site)
    fig = plot_top_activating(tops, clean, noisy=x, scores=sp.sae_scores(sae, cache, truth, site=site))

One band per latent: a row of its top-k clean items (1 = black), and with `noisy` a row of the noisy inputs x
below it (grey scale, dark = +); each panel is labelled with the latent's activation. A band's title names the
latent, how many rows it fires on, and with `scores` its best-matching ground-truth feature and that F1 (the
feature where its F1 is highest; "no defined F1" when every feature is constant over the rows; "dead" for a
latent active on no row, whose F1 of 0 names no feature). A rank with no
active row left is an empty panel marked "—".
"""
import math

import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.limits import MAX_PANELS
from scoreprobe.viz.common import new_figure


def plot_top_activating(tops, clean, *, noisy=None, scores=None, image_shape=None):
    """A Figure of each latent's top-activating inputs (module docstring).

    tops : Dataset (latent, rank) from sp.top_activating (its `row` indexes `clean` and `noisy`).
    clean : (n_rows, D) 0/1 the clean item of each row; noisy : optional (n_rows, D) float, the noisy input.
    scores : optional sp.sae_scores Dataset with f1 (latent, feature), for the titles.
    image_shape : (H, W) with H·W = D (default: square)."""
    clean = np.asarray(clean)
    n_lat, k = tops.sizes["latent"], tops.sizes["rank"]
    H, W = _shape(image_shape, clean)
    bands = 2 if noisy is not None else 1
    if n_lat * k * bands > MAX_PANELS:
        raise ConfigError(f"{n_lat * k * bands} panels exceed the limit {MAX_PANELS} (scoreprobe.limits)")
    if int(tops.row.max()) >= len(clean) or (noisy is not None and np.shape(noisy) != clean.shape):
        raise ConfigError("clean (and noisy) must hold a row for every index in tops.row, with one shape")
    fig = new_figure((1.0 * k + 0.4, 1.25 * n_lat * bands + 0.3))
    sub = fig.subfigures(n_lat, 1, squeeze=False)[:, 0]
    for i, lat in enumerate(tops.latent.values):
        sub[i].suptitle(_title(tops, int(lat), scores), fontsize=8)
        axes = sub[i].subplots(bands, k, squeeze=False)
        for r in range(k):
            row, act = int(tops.row.values[i, r]), float(tops.activation.values[i, r])
            _panel(axes[0, r], None if row < 0 else clean[row].reshape(H, W), act, "binary", (0, 1))
            if noisy is not None:
                img = None if row < 0 else np.asarray(noisy)[row].reshape(H, W)
                _panel(axes[1, r], img, None, "gray_r", (-2, 2))
    return fig


def _shape(image_shape, clean):
    if clean.ndim != 2:
        raise ConfigError(f"clean must be (n_rows, D), got shape {clean.shape}")
    D = clean.shape[1]
    if image_shape is None:
        side = math.isqrt(D)
        if side * side != D:
            raise ConfigError(f"D = {D} is not square: pass image_shape=(H, W)")
        return side, side
    H, W = (int(v) for v in image_shape)
    if H * W != D:
        raise ConfigError(f"image_shape {image_shape} holds {H * W} pixels, the rows {D}")
    return H, W


def _panel(ax, img, act, cmap, lims):
    ax.set_xticks([])
    ax.set_yticks([])
    if img is None:
        ax.text(0.5, 0.5, "—", ha="center", va="center", transform=ax.transAxes)
        return
    ax.imshow(img, cmap=cmap, vmin=lims[0], vmax=lims[1], interpolation="nearest")
    if act is not None:
        ax.set_title(f"{act:.2f}", fontsize=7)


def _title(tops, lat, scores):
    n = int(tops.n_active.sel(latent=lat))
    head = f"latent {lat} (active on {n} rows)"
    if n == 0:
        return f"{head}: dead"
    if scores is None or "f1" not in scores:
        return head
    f1 = scores.f1.sel(latent=lat).values.astype(np.float64)
    if np.isnan(f1).all():
        return f"{head}: no defined F1"
    j = int(np.nanargmax(f1))
    return f"{head}: best {scores.feature.values[j]} F1 {f1[j]:.2f}"
