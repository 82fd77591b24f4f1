"""The outside literature placed beside our readings (docs/findings.md), and the capacity-exponent section."""
import math

from analyses.findings.claims import load
from scoreprobe.studies.divergence import never_started

BONNAIRE = ("Bonnaire, Urfin, Biroli & Mézard 2025 (arXiv 2505.17638, NeurIPS 2025): U-Net DDPMs on downsampled "
            "CelebA and a random-features model — τ_mem grows linearly with the training-set size n, τ_gen does not "
            "depend on n, and above a model-dependent n* the model no longer memorizes at any training time.")
FAVERO = ("Favero, Sclocchi & Wyart 2025 (arXiv 2505.16959): image (CIFAR-10, CelebA) and language diffusion models "
          "and a random context-free grammar — memorization time proportional to the dataset size.")
KADKHODAIE = ("Kadkhodaie, Guth, Simoncelli & Mallat 2024 (ICLR 2024, arXiv 2310.02557): denoisers trained on "
              "non-overlapping subsets of face images memorize below ≈ 10³ images and converge to nearly the same "
              "function (same samples from the same noise) above ≈ 10⁴–10⁵: generalization as a function of N.")
KAMB = ("Kamb & Ganguli 2025 (ICML 2025, arXiv 2412.20292): locality and equivariance alone give an analytic "
        "'equivariant local score' machine that predicts trained convolutional diffusion models' outputs (median r² "
        "0.94–0.96 on MNIST, FashionMNIST, CIFAR-10, CelebA; ≈ 0.77 with attention): novel samples as patch mosaics.")

LITERATURE = {
    "b": f"{BONNAIRE} {FAVERO} Both report b = 1 on models of millions of parameters at n up to 10⁴–10⁵; ours is "
         "N ≤ 240 images of 36 bits and a 0.5M DiT, where N may sit near the capacity n* — the capacity-exponent "
         "study below asks whether b falls toward 1 as the model grows.",
    "b_field": f"{BONNAIRE} {FAVERO}",
    "N_rule": f"{BONNAIRE} (τ_gen independent of n) — our rule clock is the analogue of their τ_gen.",
    "cap_mem": BONNAIRE,
    "gpt": KADKHODAIE + " Theirs is a transition in N for one architecture; ours compares architectures at one N, "
           "and with different samplers (DiT: Heun PF-ODE, 32 steps; GPT: ancestral), so a difference holds for "
           "these samplers, not for the architectures alone (analyses/gpt_dit_match).",
    "sudoku": KAMB + " With 2×2 patches a Sudoku box is one token, so boxes and cells are local and come first "
              "(our scaling study), as a locality account expects; rows and columns are alike for the network, and "
              "in the 2×2 DiT the training seed sets their order (analyses/sudoku_transpose, its training-seed F test "
              "with its Holm family).",
}


def capacity_lines(results):
    """'## Does b fall toward 1 as the model grows?': b per DiT size at memorization 0.1 (capacity_exponent)."""
    c = load("capacity_exponent_cpu", results)
    lines = ["## Does b fall toward 1 as the model grows? (the experiment that explains b)", ""]
    if c is None:
        return lines + ["Not shipped: analyses/capacity_exponent has no results here.", ""]
    q = c["question"]
    lines += [f"b of τ_mem ∝ N^b at memorization 0.1, per DiT size (analyses/capacity_exponent; {_done(c)}); over the "
              f"N every size has ({', '.join(map(str, q['common_N'])) or 'none'}) and over each size's own N:", "",
              "| DiT | b over the common N [95% CI] | b over its own N [95% CI] |", "|---|---|---|"]
    for size, s in sorted(q["sizes"].items(), key=lambda kv: c["sizes"].get(kv[0], {}).get("params", 0)):
        lines.append(f"| {size} | {_b(s['common'])} | {_b(s['own'])} |")
    d = q.get("difference")
    if d is None:
        said = "not answered yet (fewer than two sizes with a slope over common N)"
    elif d.get("value") is None or not math.isfinite(d["value"]):
        said = f"the difference of b between the smallest and largest size is undefined ({d.get('why')})"
    else:
        lo, hi = d["ci"]
        how = (f"a censored normal regression, {d['n_censored']} of {d['n']} runs censored at their budget, profile "
               "interval" if d.get("n_censored") else "least squares, t interval")
        cover = f"; coverage at this design {d['coverage']['coverage']:.3f}" if d.get("coverage") else ""
        said = (f"b(largest) − b(smallest) over the common N, every run a unit: {d['value']:+.2f} [{lo:+.2f}, {hi:+.2f}] "
                f"(one fit with a size × ln N term, {how}{cover}; memorization 0.1): " + (
                    "b is smaller for the larger model, toward the field's b = 1 — what a capacity effect near n* "
                    f"would give, read on {len(q['sizes'])} sizes only" if hi < 0 else
                                                                "b is larger for the larger model" if lo > 0 else
                                                                "no change of b with capacity is resolved"))
    design = [f"- {q['design']}"] if q.get("design") else []
    return lines + ["", f"- {said}. {BONNAIRE}", *_pairwise_lines(q), *design, *_start_lines(c), *_excluded_lines(c), ""]


