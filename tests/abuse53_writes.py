"""Issue 53, items 4 and 6 (and item 7's NUL in compare_report(out=...)): what scoreprobe writes.

Item 4, `export-tb`: one event file per run, replaced whole by a re-export; every value checked against
float32's range before the first byte; a full disk leaves no 0-byte file. Item 6: every figure, GIF and page
goes through a temporary file and a rename, so a full disk leaves an existing file as it was, and
`compare --report`, `export-tb`, `plot-log` and a training extension end in one clean line on ENOSPC.

A full disk is simulated by tests/full_disk.py's `full_disk(root, budget)`: every file opened for writing under
`root` takes at most `budget` bytes in all, then its writes raise OSError(ENOSPC) (what a file system does when
it fills mid-write; the first bytes land). `intact(root, call)` runs `call` on a full disk and, when it fails, returns a
`DamagedFiles` (an answer where a refusal was due: "silent wrong") if a file that existed is not
byte-identical, a new file or a 0-byte file appeared, or a temporary file stayed; else re-raises its error.
CLI attempts under a full disk run the CLI in-process (abuse_issue53.cli) inside `full_disk` and check its
one error line in `answer`: the corpus's `argv` path cannot fill the disk.
"""
import errno
import functools
import json
import shutil
import time
from pathlib import Path

import abuse_issue53
from abuse_corpus import CFG
from abuse_issue33 import TRAIN_ARGS
from abuse_issue53 import Attack, scratch
from full_disk import cli_on_full_disk, intact, one_clean_line
from scoreprobe.errors import ConfigError, DataError


# ---------------------------------------------------------------------------------------------
# Tiny inputs, built once per process and copied into each work folder
# ---------------------------------------------------------------------------------------------

def _cache():
    return scratch("abuse53-writes-")


@functools.lru_cache(maxsize=None)
def _template(name):
    """A built input in the process's cache folder: 'run' (a tiny training run with its train_log.png),
    'clocks' (two clocks stores of oracles), 'basins' (a basins store of oracles)."""
    import torch
    torch.set_num_threads(1)
    path = _cache() / name
    if name == "run":
        from scoreprobe.training.train import TrainConfig, train_run
        train_run(TrainConfig(**CFG), path, progress=False)
        code, _, err = abuse_issue53.cli(["plot-log", path])
        assert code == 0, err
    elif name == "clocks":
        path.mkdir()
        for i, (d_rule, d_data) in enumerate(_oracle_pairs()):
            import scoreprobe as sp
            rule, data = _oracle_data()
            sp.clocks({0: d_rule, 40: d_data}, dataset=data, rule=rule, n_samples=32, out=path / f"c{i}.zarr",
                      progress=False)
    elif name == "basins":
        import scoreprobe as sp
        rule, data = _oracle_data()
        d_rule, d_data = _oracle_pairs()[0]
        plane = sp.auto_plane(data, rule, seed=0)
        sp.basins({1: d_rule, 10: d_data}, plane, sigma_start=1.0, res=4, dataset=data, rule=rule,
                  out=path, progress=False)
    return path


def _oracle_data():
    import scoreprobe as sp
    rule = sp.Parity(2, shape=(2, 4), layout="random", seed=0)
    return rule, sp.make_dataset(rule, 6, 6, seed=0)


def _oracle_pairs():
    from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
    rule, data = _oracle_data()
    return [(RuleDenoiser(rule), EmpiricalDenoiser(data.train)), (RuleDenoiser(rule), EmpiricalDenoiser(data.train[:3]))]


def copy(name, work, as_=None):
    """A fresh copy of the template `name` in `work` (as `as_`); returns its path."""
    dst = Path(work) / (as_ or name)
    shutil.copytree(_template(name), dst)
    return dst


def cli_work(work):
    """The CLI half of an attack with both halves: its own folder (the API half has used `work`)."""
    sub = Path(work) / "cli"
    sub.mkdir(exist_ok=True)
    return sub


def _stores(work):
    c = copy("clocks", work)
    return [c / "c0.zarr", c / "c1.zarr"]


# ---------------------------------------------------------------------------------------------
# Item 4: export-tb
# ---------------------------------------------------------------------------------------------

def _export(items, logdir):
    from scoreprobe.training.tensorboard import export_tb
    return export_tb(items, logdir)


def _event_files(folder):
    return sorted(Path(folder).glob("events.out.tfevents.*"))


