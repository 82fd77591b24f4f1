"""Issue 56, items 3-7, from the user's side: the CLI run as the docs write it (in-process `main`).

3: extending a run keeps its clocks store resumable (only the new checkpoints are measured, the old
   numbers kept) and the extension's refusal lists only real conflicts;
4: `--plot` alone writes a default figure, `--plot FILE` a chosen one, `--plot RUN` is refused;
5: `export-tb RUN` finds the clocks that `clocks RUN` wrote, as one TensorBoard run;
6: `compare` names runs by their directory, stores what it measured (a rerun measures nothing),
   prints an undefined difference as NaN with its reason, and calls no bootstrap paired across models;
7: a GPT run: its report states no parameterization or basin map it has not, `basins` & co refuse it
   before printing anything, `plot-log` of a DiT and a GPT draws two losses on two axes.
"""
import json
import re
from pathlib import Path

import pytest

import scoreprobe as sp
import scoreprobe.probes.clocks as clocks_mod
from scoreprobe.cli import main

TINY = ["--rule", "exactk", "--k", "3", "--shape", "4x4", "--n-train", "16", "--n-heldout", "16", "--hidden-size", "32",
        "--depth", "1", "--num-heads", "2", "--batch-size", "16", "--n-checkpoints", "4", "--log-every", "5",
        "--threads", "1", "--device", "cpu"]
CLOCKS = ["--n-samples", "24", "--n-steps", "3", "--device", "cpu"]


