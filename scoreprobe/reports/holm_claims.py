"""The claims table of a study whose claims are tested one p-value each with Holm over the family
(scoreprobe.stats.claim_tests): per claim its statistic and value with the 95% interval, p, Holm p and the verdict;
the controls beside their claims; then the null and contrary results in plain words."""
from scoreprobe.reports.report_cells import num as _f, p_text as _p, step_text as _s

CENSORED = {"before": "before the first step fitted", "after": "after the last step fitted",
            "too few": "too few steps up to its extreme"}


def claim_statistic(c):
    """(statistic, 'value [95% CI]; range') of a claim row, as the table words them."""
    if "at_paper" in c:
        clock = "τ_rule" if c["test"][1] == "tau_rule" else "τ_mem"
        a = c.get("at_paper")
        head = f"half-change {_s(c['half_change'])} / {clock}"
        if c["censored_models"]:
            return f"half-change / {clock}", f"censored in {len(c['censored_models'])} model(s): " + \
                ", ".join(CENSORED[x] for x in c["censored_models"])
        if a is None or a["censored"]:
            return f"{head} at {a['threshold'] if a else '—'}", f"{clock} not reached in some model"
        rng = f"{_f(c['range'][0], 2)}–{_f(c['range'][1], 2)} over {len(c['readable'])} thresholds"
        return f"{head} at {a['threshold']:g}", f"{_f(a['value'], 2)} [{_f(a['ci'][0], 2)}, {_f(a['ci'][1], 2)}]; {rng}"
    if "value" not in c:
        return f"at step {c.get('step', '—')}", c.get("note", "—")
    per = " / ".join(_f(v) for v in c["per_model"])
    return f"mean at step {c['step']}", f"{_f(c['value'])} [{_f(c['ci'][0])}, {_f(c['ci'][1])}] (models: {per})"


def _interim(n, n_declared):
    """A line when some claims cannot be tested yet: Holm is over the testable ones only, so it will tighten."""
    if n >= n_declared:
        return []
    return ["", f"**Interim:** {n} of the study's {n_declared} claims are testable now (a series needs 2 trained "
            "models); Holm is over these, so every adjusted p grows (and a verdict may change) when the rest are "
            "added."]


def claims_table(report, n_declared):
    """Markdown lines: '## Claims (k; Holm …)', the table of report["claims"] (claim_tests.evaluate's rows, each
    with its `statistic` pair), the controls (controls_lines) and the claims not supported, in words; an interim
    line when fewer than the `n_declared` claims are testable."""
    rows = report["claims"]
    lines = [f"## Claims ({len(rows)}; Holm over all of them, family-wise error 0.05)", "",
             "Tests (scoreprobe.stats.claim_tests): \"before\" / \"after\" a clock = half-change / τ < 1 / > 1, \"near\" = within a "
             "factor 2 (TOST), each at every readable threshold of the clock, p = the largest (a claim holds only "
             "where it holds at every readable threshold); a claim at one step = the crossed mean there, one-sided.",
             *_interim(len(rows), n_declared), "", "| # | series | claim | statistic | value [95% CI] | p | Holm p | verdict |",
             "|---:|---|---|---|---|---:|---:|---|"]
    for i, c in enumerate(rows, 1):
        stat, val = claim_statistic(c)
        lines.append(f"| {i} | {c['series']} | {c['claim']} | {stat} | {val} | {_p(c['p'])} | {_p(c.get('p_holm'))} | "
                     f"**{c['verdict']}** |")
    plain = [f"- {c['series']}: *{c['claim']}* — **{c['verdict']}**{_why(c)}" for c in rows
             if c["verdict"] != "supported"]
    return lines + [""] + controls_lines(report) + ["Null and contrary results, plainly:" if plain else
                                                    "Every claim is supported.", ""] + plain + [""]


def controls_lines(report):
    """Each control beside its claim (claims.CONTROLS: the same test where the claim's reading would not follow;
    one-sided p, outside the Holm family), what it means for the claim, and the memorized share of the samples
    at the claim's step."""
    out, said = [], set()
    for c in report.get("controls", []):
        n = c["for_claim"]
        claim = report["claims"][n - 1]
        if "value" not in c:
            out.append(f"- Control for claim {n}: {c['control']} — {c.get('note', 'not measured')}.")
            continue
        per = " / ".join(_f(v, 4) for v in c["per_model"])
        side = "above 0 as well" if c["p"] < 0.05 else "not resolved above 0"
        out.append(f"- Control for claim {n} ({claim['series']}: {_f(claim['value'], 4)} [{_f(claim['ci'][0], 4)}, "
                   f"{_f(claim['ci'][1], 4)}] at step {claim['step']}, Holm p {_p(claim.get('p_holm'))}): "
                   f"{c['control']}: {_f(c['value'], 4)} [{_f(c['ci'][0], 4)}, {_f(c['ci'][1], 4)}] at step {c['step']} "
                   f"(models: {per}), one-sided p {_p(c['p'])} (a control: outside the Holm family) — {side}.")
        said.add(n)
    for n in sorted(said):
        claim = report["claims"][n - 1]
        hits = [c for c in report["controls"] if c["for_claim"] == n and "value" in c and c["p"] < 0.05]
        if hits:
            where = ", ".join(f"step {c['step']} (p {_p(c['p'])})" for c in hits)
            out.append(f"- So the gap of claim {n} does not tell the {claim['series']} window from the other: the "
                       f"{hits[0]['series']}-window series, which learns the rule, has it too before its τ_rule, at "
                       f"{where}.")
        copies = report.get("copies_at_claim_steps", {}).get(f"{claim['series']}@{claim['step']}")
        if copies:
            out.append(f"- What copying in samples would show at claim {n}'s step {copies['step']}: the memorized share "
                       f"of each {claim['series']} model's samples there (its clocks) is "
                       + " / ".join(_f(v) for v in copies["per_model"]) + ".")
    return out + ([""] if out else [])


def _why(c):
    if c["verdict"] == "not testable":
        return f": {c.get('note', 'no number')}."
    if "at_paper" in c:
        cens = f"; not readable at {len(c['censored'])} thresholds" if c["censored"] else ""
        return f" (ratio {_f(c['range'][0], 2)}–{_f(c['range'][1], 2)} over the readable thresholds{cens})."
    return f" (mean {_f(c.get('value'))} [{_f(c['ci'][0])}, {_f(c['ci'][1])}] at step {c['step']})."


def beside_table(claims, beside, head):
    """The claims of a Holm family (claim_tests.evaluate's rows with their `statistic` pair, e.g. read from another
    study's json) with one more column per claim: beside(claim) -> (text, agrees) (agrees: that reading says what
    the claim says; None: no reading). `head`: the 7 column headers. Then the claims where a reading agrees but the
    verdict is not "supported": the verdict stands."""
    lines = ["| " + " | ".join(head) + " |", "|---:|---|---|---|---:|---|---|"]
    more = []
    for i, c in enumerate(claims, 1):
        text, agrees = beside(c)
        lines.append(f"| {i} | {c['series']} | {c['claim']} | {c['statistic'][1]} | {_p(c.get('p_holm'))} | "
                     f"**{c['verdict']}** | {text} |")
        if agrees and c["verdict"] != "supported":
            more.append(f"{i} (*{c['claim']}*: one model {text.split(': ')[-1]}; 3 models **{c['verdict']}**)")
    return lines, more
