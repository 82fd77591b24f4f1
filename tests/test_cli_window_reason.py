"""`scoreprobe clocks` names why the window is closed as the store does ("rule accuracy never reaches 0.9 (peak
0.46)"), not a generic sentence (issue 78 item 5)."""
import re

import numpy as np
import pytest
import xarray as xr

from scoreprobe.cli import main
from scoreprobe.cli.curves import _clock_summary
from scoreprobe.stats.taus import tau_summary


def test_the_printed_window_line_is_the_stores_reason():
    ds = xr.Dataset({"rule_acc": ("step", [0.1, 0.3, 0.46, 0.4]), "mem_ratio": ("step", [0.0] * 4)},
                    coords={"step": [100, 200, 400, 800]})
    lines = list(_clock_summary(tau_summary(ds, n_boot=0, warn=False)))
    assert lines[-1] == "innovation window: closed: rule accuracy never reaches 0.9 (peak 0.46)"


@pytest.mark.slow
def test_clocks_prints_the_stores_reason_for_a_closed_window(tmp_path, capsys):
    main(["clocks", "--n-samples", "24", "--steps", "2876", "--n-steps", "4", "--out", str(tmp_path / "c.zarr")])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("innovation window"))
    assert re.fullmatch(r"innovation window: closed: rule accuracy never (reliably exceeds|reaches) 0\.9 "
                        r"\(peak [0-9.]+\)", line), line
