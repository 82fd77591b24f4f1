"""plot_disjoint_pairs draws a planted disjoint-pairs summary as given: per N one column, the floor, the disjoint
pairs and the ceiling per σ at the last step (an undefined mean is a gap, never a zero), and the pairs' agreement
at σ nearest 1 over the steps."""
import numpy as np

from scoreprobe.viz.disjoint import plot_disjoint_pairs


def _summary():
    """Two N, two steps, three σ; every number planted and distinct."""
    sig, steps = [0.3, 1.2, 5.0], [100, 900]
    def one(n):
        k = n / 1000
        return {"sigma": sig, "steps": steps,
                "floor": {"cosine": [[0.1 + k, 0.05, 0.15], [None, None, None], [0.3 + k, 0.2, 0.4]]},
                "disjoint": {str(s): {"cosine": [[0.5 + k + s / 1e4, None, None], [0.6 + k + s / 1e4, 0.5, 0.7],
                                                 [0.7 + k + s / 1e4, 0.6, 0.8]],
                                      "sample_same": [0.2 + s / 1e4, 0.1, 0.3]} for s in steps},
                "same_data": {str(s): {"seed pair": {"cosine": [[0.9, None, None]] * 3}} for s in steps},
                "clocks": {"a": {"steps": steps, "rule_acc": [0.0, 0.9]}}}
    return {"pairs": {"by_n": {"64": one(64), "128": one(128)}, "ceiling": {"cosine": [1.0, 0.99, 0.98]}}}


def _line(ax, label):
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
    return np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)


def test_the_planted_summary_is_drawn_as_given():
    s = _summary()
    fig = plot_disjoint_pairs(s)
    axes = np.array(fig.axes).reshape(2, 2)
    for col, (n, ps) in enumerate(s["pairs"]["by_n"].items()):
        top, bot = axes[:, col]
        assert top.get_title().startswith(f"N = {n} per member, step 900")
        x, y = _line(top, "floor: memorizers of the two sets")
        np.testing.assert_array_equal(x, ps["sigma"])
        np.testing.assert_array_equal(y, [ps["floor"]["cosine"][0][0], np.nan, ps["floor"]["cosine"][2][0]])
        _, y = _line(top, "network pairs, disjoint data")
        np.testing.assert_array_equal(y, [v[0] for v in ps["disjoint"]["900"]["cosine"]])
        _, y = _line(top, "ceiling: rule oracle with itself")
        np.testing.assert_array_equal(y, s["pairs"]["ceiling"]["cosine"])
        x, y = _line(bot, "disjoint pairs: cosine at σ = 1.2")                # the σ nearest 1
        np.testing.assert_array_equal(x, [101, 901])
        np.testing.assert_array_equal(y, [ps["disjoint"][str(v)]["cosine"][1][0] for v in (100, 900)])
        _, y = _line(bot, "disjoint pairs: same sample")
        np.testing.assert_array_equal(y, [ps["disjoint"][str(v)]["sample_same"][0] for v in (100, 900)])