def _cli(argv, capsys):
    """(exit code, stdout, stderr) of `scoreprobe ARGV` run in-process."""
    capsys.readouterr()
    try:
        main([str(a) for a in argv])
        code = 0
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _train(path, *extra, total=30):
    main(["-q", "train", str(path), *TINY, "--total-steps", str(total), *extra])
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two tiny runs trained by the CLI on one rule: a DiT and a GPT (4 checkpoints, 30 steps each)."""
    root = tmp_path_factory.mktemp("issue56")
    return _train(root / "dit"), _train(root / "gpt", "--model", "gpt")


@pytest.fixture
def evaluations(monkeypatch):
    """Counts the clock evaluations of checkpoints (one per checkpoint measured)."""
    calls = []
    real = clocks_mod.clock_step
    monkeypatch.setattr(clocks_mod, "clock_step", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


# ---------------------------------------------------------------------------------------------
# item 3: an extended run's store resumes
# ---------------------------------------------------------------------------------------------

def test_extending_a_run_keeps_its_clocks_store_resumable(tmp_path, monkeypatch, capsys, evaluations):
    monkeypatch.chdir(tmp_path)
    run = _train(tmp_path / "r1")
    code, out, err = _cli(["clocks", run, "--steps", "all", *CLOCKS], capsys)
    assert code == 0 and "wrote r1.clocks.zarr (4 steps)" in out, err
    before = sp.open_store(tmp_path / "r1.clocks.zarr").load()
    assert len(evaluations) == 4
    # the first try forgets the run's options: only the real conflicts are listed, not the larger total
    code, _, err = _cli(["train", run, "--rule", "exactk", "--k", "3", "--total-steps", "60", "--device", "cpu"],
                        capsys)
    listed = err.split("(", 1)[1].split(")")[0]
    assert code == 2 and "n_train: 16 in the run" in listed and "total_steps" not in listed, err
    assert "to extend it to 60 steps" in err
    _train(run, total=60)
    new = sorted(set(sp.load_series(run).steps) - set(before.step.values.tolist()))
    assert new and max(new) == 60
    evaluations.clear()
    code, out, err = _cli(["clocks", run, "--steps", "all", *CLOCKS], capsys)
    assert code == 0, err
    assert len(evaluations) == len(new)                        # only the new checkpoints are evaluated
    assert f"computed {len(new)} steps, reused 4 written by an earlier run" in out
    after = sp.open_store(tmp_path / "r1.clocks.zarr").load()
    old = after.sel(step=before.step.values)
    for var in ("state", "rule_acc", "mem_ratio"):             # the old numbers as they were
        assert (old[var].values == before[var].values).all(), var


# ---------------------------------------------------------------------------------------------
# item 4: --plot [FILE]
# ---------------------------------------------------------------------------------------------

def test_plot_alone_writes_a_default_figure_and_plot_file_a_chosen_one(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    dit, _ = runs
    code, out, err = _cli(["clocks", dit, "--steps", "0,30", *CLOCKS, "--plot"], capsys)
    assert code == 0 and "wrote dit.clocks.png" in out and (tmp_path / "dit.clocks.png").stat().st_size > 10_000, err
    code, out, err = _cli(["clocks", dit, "--steps", "0,30", *CLOCKS, "--plot", "mine.png"], capsys)
    assert code == 0 and (tmp_path / "mine.png").is_file(), err
    code, out, err = _cli(["clocks", dit, "--plot", "--steps", "0,30", *CLOCKS], capsys)   # a flag before options
    assert code == 0 and "wrote dit.clocks.png" in out, err
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = _cli(["clocks", "--plot", dit, *CLOCKS], capsys)   # the run taken for the file name: refused
    assert code == 2 and "is a folder, not a figure file" in err and "--plot alone" in err and err.count("\n") <= 2
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# ---------------------------------------------------------------------------------------------
# item 5: export-tb RUN finds its clocks
# ---------------------------------------------------------------------------------------------

def test_export_tb_of_a_run_holds_its_log_and_the_clocks_that_clocks_wrote(runs, tmp_path, monkeypatch, capsys):
    from scoreprobe.training.tensorboard import read_events
    monkeypatch.chdir(tmp_path)
    dit, _ = runs
    assert _cli(["clocks", dit, "--steps", "all", *CLOCKS], capsys)[0] == 0
    for argv, logdir in ((["export-tb", dit], "tb"), (["export-tb", dit, "dit.clocks.zarr"], "tb2")):
        code, out, err = _cli([*argv, "--logdir", logdir], capsys)
        assert code == 0 and "training log and clocks of dit.clocks.zarr" in out, err
        assert sorted(p.name for p in (tmp_path / logdir).iterdir()) == ["dit"]      # one TensorBoard run
        tags = set().union(*(e[2] for e in read_events(next((tmp_path / logdir / "dit").iterdir()))))
        assert {"train/loss", "clocks/rule_acc", "tau/tau_rule"} <= tags


# ---------------------------------------------------------------------------------------------
# item 6: compare
# ---------------------------------------------------------------------------------------------

def test_compare_names_runs_stores_what_it_measured_and_says_why_not_paired(runs, tmp_path, monkeypatch, capsys,
                                                                             evaluations):
    monkeypatch.chdir(tmp_path)
    dit, gpt = runs
    argv = ["compare", dit, gpt, "--n-samples", "24", "--n-boot", "50", "--device", "cpu"]
    code, out, err = _cli(argv, capsys)
    assert code == 0 and len(evaluations) == 8, err
    assert "wrote dit.clocks.zarr (4 steps)" in out and "wrote gpt.clocks.zarr (4 steps)" in out
    table = out.split("run ", 1)[1].splitlines()
    assert table[1].startswith("dit ") and table[2].startswith("gpt ")
    diff = next(line for line in out.splitlines() if line.startswith("gpt vs dit"))
    assert "paired" not in diff and "independent (model kind differs) bootstrap" in diff
    evaluations.clear()
    code, again, err = _cli(argv, capsys)                       # a rerun measures nothing
    assert code == 0 and evaluations == [] and "dit.clocks.zarr: all 4 steps were already written" in again
    code, stores, err = _cli(["compare", "dit.clocks.zarr", "gpt.clocks.zarr", "--n-boot", "50"], capsys)
    assert code == 0 and stores.splitlines()[1].startswith("dit ") and "clocks.zarr " not in stores, err
    code, _, err = _cli([*argv[:-4], "--n-samples", "30", "--device", "cpu"], capsys)   # other settings: one line
    assert code == 2 and "pass --n-samples 24 and --seed 0 to reuse it" in err and evaluations == []


def test_a_run_that_never_reaches_tau_rule_prints_nan_and_why(runs, tmp_path, monkeypatch, capsys):
    from scoreprobe.oracles import RuleDenoiser
    monkeypatch.chdir(tmp_path)
    dit, _ = runs
    assert _cli(["clocks", dit, "--steps", "all", *CLOCKS], capsys)[0] == 0
    series = sp.load_series(dit)        # the rule oracle at the same steps: it reaches τ_rule at once
    sp.clocks({s: RuleDenoiser(series.rule) for s in series.steps}, dataset=series.dataset, rule=series.rule,
              n_samples=200, n_steps=16, out=tmp_path / "oracle.zarr", progress=False)
    code, out, err = _cli(["compare", "dit.clocks.zarr", "oracle.zarr", "--n-boot", "50"], capsys)
    assert code == 0, err
    diff = next(line for line in out.splitlines() if line.startswith("oracle.zarr vs dit"))
    assert "τ_rule NaN (dit does not reach τ_rule)" in diff and "inf" not in diff, diff
    ds = sp.compare(["dit.clocks.zarr", "oracle.zarr"], n_boot=50)
    assert ds["d_log10_tau_rule_ci"].isnull().all()              # undefined, and so is its interval


def test_pairing_needs_the_same_rule_and_model_kind():
    from scoreprobe.stats.compare import read_export, unpaired_because
    base = read_export(Path(__file__).resolve().parents[1] / "analyses/results/scaling_cpu/g2-n120.npz")
    config = json.loads(base.attrs["scoreprobe_config"])
    other = base.copy()
    other.attrs["scoreprobe_config"] = json.dumps({**config, "data": {**config["data"], "rule": {"name": "exactk"}},
                                                   "source": {**config["source"], "kind": "gpt"}})
    assert unpaired_because(base, base) == [] and unpaired_because(other, base) == ["model kind", "rule"]


# ---------------------------------------------------------------------------------------------
# item 7: a GPT run
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["basins", "field", "dsm", "decompose", "circuits"])
def test_denoiser_commands_refuse_a_gpt_before_printing_anything(runs, command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = _cli([command, runs[1], "--device", "cpu"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, (out, err)
    assert err.startswith(f"error: {command} needs a diffusion model's denoiser") and "sampler(" not in err
    assert list(tmp_path.iterdir()) == []


def test_the_report_of_a_gpt_states_no_parameterization_or_basin_map(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = _cli(["report", runs[1], "--out", "g.html", "--device", "cpu"], capsys)
    assert code == 0, err
    page = (tmp_path / "g.html").read_text()
    assert "σ_data = None" not in page and "none: an autoregressive GPT" in page
    lede = re.search(r'<section id="gallery"><h2>[^<]*</h2><p class="lede">([^<]*)</p>', page).group(1)
    assert "basin map" not in lede and "samples of the clocks" in lede


def test_plot_log_of_a_dit_and_a_gpt_draws_two_losses_apart(runs, tmp_path, capsys):
    from scoreprobe.errors import ConfigError
    from scoreprobe.viz.trainlog import plot_train_logs
    code, out, err = _cli(["plot-log", *runs, "--out", tmp_path / "logs.png"], capsys)
    assert code == 0 and "2 panels" in out and (tmp_path / "logs.png").is_file(), err
    fig = plot_train_logs(list(runs))
    assert [ax.get_ylabel() for ax in fig.axes] == ["loss (EDM-weighted DSM)", "loss (next-token cross-entropy)"]
    with pytest.raises(ConfigError, match="different losses"):
        plot_train_logs(list(runs), ax=fig.axes[0])
