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


def test_clocks_prints_the_stores_reason_for_a_closed_window(tmp_path, capsys):
    main(["clocks", "--n-samples", "24", "--steps", "2876", "--n-steps", "4", "--out", str(tmp_path / "c.zarr")])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("innovation window"))
    assert re.fullmatch(r"innovation window: closed: rule accuracy never (reliably exceeds|reaches) 0\.9 "
                        r"\(peak [0-9.]+\)", line), line


def test_auto_steps_keep_the_checkpoints_a_store_already_holds():
    """`clocks RUN` after an extension dropped a stored step (177) from its table: the auto choice had moved."""
    from types import SimpleNamespace

    from scoreprobe.cli.common import choose_steps, with_stored
    series = SimpleNamespace(steps=[0, 100, 177, 300, 500, 800, 1300, 2100, 3400, 5500])
    auto = choose_steps("auto", series)
    assert 177 not in auto
    assert with_stored(auto, "auto", series, {177, 99999}) == sorted(set(auto) | {177})   # 99999: not a checkpoint
    assert with_stored([100], "100", series, {177}) == [100]                              # an explicit choice stays


@pytest.mark.slow
def test_clocks_auto_over_a_store_lists_its_stored_steps(tmp_path, capsys):
    out = str(tmp_path / "c.zarr")
    main(["clocks", "--n-samples", "8", "--steps", "500", "--n-steps", "2", "--out", out])
    capsys.readouterr()
    main(["clocks", "--n-samples", "8", "--n-steps", "2", "--out", out])
    rows = [ln.split()[0] for ln in capsys.readouterr().out.splitlines() if ln.strip()[:1].isdigit()]
    assert "500" in rows and "36000" in rows, rows
