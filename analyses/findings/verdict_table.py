"""A page of claims judged by the verdict words (docs/findings.md; analyses/findings): each claim declared with
the region its effect must lie in and a reader of the study that measures it; the table (claim | the paper's
number | region | ours at the paper's threshold | ours over the range | verdict | study), one section per claim,
and the short table a README carries between two markers.

The verdict words come from `scoreprobe.stats.verdict.verdict`, the paper's own threshold read first
(docs/definitions.md, "Censored runs and verdict words"), so the words cannot drift from the numbers."""
import math
from dataclasses import dataclass

from scoreprobe.stats.claim_readings import readable_range
from scoreprobe.stats.verdict import verdict

README_START, README_END = "<!-- findings:start (python analyses/findings) -->", "<!-- findings:end -->"


@dataclass(frozen=True)
class Claim:
    key: str
    paper: str            # the paper's words
    paper_number: str     # the paper's number, as it gives it
    region: tuple         # (lo, hi) of the effect the claim asserts
    region_text: str
    effect: str           # what is measured, in words
    study: str            # the study and the command that regenerates it
    read: object          # read(results folder) -> CurveReading or None (study not shipped)
    here: tuple = ()      # work done elsewhere: (quantity, its value there, our scope) -> "b > 1 here (scope)"


def word_of(c, v):
    """The verdict's word, or, for a claim about work done elsewhere (`c.here`), what our runs show at their own
    scope: "b > 1 here (0.51M DiT, N 30–240, this recipe)", never "contradicted" against another setup."""
    if not c.here:
        return v.word
    q, ref, scope = c.here
    p = v.paper
    rel = {"supported": "≈", "contradicted": ">" if p.lower > v.region[1] else "<"}.get(v.word)
    return f"{q} {rel} {ref} here ({scope})" if rel else f"{v.word} here ({scope})"


def judged(claim, results):
    """(CurveReading, Verdict) of a claim, or (None, None) when its study's results are not shipped."""
    r = claim.read(results)
    if r is None:
        return None, None
    v = verdict(r.thresholds, r.estimate, r.lower, r.upper, region=claim.region, paper_threshold=r.paper_threshold,
                censored=r.censored, falling=r.falling)
    return r, v


def _num(x):
    if not math.isfinite(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.3g}"


def at_paper_text(r):
    """'3.1 [2.5, 3.8] at 0.9', a censored bound '> 8.04 at 0.9 (censored: a bound)', or why it is not read."""
    e, lo, hi, cens = r.at_paper()
    t = f"{r.paper_threshold:g}" if len(r.thresholds) > 1 else "one reading"
    if cens and (math.isfinite(lo) or math.isfinite(hi)):
        side = f"> {_num(lo)}" if math.isfinite(lo) and not math.isfinite(hi) else f"< {_num(hi)}"
        return f"{side} at {t} (censored: a bound)"
    if not all(math.isfinite(x) for x in (e, lo, hi)):
        return f"not read at {t} (censored, no bound)"
    return f"{_num(e)} [{_num(lo)}, {_num(hi)}] at {t}"


def table(rows):
    """Markdown lines of the claims table; rows: [(Claim, CurveReading or None, Verdict or None)]."""
    lines = ["| claim (the paper's words) | the paper | region read | ours at the paper's threshold | ours over the "
             "range | verdict | study |", "|---|---|---|---|---|---|---|"]
    for c, r, v in rows:
        if r is None:
            lines.append(f"| {c.paper} | {c.paper_number} | {c.region_text} | not shipped | — | — | {c.study} |")
            continue
        spread = readable_range(r) if len(r.thresholds) > 1 else "—"
        lines.append(f"| {c.paper} | {c.paper_number} | {c.region_text} | {at_paper_text(r)} | {spread} "
                     f"| **{word_of(c, v)}** | {c.study} |")
    return lines


def section(c, r, v, beside=None):
    """'## claim': what is measured, the verdict sentence, the reading's notes and `beside` (the literature)."""
    lines = [f"## {c.paper}", "", f"Measured: {c.effect}. The paper: {c.paper_number}; read as the region "
             f"{c.region_text}.", ""]
    if r is None:
        return lines + [f"Not shipped: {c.study} has no results here.", ""]
    said = v.sentence('{:.3g}') if len(r.thresholds) > 1 else f"{v.word}: {at_paper_text(r)}"
    if c.here:
        said = f"{word_of(c, v)} — {said}"
    lines += [f"- **{said}**."] + [f"- {n}" for n in r.notes]
    return lines + ([f"- Beside ours: {beside}"] if beside else []) + [""]


def summary(rows):
    """The README's short table: claim | verdict | ours at the paper's threshold (between README_START/END)."""
    lines = [README_START, "| claim (the paper's words) | verdict | ours at the paper's threshold |", "|---|---|---|"]
    lines += [f"| {c.paper} | {'not shipped' if r is None else f'**{word_of(c, v)}**'} | "
              f"{'—' if r is None else at_paper_text(r)} |" for c, r, v in rows]
    return "\n".join(lines + [README_END])


def with_summary(readme, block):
    """`readme` with the text between the markers replaced by `block`; unchanged without markers."""
    i, j = readme.find(README_START), readme.find(README_END)
    if i < 0 or j < i:
        return readme
    return readme[:i] + block + readme[j + len(README_END):]