def _earlier_export(run, logdir, seconds=100):
    """An export of `run` made `seconds` ago (the clock set back while it writes)."""
    from unittest import mock
    from scoreprobe.training import tensorboard
    with mock.patch.object(tensorboard.time, "time", lambda: time.time_ns() / 1e9 - seconds):
        _export([run], logdir)


def _reexport(work):
    run = copy("run", work)
    _earlier_export(run, work / "tb")
    return _export([run], work / "tb")


def _one_file_each_point_once(work, result):
    from scoreprobe.training.tensorboard import read_events
    files = _event_files(work / "tb" / "run")
    assert len(files) == 1, f"{len(files)} event files in one run folder: TensorBoard shows each point twice"
    log = [json.loads(ln) for ln in (work / "run" / "train_log.jsonl").read_text().splitlines()]
    steps = [e[1] for e in read_events(files[0]) if "train/loss" in e[2]]
    assert steps == [r["step"] for r in log], steps


def _reexport_cli(work):
    run = copy("run", work)
    _earlier_export(run, work / "tb")
    return ["export-tb", run, "--logdir", work / "tb"]


def _cli_ok_then(check):
    def answer(work, result):
        code, _, err = result
        assert code == 0, err
        check(work, result)
    return answer


def _log_with(work, edit):
    """A run whose training log's second record is changed by `edit(record)`."""
    run = copy("run", work)
    path = run / "train_log.jsonl"
    lines = path.read_text().splitlines()
    rec = json.loads(lines[1])
    edit(rec)
    lines[1] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    return run


def _set(*keys, value):
    def edit(rec):
        d = rec
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1] if keys[-1] != "*" else next(iter(d))] = value
    return edit


def _unchanged(work, call):
    """`intact` without a full disk: a refusal must leave `work` as it was (no partial event file)."""
    return intact(work, call, budget=None)


def _export_refused(edit):
    def api(work):
        run = _log_with(work, edit)
        return _unchanged(work, lambda: _export([run], work / "tb"))
    return api


def _export_answer(edit, tag, check):
    def api(work):
        return _export([_log_with(work, edit)], work / "tb")

    def answer(work, result):
        from scoreprobe.training.tensorboard import read_events
        log = [json.loads(ln) for ln in (work / "run" / "train_log.jsonl").read_text().splitlines()]
        got = [e[2] for e in read_events(result[0]) if e[1] == log[1]["step"] and tag in e[2]]
        assert len(got) == 1 and check(got[0][tag]), got
    return api, answer


def _full_export(work, budget, earlier=True, code=errno.ENOSPC):
    run = copy("run", work)
    if earlier:
        _earlier_export(run, work / "tb")
    return intact(work, lambda: _export([run], work / "tb"), budget=budget, code=code)


def _two_items_second_bad(work):
    good, bad = copy("run", work, as_="good"), _log_with(work, _set("loss", value=1e39))
    return _unchanged(work, lambda: _export([good, bad], work / "tb"))


def _tb_argv(work, run, logdir="tb"):
    return ["export-tb", run, "--logdir", str(work / logdir)]


def _tb_into_file(work):
    (work / "tb").write_text("a file")
    return copy("run", work)


def _tb_run_is_file(work):
    (work / "tb").mkdir()
    (work / "tb" / "run").write_text("a file")
    return copy("run", work)


def _nan_answer(work, result):
    """Each σ bucket the log leaves undefined (null) is NaN in the event file, not 0 and not left out."""
    from scoreprobe.training.tensorboard import read_events
    from scoreprobe.training.trainlog import bucket_tag
    rec = json.loads((work / "run" / "train_log.jsonl").read_text().splitlines()[1])
    nulls = [k for k, v in rec["loss_by_sigma"].items() if v is None]
    got = [e[2] for e in read_events(result[0]) if e[1] == rec["step"] and "train/loss" in e[2]]
    assert nulls and len(got) == 1, (nulls, got)
    assert all(got[0][f"train/loss_by_sigma/{bucket_tag(k)}"] != got[0][f"train/loss_by_sigma/{bucket_tag(k)}"] for k in nulls), got


