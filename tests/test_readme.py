"""The README is exactly true: every command line in its ```bash blocks runs (at toy size, on files
made here where it names other people's checkpoints), its Python tour runs as written, and the
install line matches .ci/run."""
import argparse
import os
import re
import shlex
import shutil
import warnings
from pathlib import Path

import pytest
import torch

from scoreprobe.loading.series import load_series
from scoreprobe.cli import cli, main
from test_dit import facebook_dit_state_dict

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

# Options that shrink a command to toy size; they replace the README's values of the same options.
TOY = {"basins": {"--res": "4", "--n-steps": "2"}, "clocks": {"--n-samples": "8", "--n-steps": "2"},
       "dsm": {"--sigmas": "2", "--n-noise": "1", "--n-train": "4", "--n-heldout": "4"}, "field": {"--res": "4"},
       "report": {"--size": "n_samples=8 n_steps=2 res=4 field_res=4 retention_items=2 retention_noise=1 "
                            "dsm_sigmas=2 dsm_noise=1 dsm_heldout=4"}}
SHIPPED_TOY_STEPS = "0,36000"   # for commands on the shipped series (24 checkpoints)


def _blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def bash_lines():
    """Every command line of the README's bash blocks, comments dropped."""
    lines = []
    for block in _blocks("bash"):
        lines += [" ".join(shlex.split(line, comments=True)) for line in block.splitlines()]
    return [line for line in lines if line]


def _all_shipped_steps(argv):
    """`--steps all` on the shipped series: every token that is not an option is some option's value."""
    values = [a for prev, a in zip(argv, argv[1:]) if not a.startswith("-") and prev.startswith("--")]
    return "--steps" in argv and argv[argv.index("--steps") + 1] == "all" and \
        values == [a for a in argv[1:] if not a.startswith("-")]


def _toy(argv):
    """argv with TOY options (and a 2-checkpoint --steps on the shipped series) in place of the README's."""
    toy = dict(TOY.get(argv[0], {}))
    sources = [a for a in argv[1:] if not a.startswith("-")]
    if argv[0] in TOY and (not sources or _all_shipped_steps(argv)) and "--steps-file" not in argv:
        toy["--steps"] = SHIPPED_TOY_STEPS
    if "--device" in argv and not torch.cuda.is_available():
        toy["--device"] = "cpu"   # the README's GPU line, run on this machine's CPU
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in toy:
            skip = True
        else:
            out.append(a)
    return out + [x for kv in toy.items() for x in kv]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """A working directory holding what the README's commands name: the shipped checkpoints,
    facebookresearch/DiT-style checkpoints, a bare state_dict, data.npz and steps.txt."""
    d = tmp_path_factory.mktemp("readme")
    (d / "checkpoints").symlink_to(ROOT / "checkpoints")
    ck = d / "results" / "000-DiT-S-2" / "checkpoints"
    ck.mkdir(parents=True)
    args = argparse.Namespace(model="DiT-S/2", image_size=256, num_classes=1, global_seed=0, vae="ema")
    sd = [facebook_dit_state_dict(1, 2, 24, 2, 3, learn_sigma=True, label_rows=2, seed=i) for i in range(3)]
    for i, step in enumerate((50000, 100000)):
        torch.save({"model": sd[i], "ema": sd[i], "opt": {}, "args": args}, ck / f"{step:07d}.pt")
    torch.save(sd[2], d / "sd_0020000.pt")
    shutil.copy(load_series().path / "dataset.npz", d / "data.npz")
    (d / "mine.py").write_text("import scoreprobe as sp\n\n\ndef make(step):   # the README's --denoiser example\n"
                               "    return sp.RuleDenoiser(sp.load_series().rule)\n")
    (d / "steps.txt").write_text("".join(f"{s} results/000-DiT-S-2/checkpoints/{s:07d}.pt\n" for s in (50000, 100000)))
    return d


def test_the_readme_starts_with_the_two_commands_and_ci_installs_the_same_torch():
    first, second = bash_lines()[:2]
    assert first == 'pip install torch==2.13.0 && pip install -e . && scoreprobe basins'
    assert second == 'pip install -e .[test] && python -m pytest'
    assert 'pip install -q -e ".[test,dask]"' in (ROOT / ".ci" / "run").read_text()
    assert "pip install -q torch==2.13.0" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("line", [line for line in bash_lines() if line.startswith("scoreprobe ")])
def test_every_command_line_runs(line, sandbox, monkeypatch, capsys):
    monkeypatch.chdir(sandbox)
    argv = _toy(shlex.split(line)[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # guessed steps and settings warn, as the README says
        try:
            main(argv)
            code = 0
        except SystemExit as e:
            code = e.code
    err = capsys.readouterr().err
    assert code in (0, None), f"{line}\n(run as {argv}) -> {err}"


def test_first_command_runs_from_the_install_line(sandbox, monkeypatch, capsys):
    """`scoreprobe basins`, the end of the install line, at toy size."""
    monkeypatch.chdir(sandbox)
    main(_toy(["basins", "--out", "first.zarr", "--no-animate"]))
    assert (sandbox / "first.zarr").is_dir()


def test_every_command_the_readme_names_exists():
    named = set(re.findall(r"`scoreprobe ([a-z][a-z-]*)", README))
    assert named and named <= set(cli.commands), named - set(cli.commands)


@pytest.mark.slow   # the README's tour verbatim: clocks of 7 checkpoints at 400 samples and a basin map (about a minute idle)
def test_the_tour_runs_as_written(tmp_path, monkeypatch):
    """The README's Python tour, verbatim (about a minute on 2 cores)."""
    (tour,) = _blocks("python")[:1]
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = {}
        exec(compile(tour, "README.md (tour)", "exec"), env)   # noqa: S102 -- our own README
    assert (tmp_path / "basins.gif").is_file() and env["clk"].sizes["step"] == 7
    assert float(env["rule"].is_valid(env["sp"].to_bits(env["x"])).mean()) == 1.0
    # what the tour prints is what its comment says: the window open, τ_rule and τ_mem as written
    a = env["clk"].attrs
    printed = re.search(r"# open (\d+) (\d+)", tour).groups()
    assert a["window_status"] == "open" and (round(a["tau_rule"]), round(a["tau_mem"])) == tuple(map(int, printed))
    assert os.path.getsize(tmp_path / "basins.gif") > 0


def test_bring_your_own_denoiser_runs_as_written(tmp_path, monkeypatch):
    """The README's five lines: the user's data read with their rule, a denoiser, the clocks in a store."""
    import scoreprobe as sp
    (block,) = [b for b in _blocks("python") if "sp.Dataset(" in b]
    assert len(block.strip().splitlines()) == 5
    monkeypatch.chdir(tmp_path)
    ref = sp.make_dataset(sp.Parity(G=2, shape=(6, 6), layout="offset"), n_train=16, n_heldout=16, seed=0)
    ref.save(tmp_path / "data.npz")                                   # the bits and their rule
    env = {}
    exec(compile(block, "README.md (bring your own denoiser)", "exec"), env)   # noqa: S102 -- our own README
    assert env["clk"].sizes["step"] == 1 and float(env["clk"].mem_ratio[0]) == 1.0   # the memorizer copies
    assert sp.written_steps(tmp_path / "mine.zarr") == [1000]
    exec(compile(block, "README.md (bring your own denoiser)", "exec"), env)   # a rerun resumes the same model
    assert env["data"].rule == ref.rule
