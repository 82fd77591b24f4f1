"""Every code block of README.md and docs/*.md runs (issue 56 item 2), and what it prints is what its
comments say (tests/doc_blocks.py: how blocks are found, marked, run and checked).

A page's python blocks run in order in one namespace, in a copy of the folder a user would have
(test_readme's `sandbox`: the shipped checkpoints, facebookresearch/DiT-style checkpoints, a bare
state_dict, data.npz, mine.py, steps.txt); bash lines run in-process through the CLI at toy size
(test_readme's `_toy`, with `train` and dask shrunk here). Blocks marked `<!-- slow -->` run under
`-m slow`, `<!-- gpu -->` under `-m gpu` (as written, on CUDA); the markers, the commands that are
not scoreprobe's and the printed claims are counted below, so none can silently grow or vanish.
README.md's blocks run in the default suite through tests/test_readme.py (checked below to be all of
them) and again here under `-m slow`.
"""
import shutil
import warnings
from pathlib import Path
from unittest import mock

import pytest

import test_readme
from doc_blocks import PAGES, all_blocks, claims, commands, run_python, set_options
from scoreprobe.cli import main
from test_readme import sandbox  # noqa: F401 -- the fixture: the files a user would have

ALL = all_blocks()
BY_ID = {b.id: b for b in ALL}

# Every marked block, with its markers; a new one is a decision made here as well as in the page.
MARKED = {
    "README.md#3": ("gpu",),                   # --device cuda, full-size maps of all 24 checkpoints
    "docs/distributed.md#1": ("slow",),        # starts dask clusters (worker processes import torch)
    "docs/inside.md#2": ("slow",),             # 3 × 300 samples of the shipped network, hooked over a σ window
    "docs/distributed.md#2": ("slow",),
    "docs/ensemble.md#2": ("gpu", "slow"),     # 8 runs of 20 000 steps on CUDA
    "docs/features.md#2": ("slow",),          # loads the shipped series, trains an SAE, samples with a hook
    "docs/monitor.md#1": ("slow",),            # 6000 training steps, 13 measurements of 1000 samples
    "docs/studies.md#1": ("slow",),            # 18 training runs (tests/test_studies_doc.py: at toy sizes)
}
TEXT = ["README.md#8"]                         # unlabelled fences: the package layout, not code
# Commands in bash blocks that are not scoreprobe's, and where each is checked instead.
EXTERNAL = {
    "pip install torch==2.13.0": "tests/test_readme.py checks it against .ci/run",
    "pip install -e .": "the environment this suite runs in",
    "pip install -e .[test]": "the environment this suite runs in (.ci/run: .[test,dask])",
    "python -m pytest": "this suite itself",
}
# Print statements whose comment states what they print, per block (tests/doc_blocks.py, `claims`).
CLAIMS = {"README.md#4": 2, "docs/distributed.md#2": 1, "docs/features.md#1": 1, "docs/inside.md#1": 6}
# Pages whose blocks the default suite runs elsewhere (here: under -m slow).
DELEGATED = {"README.md": "tests/test_readme.py"}
# Pages whose blocks of one language together take long: they run only under -m slow.
SLOW_PAGES = {("docs/commands.md", "bash"): "every command of the reference at toy size, about 25 s idle"}
# Toy sizes beside test_readme.TOY, and what stands for a user's placeholder (a fixture's name).
TOY_TRAIN = {"--total-steps": "4", "--n-checkpoints": "3", "--batch-size": "8", "--n-heldout": "16",
             "--hidden-size": "16", "--depth": "1", "--num-heads": "2"}
TOY_DASK = {"--dask-local": "1"}
PLACEHOLDERS = {"tcp://host:8786": "dask_scheduler"}


def _runs():
    """pytest params (page, lang, mode, blocks): a page's unmarked blocks of one language (default
    suite), then all but the gpu blocks (-m slow, where a block is slow or the page delegated), then
    all (-m gpu, where a block needs CUDA), each sequence in page order."""
    params = []
    for page in PAGES:
        for lang in ("bash", "python"):
            todo = [b for b in ALL if b.page == page and b.lang == lang]
            plain, cpu = [b for b in todo if not b.marks], [b for b in todo if "gpu" not in b.marks]
            if plain and page not in DELEGATED and (page, lang) not in SLOW_PAGES:
                params.append(pytest.param(page, lang, "default", plain, id=f"{page}:{lang}"))
            if cpu and (page in DELEGATED or (page, lang) in SLOW_PAGES or any("slow" in b.marks for b in cpu)):
                params.append(pytest.param(page, lang, "slow", cpu, id=f"{page}:{lang}:slow",
                                           marks=pytest.mark.slow))
            if any("gpu" in b.marks for b in todo):
                marks = [pytest.mark.gpu] + [pytest.mark.slow] * any("slow" in b.marks for b in todo)
                params.append(pytest.param(page, lang, "gpu", todo, id=f"{page}:{lang}:gpu", marks=marks))
    return params


RUNS = _runs()


@pytest.fixture(scope="module")
def dask_scheduler():
    """The address of a running dask scheduler (a local cluster of one worker process)."""
    pytest.importorskip("distributed")
    from scoreprobe.sweep.dask import client_for
    with client_for(("local", 1)) as client:
        yield client.scheduler.address