_NAN_API = _export_answer(_set("loss_by_sigma", "*", value=None), "", None)[0]
_INF_API, _INF_ANSWER = _export_answer(_set("loss", value=float("inf")), "train/loss", lambda v: v == float("inf"))
ITEM4 = [
    Attack("tb_reexport_replaces_its_one_file", 4, api=_reexport, answer=_one_file_each_point_once),
    Attack("tb_reexport_replaces_its_one_file_cli", 4, argv=_reexport_cli,
           answer=_cli_ok_then(_one_file_each_point_once)),
    Attack("tb_loss_1e39_refused_before_any_byte", 4, api=_export_refused(_set("loss", value=1e39)),
           argv=lambda w: _tb_argv(cli_work(w), _log_with(cli_work(w), _set("loss", value=1e39))),
           error=DataError, match=r"train/loss at step \d+ is 1e\+39.*float32"),
    Attack("tb_heldout_bucket_1e39_refused", 4,
           api=_export_refused(_set("heldout", "loss_by_sigma", "*", value=1e39)),
           error=DataError, match=r"heldout/loss_by_sigma/\S+ at step \d+ .*float32"),
    Attack("tb_loss_just_past_float32_refused", 4, api=_export_refused(_set("loss", value=3.4028236e38)),
           error=DataError, match=r"train/loss at step \d+"),
    Attack("tb_undefined_bucket_stays_nan", 4, api=_NAN_API, answer=_nan_answer),
    Attack("tb_diverged_loss_stays_inf", 4, api=_INF_API, answer=_INF_ANSWER),
    Attack("tb_full_disk_keeps_the_earlier_export", 4, api=lambda w: _full_export(w, 300), error=OSError,
           match="No space left"),
    Attack("tb_full_disk_leaves_no_empty_file", 4, api=lambda w: _full_export(w, 0, earlier=False), error=OSError,
           match="No space left"),
    Attack("tb_quota_leaves_no_empty_file", 4, api=lambda w: _full_export(w, 0, earlier=False, code=errno.EDQUOT),
           error=OSError, match="quota"),
    Attack("tb_full_disk_cli_one_line", 4,
           api=lambda w: cli_on_full_disk(w, ["export-tb", copy("run", w), "--logdir", w / "tb"]),
           answer=one_clean_line("no space left on device writing")),
    Attack("tb_logdir_with_nul", 4, api=lambda w: _export([copy("run", w)], str(w / "tb\0x")),
           argv=lambda w: _tb_argv(cli_work(w), copy("run", cli_work(w)), "tb\0x"), error=ConfigError,
           match="NUL"),
    Attack("tb_logdir_is_a_file", 4, api=lambda w: _export([_tb_into_file(w)], w / "tb"),
           argv=lambda w: _tb_argv(cli_work(w), _tb_into_file(cli_work(w))), error=ConfigError,
           match="is a file|not a folder"),
    Attack("tb_run_folder_is_a_file", 4, api=lambda w: _export([_tb_run_is_file(w)], w / "tb"),
           argv=lambda w: _tb_argv(cli_work(w), _tb_run_is_file(cli_work(w))), error=ConfigError,
           match="needs a folder"),
    Attack("tb_bad_second_item_writes_nothing_of_the_first", 4, api=_two_items_second_bad, error=DataError,
           match="train/loss at step"),
    Attack("tb_no_items", 4, api=lambda w: _export([], w / "tb"), error=ConfigError, match="no items"),
    Attack("tb_one_item_as_a_string", 4, api=lambda w: _export(str(copy("run", w)), w / "tb"),
           answer=lambda w, r: _one_file_each_point_once(w, r)),
]


# ---------------------------------------------------------------------------------------------
# Item 6: figures, GIFs and pages written atomically; ENOSPC is one line
# ---------------------------------------------------------------------------------------------

def _page(work):
    """(compare Dataset of two clocks stores, an existing page written from it)."""
    import scoreprobe as sp
    from scoreprobe.reports.compare_page import compare_report
    ds = sp.compare(_stores(work), n_boot=20)
    return ds, compare_report(ds, out=work / "page.html")


def _page_on_full_disk(work):
    from scoreprobe.reports.compare_page import compare_report
    ds, page = _page(work)
    return intact(work, lambda: compare_report(ds, out=page), budget=2000)


def _extend(work, budget):
    from scoreprobe.training.train import TrainConfig, train_run
    run = copy("run", work)
    cfg = TrainConfig(**{**CFG, "total_steps": 2 * CFG["total_steps"]})
    return intact(work, lambda: train_run(cfg, run, progress=False), budget=budget, appended=("run/train_log.jsonl",))


def _gif(work):
    from scoreprobe.viz import animate_basins
    store = copy("basins", work, as_="b.zarr")
    return store, animate_basins(store, work / "b.gif", dpi=30)


