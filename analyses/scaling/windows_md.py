"""Why each window is closed (analyses/scaling's last section): per configuration the window status of every seed
(`stats.taus.window_status`, read at the runs' budgets), the runs whose rule accuracy is still at its highest at the
last checkpoint, and those whose rule accuracy reaches 0.9 and falls again without copying."""
from scoreprobe.stats.runs import by_group
from scoreprobe.studies.format import statuses as _statuses


def section_windows(rows):
    lines = ["## Why a window is closed", "", "| configuration | per seed |", "|---|---|"]
    for g, rs in by_group(rows).items():
        lines.append(f"| {g} | {_statuses(rs)} |")
    lost = [r for r in rows if r["peak_rule_acc"] >= 0.9 and r["final_rule_acc"] <= r["peak_rule_acc"] - 0.15
            and r["final_mem_ratio"] < 0.1]
    rising = [r for r in rows if not r["window_open"] and r["curve"]["rule_acc"][-1] >= max(r["curve"]["rule_acc"][-4:])
              and r["final_rule_acc"] < 0.9]
    lines += ["", "- every status is read at these budgets (the runs' last checkpoints): \"never reaches\" means "
              "not by the last step, and a window closed at one budget may open at a longer one."]
    if rising:
        lines.append("- rule accuracy (copies included) is still at its highest at the last checkpoint in "
                     + ", ".join(f"{r['run']} ({r['final_rule_acc']:.3f})" for r in rising)
                     + ": their 'never reaches 0.9' is a statement about this budget only")
    if lost:
        lines.append("- a third way to close: rule accuracy reaches 0.9 and falls again while memorization stays "
                     "below 0.1 — " + ", ".join(f"{r['run']} (peak {r['peak_rule_acc']:.3f} → {r['final_rule_acc']:.3f}"
                                              f" at the end, copies ≤ {max(r['curve']['mem_ratio']):.3f})" for r in lost))
    return lines, {"status": {g: [r["window_status"] for r in rs] for g, rs in by_group(rows).items()},
                   "rising_at_the_end": [r["run"] for r in rising], "lost_without_copying": [r["run"] for r in lost]}