def test_the_markers_are_exactly_these():
    assert {b.id: b.marks for b in ALL if b.marks} == MARKED


def test_every_fence_is_python_bash_or_listed_text():
    assert {b.lang for b in ALL} <= {"python", "bash", ""}
    assert [b.id for b in ALL if b.lang == ""] == TEXT


def test_the_commands_that_are_not_scoreprobe_are_exactly_these():
    other = {" ".join(c) for b in ALL if b.lang == "bash" for c in commands(b) if c[0] != "scoreprobe"}
    assert other == set(EXTERNAL)


def test_the_printed_claims_are_counted():
    found = {b.id: len(claims(b)) for b in ALL if b.lang == "python" and claims(b)}
    assert found == CLAIMS


def test_every_code_block_runs_in_some_mode():
    ran = {}
    for p in RUNS:
        for b in p.values[3]:
            ran.setdefault(b.id, set()).add(p.values[2])
    code = [b for b in ALL if b.lang in ("python", "bash")]
    assert set(ran) == {b.id for b in code}
    for b in code:   # unmarked: by default (a delegated page's: under slow); gpu: under gpu; slow: under slow
        if "gpu" in b.marks:
            want = "gpu"
        else:
            want = "slow" if b.marks or b.page in DELEGATED or (b.page, b.lang) in SLOW_PAGES else "default"
        assert want in ran[b.id], (b.id, ran[b.id])


def test_the_readme_blocks_are_all_run_by_test_readme():
    """tests/test_readme.py runs README.md's blocks: its tour (the first python block, under -m slow), the five-line denoiser (the one with sp.Dataset), every scoreprobe command line at toy
    size, and `scoreprobe basins` of the install line."""
    py = [b.code for b in ALL if b.page == "README.md" and b.lang == "python"]
    assert py == test_readme._blocks("python") and len(py) == 2 and "sp.Dataset(" in py[1]
    ours = {" ".join(c) for b in ALL if b.page == "README.md" and b.lang == "bash" for c in commands(b)
            if c[0] == "scoreprobe"}
    theirs = {line for line in test_readme.bash_lines() if line.startswith("scoreprobe ")}
    assert ours == theirs | {"scoreprobe basins"}   # the install line's tail: test_first_command_runs...


def test_a_wrong_claim_fails(tmp_path):
    """The checker can fail: a print whose comment says something else."""
    from doc_blocks import Block
    block = Block("README.md", 0, "python", 1, "print(1 + 1)   # 3: arithmetic\n", ())
    with pytest.raises(AssertionError, match="printed '2'; its comment says '3'"):
        run_python(block, {})
    run_python(Block("README.md", 0, "python", 1, "print(1 + 1)   # 2: arithmetic\n", ()), {})


def _run_command(block, cmd, mode, request, capsys):
    """One command of a bash block: scoreprobe's in-process at toy size (a gpu block under -m gpu as
    written), with placeholders filled; another must be one of EXTERNAL."""
    line = " ".join(cmd)
    if cmd[0] != "scoreprobe":
        assert line in EXTERNAL, f"{block.id}: {line!r} is not a scoreprobe command (add it to EXTERNAL?)"
        return
    argv = cmd[1:]
    if not (mode == "gpu" and "gpu" in block.marks):
        with mock.patch.dict(test_readme.TOY, {"train": TOY_TRAIN}):
            argv = set_options(test_readme._toy(argv), TOY_DASK)
    argv = [request.getfixturevalue(PLACEHOLDERS[a]) if a in PLACEHOLDERS else a for a in argv]
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = e.code
    assert code in (0, None), f"{block.id}: {line}\n(run as {argv}) -> {capsys.readouterr().err}"
    if "--out" in argv:
        out = argv[argv.index("--out") + 1]
        assert Path(out).exists(), f"{block.id}: {line} wrote no {out}"


@pytest.mark.parametrize("page,lang,mode,todo", RUNS)
def test_the_blocks_run(page, lang, mode, todo, sandbox, tmp_path, monkeypatch, capsys, request):  # noqa: F811
    work = tmp_path / "work"
    shutil.copytree(sandbox, work, symlinks=True)
    monkeypatch.chdir(work)
    env = {"__name__": "__main__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # guessed steps and settings warn, as the pages say
        for block in todo:
            if lang == "python":
                run_python(block, env)
            else:
                for cmd in commands(block):
                    _run_command(block, cmd, mode, request, capsys)
    for check in AFTER.get((page, lang), ()):
        check(work, env)


def _ensemble_dirs(work, env):
    """docs/ensemble.md: `8 runs: runs/grid/G2-n_train64-seed0, ...`, each a run directory."""
    runs = sorted(p.name for p in (work / "runs" / "grid").iterdir() if (p / "run.json").is_file())
    assert len(runs) == 8 and {"G2-n_train64-seed0", "G2-n_train64-seed1", "G3-n_train128-seed1"} <= set(runs)


def _inside(work, env):
    """docs/inside.md: the cache, the patching results and the probe have the shapes the page names."""
    assert env["cache"].attn_pattern.sizes["sample"] == 8
    assert env["ode"].sizes == {"site": 1, "sample": 8}
    assert list(env["cir"].step.values) == [2876, 36000] and env["cir"].sizes["site"] == 16


AFTER = {("docs/ensemble.md", "bash"): [_ensemble_dirs], ("docs/inside.md", "python"): [_inside]}
