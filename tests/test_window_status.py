"""stats/taus.window_status and tau_summary()["window_status"]: why a window is closed, on hand-built curves."""
import numpy as np
import pytest

from scoreprobe.stats.taus import tau_summary, window_status
from tests.test_taus import STEPS, curves, logistic

CASES = {   # name: (rule_acc, mem_ratio, expected status)
    "open": (logistic(STEPS, 100, 3), logistic(STEPS, 5000, 3), "open"),
    "mem never reached": (logistic(STEPS, 100, 3), np.zeros(len(STEPS)), "open"),
    "mem first": (logistic(STEPS, 3000, 3), logistic(STEPS, 300, 3), "closed: tau_rule >= tau_mem"),
    "rule never": (0.44 * logistic(STEPS, 100, 3), logistic(STEPS, 300, 3),
                   "closed: rule accuracy never reaches 0.9 (peak 0.44)"),
    "both never": (np.full(len(STEPS), 0.8999), np.zeros(len(STEPS)),
                   "closed: rule accuracy never reaches 0.9 (peak 0.899)"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_window_status_names_the_reason(name):
    rule, mem, expected = CASES[name]
    ds = curves(STEPS, rule, mem)
    t = tau_summary(ds, n_boot=0, warn=False)
    assert t["window_status"] == expected == window_status(ds) == window_status(ds, tau=t)
    assert (expected == "open") == t["window_open"]
    if name == "mem never reached":
        assert t["window_hi_censored"]


def test_threshold_is_in_the_text():
    ds = curves(STEPS, 0.7 * logistic(STEPS, 100, 3), logistic(STEPS, 300, 3))
    assert window_status(ds, rule_threshold=0.75) == "closed: rule accuracy never reaches 0.75 (peak 0.7)"
    assert tau_summary(ds, rule_threshold=0.6, n_boot=0, warn=False)["window_status"] == "closed: tau_rule >= tau_mem"
