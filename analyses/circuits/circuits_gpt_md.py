"""The markdown report of GPTs patched with the logit metric over several trained models
(`scoreprobe.stats.circuit_effects.gpt_effects` per model, `circuit_effects_across.gpt_across` over them), from the
study's JSON alone: per reading step near the models' clocks, the largest effects with intervals over models and
Holm, and the contrast over training."""
import numpy as np

from analyses.circuits.circuits_md import _tau
from scoreprobe.reports.interval_text import ci_pair as _ci
from scoreprobe.reports.interval_text import num as _n
from scoreprobe.reports.interval_text import per_model as _models

N_SHOW = 5
READ_TEXT = {"tau_rule": "nearest the mean τ_rule", "tau_mem": "nearest the mean τ_mem", "last": "last checkpoint"}


def _ranked(cells, read):
    row = sorted([c for c in cells if c["read"] == read],
                 key=lambda c: -c["mean"] if c["mean"] is not None else np.inf)
    return row


def _table(res, kind):
    names, a = list(res["models"]), res["across"][kind]
    L = [f"**{kind} pairs** (family: {a['family']['what']}, {a['family']['size']} tests, Holm at "
         f"{a['family']['alpha']}):", "", "| reading | step | contrast (logit units) | rank | site | effect [95% t CI] | "
         "per model | p_Holm |", "|---|---|---|---:|---|---|---|---|"]
    for read, step in res["read_steps"].items():
        con = a["contrast"][read]
        row = _ranked(a["cells"], read)
        undefined = [c for c in row if c["mean"] is None]
        defined = [c for c in row if c["mean"] is not None]
        head = next((c for c in defined if "[head=" in c["site"]), None)          # the best head, shown always
        for c in defined[:N_SHOW] + ([head] if head is not None and head not in defined[:N_SHOW] else []):
            L.append(f"| {READ_TEXT[read]} | {step} | {_n(con['mean'], '{:+.1f}')} {_ci(con['ci'], '{:+.1f}')} | "
                     f"{defined.index(c) + 1} of {len(defined)} | `{c['site']}` | {_n(c['mean'])} {_ci(c['ci'])} | {_models(c['per_model'], names)} | "
                     f"{_n(c['p_holm'], '{:.3f}')} |")
        if undefined:
            L.append(f"| {READ_TEXT[read]} | {step} | | | {len(undefined)} sites undefined | "
                     f"{'; '.join(sorted({c['undefined'] for c in undefined}))} | | |")
    return L + [""]


def markdown(res, made_by):
    """The report of `res` (the study's JSON); `made_by`: the command that made it."""
    names, p = list(res["models"]), res["preset"]
    taus = "; ".join(f"{n} (`{res['models'][n]}`): τ_rule {_tau(t, 'tau_rule')}, τ_mem {_tau(t, 'tau_mem')}"
                     for n, t in res["taus"].items())
    L = ["# Circuits of a GPT, patched with a logit metric", "",
         f"Made by `{made_by}`. Models: {len(names)} GPTs of analyses/gpt_clocks' recipe "
         f"(the shipped DiT's data and split; {', '.join(names)}; {res['steps'][-1]} steps): {taus} (1000 ancestral "
         f"samples, each run's clocks.json). {p['n_pairs']} pairs of each kind, sites {p['sites']}, contrast floor "
         f"{p['floor']:g}; {len(res['steps'])} checkpoints patched; {res['seconds']['probe']:.0f} s.", "",
         "How to read it. A GPT has no noise level: it is patched teacher-forced on bits, and the metric is the "
         "**logit difference** `sp.patch(..., metric=\"logit_diff\")` — the run's log-odds for the clean image's "
         "bits at the positions read (docs/inside.md). Effect 0 = the corrupt "
         "run, 1 = the clean run; pooled over pairs as Σ numerators / Σ contrasts, **undefined** where the "
         "contrasts have mixed sign or are below the floor. *Copy pairs*: a training item vs its nearest held-out "
         "item (the log-odds of the training item's bits from the first differing one on). *Rule pairs*: a held-out "
         "item vs the same with the first member (in token order) of one parity group flipped, the log-odds read "
         "only at the group's last member — the bit parity fixes (`positions=` one-hot there). Models are the units: mean [95% t interval, "
         f"{len(names) - 1} df], per-model values, Holm over the stated family. `blocks.i` patches the block's "
         "attention and MLP outputs together (all positions), not the residual stream; a head is "
         f"`blocks.i.attn.hook_z[head=h]`. Per reading: the {N_SHOW} largest effects and the largest head's, each "
         "with its rank among the reading's defined sites (by mean effect): a small p_Holm says the "
         f"{len(names)} models agree, not that the effect is large.", ""]
    L += [f"Reading steps: {', '.join(f'{READ_TEXT[k]} {v}' for k, v in res['read_steps'].items())}.", ""]
    L += _table(res, "rule") + _table(res, "copy")
    L += ["Contrast over training (mean over models, logit units) at every patched checkpoint: " + "; ".join(
        f"{kind}: " + ", ".join(f"{st} {np.mean([res['per_model'][n][kind]['contrast_mean'][i] for n in names]):+.1f}"
                                 for i, st in enumerate(res["steps"]))
        for kind in ("rule", "copy")) + ".", ""]
    return "\n".join(L) + "\n"
