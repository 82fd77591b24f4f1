"""The report's window line says when more samples would decide (issue 78 item 5): the shipped series' window read
"closed" at 200 samples and 4 checkpoints although the highest rule accuracy's interval reached 0.9."""
import numpy as np
import xarray as xr

from scoreprobe.reports.payload import clocks_payload
from scoreprobe.reports.render import _clock_table
from scoreprobe.stats.taus import tau_summary


def _clocks(peak, n=200):
    rule = np.array([0.1, 0.5, peak, peak - 0.05])
    ds = xr.Dataset({"rule_acc": ("step", rule), "novel_valid": ("step", rule), "mem_ratio": ("step", np.zeros(4)),
                     "state": (("step", "sample"), np.zeros((4, n), np.int8))}, coords={"step": [100, 200, 400, 800]})
    ds.attrs.update(tau_summary(ds[["rule_acc", "mem_ratio"]], n_boot=0, warn=False))
    return ds


def test_a_closed_window_whose_peak_interval_reaches_the_threshold_is_said_undecided():
    page = str(_clock_table(clocks_payload(_clocks(0.88))))
    assert "closed: rule accuracy never reaches 0.9 (peak 0.88)" in page
    assert "not decided at this budget" in page and "over 200 samples that reaches 0.9" in page
    assert "more samples" in page and "4 checkpoints" in page
    assert "not decided" not in str(_clock_table(clocks_payload(_clocks(0.6))))        # far below: closed is closed
    assert "not decided" not in str(_clock_table(clocks_payload(_clocks(0.88, n=5000))))   # [0.871, 0.889]
