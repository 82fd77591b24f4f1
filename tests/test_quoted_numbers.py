"""Issue 73 item 9: every τ and window of the shipped series quoted in README.md, checkpoints/README.md and docs/
equals what the current code computes from the shipped files.

clocks.json holds the shipped series' per-checkpoint fractions (1000 samples each) and the τ read from them. The
point estimates are recomputed here from the fractions by the current `sp.tau_summary` (n_boot 0: the CIs need
the per-sample states, which the slow test in test_shipped.py re-measures); each quoted number is then checked
against clocks.json, rounded as quoted."""
import json
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import scoreprobe as sp

ROOT = Path(__file__).resolve().parents[1]
CLOCKS = json.loads((ROOT / "checkpoints" / "parity-default" / "clocks.json").read_text())


def _table_ds(every=1):
    rows = CLOCKS["table"][::every]
    ds = xr.Dataset({c: ("step", [r[c] for r in rows]) for c in ("rule_acc", "mem_ratio", "novel_valid")},
                    coords={"step": [r["step"] for r in rows]})
    ds.attrs["novel_oracle"] = CLOCKS["taus"]["novel_oracle"]
    return ds


@pytest.mark.parametrize("key,every", [("taus", 1), ("taus_every_third", 3)])
def test_clocks_json_point_estimates_are_the_current_codes(key, every):
    now = sp.tau_summary(_table_ds(every), n_boot=0, warn=False)
    for name in ("tau_rule", "tau_novel", "tau_mem", "window_lo", "window_hi", "window_log10_width"):
        assert now[name] == pytest.approx(CLOCKS[key][name], rel=1e-9), name


def _r(v):
    return "not reached" if v is None or not np.isfinite(v) else f"{v:.0f}"


def _ci(t, name):
    lo, hi = t[name + "_ci"]
    return f"[{_r(lo)}, {_r(hi)}]"


@pytest.mark.parametrize("label,key", [("all 24 checkpoints", "taus"), ("every third checkpoint", "taus_every_third")])
def test_the_checkpoints_readme_table_quotes_clocks_json(label, key):
    text = (ROOT / "checkpoints" / "README.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
    t = CLOCKS[key]
    w = t["window_log10_width_ci"]
    want = (f"| {label} | {_r(t['tau_rule'])} {_ci(t, 'tau_rule')} | {_r(t['tau_novel'])} {_ci(t, 'tau_novel')} | "
            f"{_r(t['tau_mem'])} {_ci(t, 'tau_mem')} | {_r(t['window_lo'])}–{_r(t['window_hi'])} | "
            f"{t['window_log10_width']:.2f} [{w[0]:.2f}, {w[1]:.2f}] |")
    assert row == want


def test_readme_and_definitions_quote_the_shipped_taus():
    t, third = CLOCKS["taus"], CLOCKS["taus_every_third"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"τ_rule {_r(t['tau_rule'])}, τ_mem {_r(t['tau_mem'])} (`checkpoints/README.md`)" in readme
    defs = " ".join((ROOT / "docs" / "definitions.md").read_text().split())
    assert (f"reads τ_rule {_r(t['tau_rule'])}, τ_novel {_r(t['tau_novel'])}, τ_mem {_r(t['tau_mem'])} and a "
            f"window of {t['window_log10_width']:.3f} decades") in defs
    quoted = re.search(r"and (\d+) / (\d+) / ([\d ]+) from every third checkpoint", defs).groups()
    assert [int(q.replace(" ", "")) for q in quoted] == [round(third[k]) for k in ("tau_rule", "tau_novel", "tau_mem")]
    assert (f"Heun 32's {_r(t['tau_rule'])} ") in defs and f"against the shipped (Heun 32) {_r(t['tau_rule'])} " in defs
