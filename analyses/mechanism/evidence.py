"""Which study is the evidence for the mechanism's claims: the 3-model study (analyses/mechanism_seeds: three
training seeds per series, trained models and units crossed, Holm over its 13 claims), not this one-model study
(one trained model per series, intervals over its units only). This module puts the 3-model verdict of each claim
beside the point reading this study's numbers would give, so that a one-model point reading is never read as a
verdict: where the two differ, the 3-model word stands.

The one-model reading of a clock claim is the fitted half-change of the same quantity over the model's τ at the
paper's threshold (rule accuracy 0.9, memorized share 0.1): "before" a clock below 1, "after" above 1, "near"
within a factor 2 — a point, with no interval over trained models. Claims read at one step (a mean) have no
one-model counterpart here ("—").
"""
import json
from pathlib import Path

from scoreprobe.reports.holm_claims import beside_table
from scoreprobe.stats.claim_tests import SAYS, point_reading

# the 3-model study's quantity -> this study's half-change quantity of the same curve
ONE_MODEL = {"violating basin": "violating basin share (all planes, σ_start 1.0)",
             "held-out basin": "heldout basin share (all planes, σ_start 1.0)",
             "training basin": "training basin share (all planes, σ_start 1.0)",
             "t − h basin (symmetric planes)": "training − held-out basin (symmetric planes)",
             "held-out captured (σ 1)": "held-out captured (σ 1)",
             "DSM gap, σ in [0.2, 2.0]": "DSM paired gap, σ in [0.2, 2.0]"}


def one_model_reading(report, claim):
    """(text, agrees) of this study's point reading of a 3-model `claim` row; agrees: the point says what the
    claim says (None where there is no one-model counterpart or no number)."""
    test = claim["test"]
    q = ONE_MODEL.get(claim["quantity"])
    if test[0] not in SAYS or q is None or claim["series"] not in report["re_report"]["series"]:
        return "—", None
    step = report["re_report"]["series"][claim["series"]]["half_change"][q]["step"]
    return point_reading(test, step, report["series"][claim["series"]]["taus"].get(test[1]))


def evidence_lines(report, seeds_json):
    """The section that names the evidence: every 3-model claim with its verdict beside this study's point
    reading, and the claims where the point says more than the verdict. [] when `seeds_json` is absent."""
    path = Path(seeds_json)
    if not path.is_file():
        return []
    claims = json.loads(path.read_text())["claims"]   # the statistic worded by the 3-model study (its json)
    table, more = beside_table(claims, lambda c: one_model_reading(report, c),
                               ["#", "series", "claim", "3 models: value [95% CI]", "Holm p", "verdict (3 models)",
                                "this one model, point only"])
    lines = ["## The evidence for the claims: the 3-model study", "",
             f"The claims are decided in `{path.name[:-5]}.md` (three trained models per series, models and units "
             "crossed, Holm over its claims); this study measured one trained model per series, so its readings "
             "below are point estimates of one model, never a verdict. Beside each claim, what this study's point "
             "would say (its fitted half-change over its τ at the paper's threshold).", "", *table]
    if more:
        lines += ["", "Where one model's point says what the claim says but the 3-model study does not decide it, the "
                  "3-model word stands: claims " + "; ".join(more) + "."]
    return lines + [""]