def _pairwise_lines(q):
    """Every pair of sizes with the per-N means as units and Holm over the pairs (the reading that keeps its coverage
    under a per-N misfit); [] where the json has none."""
    pw = q.get("pairwise")
    if not pw:
        return []
    parts = [f"b({x['b']}) − b({x['a']}) " + (f"{x['value']:+.2f} [{x['lower']:+.2f}, {x['upper']:+.2f}], p_Holm "
                                              f"{x['p_holm']:.2g}" if x.get("p_holm") is not None else
                                              f"undefined ({x['why']})") for x in pw]
    return [f"- With the per-N means as units (an interval that keeps its coverage where each N deviates from the "
            f"line; Holm over the {len(pw)} pairs of sizes): " + "; ".join(parts) + "."]


def _excluded_lines(c):
    """The planned runs left out of every fit: declared diverged, and those whose training never started."""
    never = [r["run"] for r in c.get("runs", []) if never_started(r)]
    parts = ([f"diverged: {', '.join(c['diverged'])}"] if c.get("diverged") else []) + (
        [f"training never started (no logged loss below 0.5): {', '.join(never)}"] if never else [])
    return [f"- Left out of every fit, and named in the study's md: {'; '.join(parts)}. Every size trains at the "
            "recipe's lr 2e-3 without warm-up; leaving these runs out selects the runs that trained, which the fit "
            "cannot correct."] if parts else []


def _start_lines(c):
    """The sizes whose training started late in some run, and b counted from each run's start (training_start)."""
    moved = {size: r for size, r in (c.get("training_start") or {}).items() if r.get("b_from_start")}
    if not moved:
        return []
    return ["- Training start (the first logged loss below 0.5): " + "; ".join(
        f"{size} at steps {r['min']}–{r['max']}, b {_b(r['b'])} counted from step 0, {_b(r['b_from_start'])} from "
        "each run's start" for size, r in moved.items()) + (
        _start_reading(moved) + " (the capacity md, 'When training started').")]


def _start_reading(moved):
    """Whether b counted from each run's start is higher for every size (undefined where a size's b is)."""
    pairs = [(r["b_from_start"]["b"], r["b"]["b"]) for r in moved.values()]
    if any(a is None or b is None or not (math.isfinite(a) and math.isfinite(b)) for a, b in pairs):
        return ". Counted from the start, b is undefined for some size (an N whose runs are all censored): not compared"
    return (". Late starts lower b; they do not make it exceed 1" if all(a > b for a, b in pairs) else
            ". Counted from the start, b is not higher for every size")


def _done(c):
    return f"{c['n_planned'] - len(c['missing'])} of {c['n_planned']} planned runs done"


def _b(row):
    if not row:
        return "—"
    if row.get("b") is None or not math.isfinite(row["b"]):
        return f"undefined ({row.get('method') or 'no estimate'})"
    lo, hi = row["b_ci"]
    return f"{row['b']:.2f} [{lo:.2f}, {hi:.2f}] ({row['n']} runs, {row['n_censored']} censored)"
