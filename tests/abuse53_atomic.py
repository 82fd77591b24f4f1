"""Issue 53, item 6, the writers that still bypassed scoreprobe.atomic: a run's dataset.npz (`Dataset.save`), a
store's text files (`store.commit.write_text_atomic`, its own copy of the protocol until now), the scaling
exports (`analyses/scaling/export.save_npz`) and every table, page and figure of analyses/ (here: decompose's
json, three figures and md from its shipped result).

Each attempt writes on a simulated full disk (tests/full_disk.py): it must fail with an OSError naming the target
while every file that was there stays byte-identical and no file (a temporary, a 0-byte or half target) appears;
`intact` turns any damage into a `DamagedFiles` answer, which the corpus classifies as a silent wrong result.
A path no file can have (a folder, below a file, a NUL byte) is refused by Dataset.save before any byte.
The simulated disk fills only files opened through builtins.open (what scoreprobe.atomic uses); io.open (behind
Path.write_text and np.savez of a file name) escapes it, which is one more reason those are not used in place.
"""
import json
import sys
from pathlib import Path

from abuse_issue33 import TRAIN_ARGS
from abuse_issue53 import Attack
from full_disk import cli_on_full_disk, intact, one_clean_line

from scoreprobe.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
DECOMPOSE_JSON = ROOT / "analyses" / "results" / "decompose.json"
if str(ROOT) not in sys.path:     # analyses/ is a package at the repository root
    sys.path.insert(0, str(ROOT))


def _data(seed):
    import scoreprobe as sp
    rule = sp.Parity(2, shape=(2, 4), layout="random", seed=0)
    return sp.make_dataset(rule, 6, 4, seed=seed)


def _save_on_full_disk(work, budget, earlier=True):
    """Dataset.save over an earlier dataset (or none) on a disk with `budget` bytes left."""
    path = work / "d.npz"
    if earlier:
        _data(0).save(path)
    return intact(work, lambda: _data(1).save(path), budget=budget)


def _new_run_on_full_disk(work, budget):
    """train_run creating a run on a full disk: its dataset.npz is the first file it writes."""
    from abuse_corpus import CFG

    from scoreprobe.training.train import TrainConfig, train_run
    return intact(work, lambda: train_run(TrainConfig(**CFG), work / "run", progress=False), budget=budget)


def _store_text_on_full_disk(work, budget):
    """A store's root zarr.json rewritten (store.commit.write_json_atomic) on a full disk."""
    from scoreprobe.store.commit import write_json_atomic
    folder = work / "s.zarr"
    folder.mkdir()
    write_json_atomic(folder / "zarr.json", {"zarr_format": 3, "node_type": "group", "attributes": {"n": 1}})
    return intact(work, lambda: write_json_atomic(folder / "zarr.json", {"attributes": {"n": 2, "pad": "x" * 500}}),
                  budget=budget)


def _decompose_results(work):
    """analyses/decompose's report written once from its shipped json into `work`; returns (write_all, res)."""
    from analyses.decompose.write import write_all
    res = json.loads(DECOMPOSE_JSON.read_text())
    res.pop("summary", None)
    write_all(res, work)
    return write_all, res


def _analyses_on_full_disk(work, budget):
    """The decompose study's json, three figures and md rewritten on a full disk with `budget` bytes left."""
    write_all, res = _decompose_results(work)
    return intact(work, lambda: write_all(res, work), budget=budget)


def _analyses_figure_on_full_disk(work, budget):
    """One figure of the decompose study (its heat map, savefig through scoreprobe.viz.common.save_figure)
    rewritten over the earlier one on a full disk with `budget` bytes left: the disk fills inside the PNG."""
    from scoreprobe.viz.common import save_figure
    from scoreprobe.viz.decompose import plot_calls_map
    _, res = _decompose_results(work)
    return intact(work, lambda: save_figure(plot_calls_map(res["models"]), work / "decompose_heatmap.png", dpi=110),
                  budget=budget)


def _export_on_full_disk(work, budget):
    """analyses/scaling's per-run export (.npz) rewritten on a full disk."""
    import numpy as np

    from scoreprobe.studies.export import save_npz
    path = work / "exports" / "run.npz"
    save_npz(path, {"step": np.arange(5), "state": np.zeros((5, 8), np.int8)})
    return intact(work, lambda: save_npz(path, {"step": np.arange(9), "state": np.ones((9, 64), np.int8)}),
                  budget=budget)


def _cli_new_run(work):
    return cli_on_full_disk(work, ["train", work / "run", *TRAIN_ARGS, "--total-steps", 8], 300)


def _save_into(work, where):
    target = where(work)
    return intact(work, lambda: _data(0).save(target), budget=None)


def _under_a_file(work):
    (work / "f").write_text("a file")
    return work / "f" / "d.npz"


NO_SPACE = "No space left"
ATTACKS = [
    Attack("dataset_save_full_disk_keeps_the_file", 6, api=lambda w: _save_on_full_disk(w, 300), error=OSError,
           match=f"{NO_SPACE}.*d.npz"),
    Attack("dataset_save_full_disk_leaves_no_half_file", 6, api=lambda w: _save_on_full_disk(w, 300, earlier=False),
           error=OSError, match=f"{NO_SPACE}.*d.npz"),
    Attack("dataset_save_full_disk_leaves_no_empty_file", 6, api=lambda w: _save_on_full_disk(w, 0, earlier=False),
           error=OSError, match=f"{NO_SPACE}.*d.npz"),
    Attack("dataset_save_into_a_folder", 6, api=lambda w: _save_into(w, lambda d: d), error=ConfigError,
           match="dataset path .* is a folder"),
    Attack("dataset_save_under_a_file", 6, api=lambda w: _save_into(w, _under_a_file), error=ConfigError,
           match="dataset path .* not a folder"),
    Attack("dataset_save_path_with_nul", 6, api=lambda w: _save_into(w, lambda d: str(d / "d\0.npz")),
           error=ConfigError, match="dataset path .*NUL"),
    Attack("new_run_full_disk_leaves_no_half_dataset", 6, api=lambda w: _new_run_on_full_disk(w, 300),
           error=OSError, match=f"{NO_SPACE}.*dataset.npz", timeout_s=120, slow_s=20),
    Attack("new_run_full_disk_cli_one_line", 6, api=_cli_new_run, answer=one_clean_line("no space left on device"),
           timeout_s=120),
    Attack("store_zarr_json_full_disk_keeps_the_commit", 6, api=lambda w: _store_text_on_full_disk(w, 100),
           error=OSError, match=f"{NO_SPACE}.*zarr.json"),
    Attack("store_zarr_json_full_disk_at_the_first_byte", 6, api=lambda w: _store_text_on_full_disk(w, 0),
           error=OSError, match=f"{NO_SPACE}.*zarr.json"),
    Attack("analyses_json_full_disk_keeps_the_report", 6, api=lambda w: _analyses_on_full_disk(w, 0), error=OSError,
           match=f"{NO_SPACE}.*decompose.json", slow_s=20),
    Attack("analyses_figure_full_disk_keeps_the_figures", 6, api=lambda w: _analyses_figure_on_full_disk(w, 2000),
           error=OSError, match=f"{NO_SPACE}.*decompose_heatmap.png", slow_s=20),
    Attack("scaling_export_full_disk_keeps_the_export", 6, api=lambda w: _export_on_full_disk(w, 200), error=OSError,
           match=f"{NO_SPACE}.*run.npz"),
]
