"""The claims of the mechanism study, tested with trained models and units as the units of resampling: each
claim one p-value, Holm over the whole family (family-wise error 0.05), and a plain verdict; the tests and the
verdict words are scoreprobe.stats.claim_tests' (a claim on a half-change against a clock read at every threshold
of that clock, p the largest; "near" a TOST within a factor 2; a claim at one step the crossed mean there)."""
from scoreprobe.stats import claim_tests
from scoreprobe.studies.battery_series import CAPTURED, DSM_GAP

# (series, the claim in words, the quantity, the test): tests "before"/"after"/"near" a clock (half-change /
# τ < 1, > 1, within a factor 2), or ("mean above", reference, step) of a per-step curve
CLAIMS = [
    ("open", "vertices become attractors before the rule: the off-vertex share (local planes) halves before "
     "τ_rule", "off-vertex (local planes)", ("before", "tau_rule")),
    ("open", "violating basins shrink before τ_rule", "violating basin", ("before", "tau_rule")),
    ("open", "training and held-out basins part around τ_mem: the t − h half-change is within a factor 2 of τ_mem",
     "t − h basin (symmetric planes)", ("near", "tau_mem")),
    ("open", "held-out basins are invaded around τ_mem (within a factor 2)", "held-out basin", ("near", "tau_mem")),
    ("open", "training basins grow after τ_mem", "training basin", ("after", "tau_mem")),
    ("open", "held-out capture at σ 1 lags τ_mem", CAPTURED, ("after", "tau_mem")),
    ("open", "the DSM gap in σ 0.2–2 rises around τ_mem (within a factor 2)", DSM_GAP, ("near", "tau_mem")),
    ("open", "captured held-out restarts at σ 1 started nearer their own item (share of captured > 1/2 at the "
     "last step)", "nearer own, share of captured (σ 1)", ("mean above", 0.5, "last")),
    ("closed", "the model fits its training images before any rule: held-out − training DSM loss in σ 0.2–2 above 0 "
     "at the first grid step (a loss gap: fitting the training set, not copies in samples)", DSM_GAP,
     ("mean above", 0.0, "first grid")),
    ("closed", "t − h basin above 0 at the first grid step", "t − h basin (symmetric planes)",
     ("mean above", 0.0, "first grid")),
    ("closed", "the DSM gap rises around τ_mem (within a factor 2)", DSM_GAP, ("near", "tau_mem")),
    ("closed", "held-out basins are invaded around τ_mem (within a factor 2)", "held-out basin", ("near", "tau_mem")),
    ("closed", "captured held-out restarts at σ 1 started nearer their own item (share > 1/2 at the last step)",
     "nearer own, share of captured (σ 1)", ("mean above", 0.5, "last")),
]
# (claim number, series, what the control shows, quantity, test): the same test on the series that is not the
# claim's, where the claim's reading would not follow; reported beside the claim, outside the Holm family
CONTROLS = [
    (9, "open", "the same gap in the open-window series at its first grid step, before its τ_rule (a series that "
     "does learn the rule)", DSM_GAP, ("mean above", 0.0, "first grid")),
    (9, "open", "the same gap in the open-window series at the claim's step", DSM_GAP, ("mean above", 0.0, "claim")),
]


def evaluate(reports):
    """[claim row]: every claim of CLAIMS whose series is reported, with p, Holm-adjusted p and verdict."""
    return claim_tests.evaluate(reports, CLAIMS)


def evaluate_controls(reports, claims):
    """[control row] of CONTROLS beside their claims (`claims`: evaluate's rows), outside the Holm family."""
    return claim_tests.evaluate_controls(reports, claims, CONTROLS, CLAIMS)
