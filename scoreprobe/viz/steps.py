"""Training-step axes (log or symlog): a few round, plainly labelled ticks whose labels never overlap."""
import numpy as np
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath
from matplotlib.ticker import FuncFormatter, Locator, MaxNLocator, NullFormatter

_TEXT = TextToPath()


def step_label(x, pos=None):
    """Compact plain label of a step: 0, 500, 2k, 10k, 1.5M (no powers of ten)."""
    x = float(x)
    if abs(x) >= 1e6:
        return f"{x / 1e6:g}M"
    if abs(x) >= 1e3:
        return f"{x / 1e3:g}k"
    return f"{x:.0f}"


def _decade_ticks(lo, hi, mantissas, every):
    """m·10^k for m in `mantissas`, every `every`-th decade k, inside [lo, hi] (lo > 0): (n,) ascending."""
    k0, k1 = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    ticks = [m * 10.0 ** k for k in range(k0, k1 + 1) if k % every == 0 for m in mantissas]
    return [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]


def _tick_sets(lo, hi):
    """Candidate tick sets on [lo, hi] (lo > 0), densest first: 1-2-5, 1-3, decades, every n-th decade."""
    n_dec = max(1, int(np.ceil(np.log10(hi / lo))) + 1)
    for mantissas in ((1, 2, 5), (1, 3)):
        yield _decade_ticks(lo, hi, mantissas, 1)
    for every in range(1, n_dec + 1):
        yield _decade_ticks(lo, hi, (1,), every)


class StepLocator(Locator):
    """Major ticks of a log / symlog training-step axis: 0 when in view, then the densest of 1-2-5·10^k,
    1-3·10^k, decades or every n-th decade (above symlog's linear part) whose labels fit side by side
    at the axis' current size; a few round integer ticks when no decade boundary is in view."""

    def __call__(self):
        return self.tick_values(*self.axis.get_view_interval())

    def tick_values(self, vmin, vmax):
        lo, hi = sorted((float(vmin), float(vmax)))
        transform = self.axis.get_transform() if self.axis is not None else None
        floor = max(lo, float(getattr(transform, "linthresh", 1.0)), 1.0)      # symlog: above its linear part
        zero = [0.0] if lo <= 0 <= hi else []
        best = []
        if hi > floor:
            for ticks in _tick_sets(floor, hi):
                best = ticks
                if self._fit(ticks) == ticks:
                    break
        if len(best) < 2:   # no two decade ticks in view: a few round integers
            best = [float(t) for t in MaxNLocator(nbins=3, integer=True).tick_values(floor, hi) if floor <= t <= hi]
        return np.array(self._fit(zero + best))

    def _fit(self, ticks):
        """Ticks (ascending) kept left to right while each label clears the last kept one."""
        if not ticks or self.axis is None:
            return list(ticks)
        px = self.axis.axes.get_xaxis_transform().transform(np.column_stack([ticks, np.zeros(len(ticks))]))[:, 0]
        size = self.axis.get_major_ticks(1)[0].label1.get_fontsize()
        scale = self.axis.axes.figure.dpi / 72
        half = [_TEXT.get_text_width_height_descent(step_label(t), FontProperties(size=size), ismath=False)[0]
                * scale / 2 for t in ticks]                                     # half label widths, px
        gap = 0.6 * size * scale
        kept = [0]
        for i in range(1, len(ticks)):
            if px[i] - px[kept[-1]] >= half[i] + half[kept[-1]] + gap:
                kept.append(i)
        return [ticks[i] for i in kept]


def step_ticks(ax):
    """Label the (log or symlog) x axis of `ax` as training steps: `StepLocator` major ticks with
    compact plain labels, minor ticks unlabelled."""
    ax.xaxis.set_major_locator(StepLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(step_label))
    ax.xaxis.set_minor_formatter(NullFormatter())
