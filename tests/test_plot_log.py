"""plot-log on logs that are long, odd or hostile (issue 33): what `load_log` keeps, skips and counts,
and `thin` against brute force. The refusals themselves are in tests/abuse_report.py."""
import json
import warnings

import numpy as np
import pytest

from scoreprobe.errors import ScoreprobeWarning
from scoreprobe.viz.trainlog import load_log, plain_text, plot_train_log, thin


def test_thin_is_the_mean_over_log_spaced_bins():
    rng = np.random.default_rng(0)
    steps = np.unique(rng.integers(0, 10**6, 5000))
    loss = rng.random(len(steps))
    loss[::7] = np.nan
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(thin(steps, loss, n=len(steps)), (steps, loss)))
    s, v = thin(steps, loss, n=50)
    edges = np.geomspace(max(steps[0], 1), steps[-1] + 1, 51)
    want_s, want_v = [], []
    for k in range(50):   # brute force: every record whose step falls in [edges[k], edges[k+1]) (the first bin takes step 0)
        inside = (steps < edges[k + 1]) & ((steps >= edges[k]) | (k == 0))
        if inside.any():
            want_s.append(steps[inside].mean())
            fin = loss[inside][np.isfinite(loss[inside])]
            want_v.append(fin.mean() if len(fin) else np.nan)
    np.testing.assert_allclose(s, want_s)
    np.testing.assert_allclose(v, want_v)


def test_odd_lines_are_skipped_and_counted_and_nonfinite_losses_are_gaps(tmp_path):
    lines = ['{"step": 8, "loss": 0.5, "loss_by_sigma": {"s$a$": 0.25, "b": null}}', '{"step": 4, "lo',
             '{"step": 12, "loss": NaN}', "[" * 50000 + "]" * 50000, '{"event": "resumed"}', "",
             '{"step": 4, "loss": Infinity}', '{"step": 16, "loss": 0.25, "loss_by_sigma": {"s$a$": 0.5}}']
    (tmp_path / "train_log.jsonl").write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log = load_log(tmp_path)
    said = [str(w.message) for w in caught if issubclass(w.category, ScoreprobeWarning)]
    assert any("3 of 8 lines are not training-log records" in m for m in said), said
    assert any("2 of 4 records have a non-finite loss" in m for m in said), said
    assert log["step"].tolist() == [4, 8, 12, 16]
    np.testing.assert_array_equal(log["loss"], [np.inf, 0.5, np.nan, 0.25])
    assert list(log["buckets"]) == ["s$a$", "b"]
    np.testing.assert_array_equal(log["buckets"]["s$a$"], [np.nan, 0.25, np.nan, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = plot_train_log(tmp_path)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert plain_text("s$a$") in labels and plain_text("s$a$") == r"s\$a\$"
    fig.savefig(tmp_path / "log.png")          # no mathtext parsed from the data: it draws
    assert (tmp_path / "log.png").stat().st_size > 0


def test_a_wrong_record_names_its_line(tmp_path):
    from scoreprobe.errors import DataError
    (tmp_path / "train_log.jsonl").write_text('{"step": 4, "loss": 0.5}\n{"step": 8, "loss": -1}\n')
    with pytest.raises(DataError, match=r"line 2: loss must be a number >= 0"):
        load_log(tmp_path)
    (tmp_path / "train_log.jsonl").write_text(json.dumps({"step": 4, "loss": 0.1, "loss_by_sigma": "abc"}) + "\n")
    with pytest.raises(DataError, match=r"line 1: loss_by_sigma must be an object"):
        load_log(tmp_path)
