"""The per-run row of a study whose runs may hold a curriculum's pieces (analyses/remedies' G = 3 preset): the
clocks of an export read beyond the curriculum's pieces (`beyond_info`), and `run_row`, scoreprobe.stats.runs.run_stats
with the rule clock compared read among the samples that break a piece (analyses.remedies.piece_clocks); a row
from measured clocks (`clocks_row`, and a curriculum run's `beyond_row`: analyses/remedies' own presets); the
cells of a runs table of such rows."""
import math

import numpy as np

from scoreprobe.stats import curves as C
from analyses.remedies.piece_clocks import among_breaking, breaking_taus
from scoreprobe.stats.runs import run_stats
from scoreprobe.studies.export import clocks_dataset
from scoreprobe.studies.format import ci_text, fmt
from scoreprobe.data.curriculum import beyond_pieces, beyond_state
from scoreprobe.data.rules import rule_from_spec
from scoreprobe.stats.extrapolate import extrapolate_tau
from scoreprobe.stats.taus import tau_summary


def beyond_info(info):
    """An export (read_export) with its clocks read beyond the curriculum's pieces when it has `piece_valid`
    (a curriculum run or its control), else unchanged; `piece_share` (S,) added (None without pieces)."""
    piece = info.get("piece_valid")
    if piece is None:
        return {**info, "piece_share": None}
    ds = info["ds"]
    state, _ = beyond_state(ds["state"].values, piece)
    beyond = clocks_dataset(ds["step"].values, state, ds.attrs["novel_oracle"])
    return {**info, "ds": beyond, "piece_share": piece.mean(axis=1).tolist()}


def run_row(run, info):
    """run_stats of one run (beyond the pieces where it has them). For a curriculum run or its control the rule
    clock compared (`curves["tau_rule"]`) is rule accuracy among the samples that break a piece
    (among_breaking, breaking_taus): the control keeps drawing piece images (a share of its data), so counting
    its piece samples as failures would cap its rule accuracy at 1 − its piece share. Kept beside:
    `curves["tau_rule_beyond"]` (pieces as failures), `tau_rule_all` (pieces as valid), `piece_share`."""
    b = beyond_info(info)
    row = run_stats(run.name, run, b)[0]
    row["beyond_pieces"] = b["piece_share"] is not None
    if row["beyond_pieces"]:
        acc, count = among_breaking(info["ds"]["state"].values, info["piece_valid"])
        row["piece_share"] = b["piece_share"]
        row["curve"]["rule_acc_all"] = info["ds"].rule_acc.values.tolist()
        row["curve"].update(rule_acc_breaking=acc.tolist(), n_breaking=count.tolist())
        row["tau_rule_all"] = C.run_curves(info["ds"])["tau_rule"].tolist()
        row["curves"]["tau_rule_beyond"] = row["curves"]["tau_rule"]
        row["curves"]["tau_rule"] = breaking_taus(row["curve"]["step"], acc, count, C.thresholds_of("tau_rule")).tolist()
    return row


def clocks_row(ds):
    """A run's row from its measured clocks `ds` (`sp.clocks` with its τ in attrs): τ_rule, τ_mem with their CIs,
    the window, peak and final rule accuracy, the final memorized share, the curves, and where τ_rule is not
    reached its extrapolation from the last checkpoints (`stats.extrapolate`)."""
    a = ds.attrs
    row = {**{k: a.get(k) for k in ("tau_rule", "tau_rule_ci", "tau_mem", "tau_mem_ci", "window_open",
                                    "window_log10_width", "window_log10_width_ci")},
           "peak_rule_acc": float(ds.rule_acc.max()), "final_rule_acc": float(ds.rule_acc[-1]),
           "final_mem_ratio": float(ds.mem_ratio[-1]),
           "curve": {"step": ds.step.values.tolist(), "rule_acc": ds.rule_acc.values.tolist(),
                     "mem_ratio": ds.mem_ratio.values.tolist()}}
    if not np.isfinite(row["tau_rule"]):
        row["tau_rule_extrapolated"] = extrapolate_tau(ds)
    return row


def beyond_row(ds, cfg, g_start):
    """The rule clock of a curriculum run counting only samples that break its pieces (`beyond_pieces`; g_start:
    the pieces' group size): τ_rule, the window, peak and final rule accuracy, the curves, the piece share."""
    out = beyond_pieces(ds, rule_from_spec(cfg.rule), g_start)
    t = tau_summary(out, warn=False)
    row = {k: t[k] for k in ("tau_rule", "tau_rule_ci", "window_open", "window_log10_width")}
    row.update(peak_rule_acc=float(out.rule_acc.max()), final_rule_acc=float(out.rule_acc[-1]),
               rule_acc=out.rule_acc.values.tolist(), piece_share=out.piece_share.values.tolist())
    if not np.isfinite(row["tau_rule"]):
        row["tau_rule_extrapolated"] = extrapolate_tau(out)
    return row


# ---------------------------------------------------------------------------------------------
# Cells of a runs table of such rows (scoreprobe.studies.format.runs_section)
# ---------------------------------------------------------------------------------------------

def piece_mark(row):
    """' †' on a run read beyond the curriculum's pieces, '' otherwise."""
    return " †" if row["beyond_pieces"] else ""


def tau_text(row, key):
    """'τ [lo, hi]' of the run's τ `key` with its sample-level CI; '> steps (not reached)' where it is not."""
    v = row[key]
    return f"{fmt(v)} {ci_text(row[key + '_ci'])}" if math.isfinite(v) else f"> {row['steps']} (not reached)"


def breaking_tau(row, threshold=0.9):
    """The run's τ_rule at `threshold` among the samples that break a piece ('—' for a run without pieces)."""
    if not row["beyond_pieces"]:
        return "—"
    v = C.at([{"threshold": t, "v": x} for t, x in zip(C.thresholds_of("tau_rule"), row["curves"]["tau_rule"])],
             threshold)["v"]
    return fmt(v) if math.isfinite(v) else f"> {row['steps']} (not reached)"


def breaking_peak(row):
    """'peak (samples breaking a piece there)' of the rule accuracy among them ('—' for a run without pieces)."""
    if not row["beyond_pieces"]:
        return "—"
    i = int(np.argmax(row["curve"]["rule_acc_breaking"]))   # a NaN knot is np.argmax's pick: the table shows nan
    return f"{row['curve']['rule_acc_breaking'][i]:.3f} ({row['curve']['n_breaking'][i]})"
