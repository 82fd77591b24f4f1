"""Exports that may be in one of several folders, the first the one a run is written to (analyses/exactk_ladder:
an exact-K run's own export with Σ bits, else the scaling study's without them, standing in for τ until the run is
measured again)."""
from scoreprobe.studies.export import NO_EXPORT, load_exports


def collect_first(runs, folders_of, row_of):
    """rows [row_of(run, export, folder)] of the planned `runs` from the first folder of folders_of(run) that holds
    the run's export with its TrainConfig, in plan order, and missing {run: why} for the others (why: the first
    reason other than 'no export', else 'no export')."""
    rows, missing = [], {}
    for run in runs:
        whys = []
        for folder in folders_of(run):
            done, miss = load_exports([run], folder)
            if run.name in done:
                rows.append(row_of(run, done[run.name], folder))
                break
            whys.append(miss[run.name])
        else:
            missing[run.name] = next((w for w in whys if w != NO_EXPORT), NO_EXPORT)
    return rows, missing