def _gif_on_full_disk(work):
    from scoreprobe.viz import animate_basins
    store, gif = _gif(work)
    return intact(work, lambda: animate_basins(store, gif, dpi=30), budget=200)


def _figure_on_full_disk(work, name, budget):
    from scoreprobe.viz.common import new_figure, save_figure
    fig = new_figure((2, 2))
    fig.add_subplot().plot([0, 1], [1, 0])
    if budget:     # an earlier figure there
        save_figure(fig, work / name, dpi=50)
    return intact(work, lambda: save_figure(fig, work / name, dpi=50), budget=budget)


def _cli_full(argv_of, budget):
    """api: run the CLI command `argv_of(work)` (built first, off the full disk) on a full disk."""
    def api(work):
        argv = argv_of(work)
        return cli_on_full_disk(work, argv, budget)
    return api


def _compare_argv(work):
    page = _page(work)[1]
    return ["compare", *_stores(cli_work(work)), "--n-boot", "20", "--report", page]


def _animate_argv(work):
    store, gif = _gif(work)
    return ["animate", store, "--out", gif, "--dpi", "30"]


ITEM6 = [
    Attack("plot_log_full_disk_keeps_the_png", 6, api=_cli_full(lambda w: ["plot-log", copy("run", w)], 4000),
           answer=one_clean_line("No space left on device")),
    Attack("plot_log_pdf_full_disk_leaves_no_partial_file", 6,
           api=_cli_full(lambda w: ["plot-log", copy("run", w), "--out", w / "new.pdf"], 0),
           answer=one_clean_line("No space left on device")),
    Attack("figure_full_disk_keeps_the_file", 6, api=lambda w: _figure_on_full_disk(w, "f.png", 300), error=OSError,
           match="No space left.*f.png"),
    Attack("figure_pdf_full_disk_leaves_no_empty_file", 6, api=lambda w: _figure_on_full_disk(w, "f.pdf", 0),
           error=OSError, match="No space left.*f.pdf"),
    Attack("gif_full_disk_keeps_the_gif", 6, api=_gif_on_full_disk, error=OSError, match="No space left.*b.gif"),
    Attack("gif_full_disk_cli_one_line", 6, api=_cli_full(_animate_argv, 200),
           answer=one_clean_line("No space left on device")),
    Attack("compare_page_full_disk_keeps_the_page", 6, api=_page_on_full_disk, error=OSError,
           match="No space left.*page.html"),
    Attack("compare_report_full_disk_cli_one_line", 6, api=_cli_full(_compare_argv, 2000),
           answer=one_clean_line("no space left on device writing")),
    Attack("train_extension_full_disk_keeps_the_run", 6, api=lambda w: _extend(w, 0), error=OSError,
           match="No space left", timeout_s=120, slow_s=20),
    Attack("train_extension_full_disk_cli_one_line", 6,
           api=_cli_full(lambda w: ["train", copy("run", w), *TRAIN_ARGS, "--total-steps", 2 * CFG["total_steps"]], 0),
           answer=one_clean_line("no space left on device"), timeout_s=120),
]


# ---------------------------------------------------------------------------------------------
# Item 7: compare_report(out=...) a path no file can have
# ---------------------------------------------------------------------------------------------

def _compare_report(work, out):
    from scoreprobe.reports.compare_page import compare_report
    stores, path = _stores(work), out(work)
    return _unchanged(work, lambda: compare_report(stores, out=path, n_boot=20))


def _compare_cli(out):
    def argv(work):
        sub = cli_work(work)
        return ["compare", *_stores(sub), "--n-boot", "20", "--report", out(sub)]
    return argv


def _under_a_file(work):
    (work / "f").write_text("a file")
    return work / "f" / "page.html"


ITEM7 = [
    Attack("compare_report_out_with_nul", 7, api=lambda w: _compare_report(w, lambda d: str(d / "p\0.html")),
           argv=_compare_cli(lambda d: str(d / "p\0.html")), error=ConfigError, match="NUL"),
    Attack("compare_report_out_is_a_folder", 7, api=lambda w: _compare_report(w, lambda d: d),
           error=ConfigError, match="is a folder"),
    Attack("compare_report_out_under_a_file", 7, api=lambda w: _compare_report(w, _under_a_file),
           error=ConfigError, match="not a folder"),
    Attack("compare_report_out_not_a_path", 7, api=lambda w: _compare_report(w, lambda d: 3),
           error=ConfigError, match="must be a path"),
]

ATTACKS = ITEM4 + ITEM6 + ITEM7
