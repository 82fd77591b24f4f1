"""analyses/two_clocks --smoke: the whole pipeline (train in parallel-ready runs, clocks with CIs,
tables, figures) end to end at toy size."""
import importlib
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

ANALYSES = Path(__file__).resolve().parents[1] / "analyses"


def _analysis(name):
    """Import a study's module: "scaling" -> analyses.scaling.run, "scaling.export" -> scoreprobe.studies.export."""
    import importlib
    root = str(ANALYSES.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    return importlib.import_module(f"analyses.{name if '.' in name else name + '.run'}")


@pytest.mark.slow   # trains the study's three smoke runs end to end
def test_two_clocks_smoke(tmp_path, capsys):
    two_clocks = _analysis("two_clocks")
    two_clocks.main(["--smoke", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "two_clocks_smoke.json").read_text())
    runs = {r["run"] for r in report["runs"]}
    assert runs == {"g2-n8", "g3-n8", "g2-n16"}
    for r in report["runs"]:
        assert {"tau_rule", "tau_rule_ci", "tau_mem_ci", "window_intervals", "under_resolved"} <= set(r)
        assert (tmp_path / f"two_clocks_smoke_{r['run']}.png").stat().st_size > 0
    assert (tmp_path / "two_clocks_smoke.png").stat().st_size > 0
    assert "| g3-n8 | 3 | 8 |" in capsys.readouterr().out
    two_clocks.main(["--smoke", "--out", str(tmp_path)])  # rerun: training and clocks are reused
    rerun = json.loads((tmp_path / "two_clocks_smoke.json").read_text())["runs"]
    timing = ("train_s", "clocks_s")
    assert [{k: v for k, v in r.items() if k not in timing} for r in rerun] == \
        [{k: v for k, v in r.items() if k not in timing} for r in report["runs"]]


@pytest.mark.slow   # trains three remedy variants and a G = 6 pair end to end
def test_remedies_smoke(tmp_path, capsys):
    remedies = _analysis("remedies")
    remedies.main(["--smoke", "--out", str(tmp_path), "--jobs", "1", "--variants", "baseline,curriculum,all"])
    report = json.loads((tmp_path / "remedies_smoke.json").read_text())
    assert [r["run"] for r in report["runs"]] == ["baseline-s0", "curriculum-s0", "all-s0"]
    params = {r["variant"]: r["params"] for r in report["runs"]}
    assert params["curriculum"] == params["baseline"] < params["all"]   # the register adds parameters
    assert json.loads((tmp_path / "curriculum-s0" / "run.json").read_text())["config"]["curriculum"] == "2:4:7"
    assert (tmp_path / "remedies_smoke.png").stat().st_size > 0 and "| curriculum | 0 |" in capsys.readouterr().out
    remedies.main(["--smoke", "--G", "6", "--curriculum-g", "6", "--out", str(tmp_path / "g6"), "--jobs", "1",
                   "--variants", "baseline,curriculum"])
    assert "curriculum: left out — --curriculum-g 6 must be > 1 and < G = 6" in (tmp_path / "g6" / "remedies_smoke.md").read_text()


@pytest.mark.slow   # trains 4 runs as a stacked ensemble end to end
def test_two_clocks_smoke_with_seeds_as_ensembles(tmp_path, caplog):
    """--ensemble (the GPU preset's default) trains the runs of one length as one stacked ensemble."""
    two_clocks = _analysis("two_clocks")
    with caplog.at_level("INFO", logger="grid"):
        two_clocks.main(["--smoke", "--out", str(tmp_path), "--ensemble", "--seeds", "0,1", "--Ns", "8", "--Gs", "2,3"])
    assert any("ensemble of 4 runs (30 steps)" in r.getMessage() for r in caplog.records)
    report = json.loads((tmp_path / "two_clocks_smoke.json").read_text())
    assert [r["run"] for r in report["runs"]] == ["g2-n8", "g2-n8-s1", "g3-n8", "g3-n8-s1"]
    assert [r["seed"] for r in report["runs"]] == [0, 1, 0, 1]
    configs = [json.loads((tmp_path / r["run"] / "run.json").read_text())["config"] for r in report["runs"]]
    assert [c["seed"] for c in configs] == [0, 1, 0, 1] and len({c["total_steps"] for c in configs}) == 1
    assert set(report["tau_rule_vs_G"]) <= {"G3/G2 (seed 0)", "G3/G2 (seed 1)"}


@pytest.mark.slow   # trains the closed-window series and measures every store of both series: the study's own unit tests stay in the default suite
def test_mechanism_smoke(tmp_path, capsys):
    """analyses/mechanism --smoke: both series (the shipped one, a tiny closed-window run trained here),
    every store, the report and the figures; a rerun reuses every store and gives the same numbers."""
    mechanism = _analysis("mechanism")
    mechanism.main(["--smoke", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "mechanism_smoke.json").read_text())
    assert set(report["series"]) == {"open", "closed"}
    shipped = report["series"]["open"]
    assert shipped["taus"]["tau_mem"] > shipped["taus"]["tau_rule"] > 0 and len(shipped["steps"]) == 3
    assert {"symmetric/local", "train_heldout/local", "random_valid/local", "symmetric/reach"} <= set(shipped["basins"])
    units = shipped["units"]                           # 2 seeds × 2 symmetric planes drawn, one plane twice
    assert units["trained_models"] == 1 and units["symmetric/local"] == {"distinct_planes": 3, "clusters": 3, "drawn": 4}
    assert shipped["symmetric_hamming"] == {"2": 3} and units["dsm_pairs"] == 6 and units["dsm_noise_seeds"] == 2
    cur = shipped["basins"]["train_heldout/local"]["1.0"]
    shares = sum(cur[q]["mean"][-1] for q in ("training", "heldout", "novel", "violating", "invalid"))
    assert abs(shares - 1) < 1e-9 and cur["training"]["n_units"] == units["train_heldout/local"]["distinct_planes"]
    assert {"held-out captured although nearer its own item (σ 1)", "training − held-out basin (symmetric planes)"} <= \
        set(shipped["half_change"])
    assert shipped["dsm"]["method"] == "holm over steps × σ" and len(shipped["dsm"]["z"]) == 3
    assert len(shipped["dsm"]["holm"]["significant_sigma"]) == 3 and "bh" in shipped["dsm"]
    assert report["series"]["closed"]["taus"]["window_open"] is False
    for name in ("basins.png", "retention.png", "dsm.png", "open_basins.gif"):
        assert (tmp_path / f"mechanism_smoke_{name}").stat().st_size > 0
    assert "## Half-change steps vs the clocks: open" in capsys.readouterr().out
    stores = sorted(p.name for p in (tmp_path / "open").glob("*.zarr"))
    mechanism.main(["--smoke", "--out", str(tmp_path)])      # rerun: every store reused, same numbers
    again = json.loads((tmp_path / "mechanism_smoke.json").read_text())
    assert again["series"] == report["series"] and sorted(p.name for p in (tmp_path / "open").glob("*.zarr")) == stores


def test_sampler_clocks_smoke(tmp_path, capsys):
    """analyses/sampler_clocks at toy size on two shipped checkpoints: a row per sampler, paired with Heun."""
    sampler_clocks = _analysis("sampler_clocks")
    sampler_clocks.main(["--only", "heun,ddim,edm-churn40", "--heun-check", "all", "--n-samples", "8", "--steps",
                         "0,36000", "--stores", str(tmp_path / "stores"), "--results", str(tmp_path)])
    report = json.loads((tmp_path / "sampler_clocks.json").read_text())
    rows = {r["label"]: r for r in report["rows"]}
    assert set(rows) == {"heun", "ddim", "edm-churn40"} and report["steps"] == [0, 36000]
    assert rows["edm-churn40"]["sampler"] == {"name": "edm-stochastic", "s_churn": 40.0, "s_noise": 1.0,
                                              "s_tmin": 0.0, "s_tmax": None}
    assert all(len(r["final_state"]) == 8 and {"tau_rule_ci", "tau_mem_ci"} <= set(r) for r in rows.values())
    out = capsys.readouterr().out
    assert "| Heun PF-ODE (default) |" in out and "| DDIM η = 0 (= Euler PF-ODE) |" in out
    assert (tmp_path / "sampler_clocks.md").read_text().strip() in out


@pytest.mark.slow
def test_scaling_smoke_then_from_results(tmp_path):
    """analyses/scaling --smoke end to end (train, clocks, exports, tables, figures), then --from-results with
    the run directories deleted: the exports alone regenerate the same tables."""
    scaling, export = _analysis("scaling"), importlib.import_module("scoreprobe.studies.export")
    scaling.main(["--smoke", "--out", str(tmp_path)])
    md, js = (tmp_path / "scaling_smoke.md").read_text(), (tmp_path / "scaling_smoke.json").read_text()
    planned = [r.name for r in _analysis("scaling.grid").plan("smoke")]
    exports = sorted(p.stem for p in (tmp_path / "scaling_smoke").glob("*.npz"))
    assert exports == sorted(planned) and "Not done: none." in md
    assert all(p.stat().st_size < 100_000 for p in (tmp_path / "scaling_smoke").glob("*.npz"))
    from scoreprobe.loading.series import load_series
    from scoreprobe.stats.clocks import clocks
    for name, folder in (("g2-n8", "two_clocks"), ("sudoku4-n8-s0", "scaling")):   # the export = the clocks store
        run = tmp_path / folder / name
        ds = clocks(load_series(run), n_samples=32, n_steps=6, out=run / "clocks.zarr", progress=False)
        small = export.read_export(tmp_path / "scaling_smoke" / f"{name}.npz")["ds"]
        assert (small.state.values == ds.state.values).all() and (small.step.values == ds.step.values).all()
        assert np.allclose(small.rule_acc.values, ds.rule_acc.values) and np.allclose(small.mem_ratio, ds.mem_ratio)
    assert (small.family_valid.values == ds.family_valid.values).all()
    gpt, dit = (load_series(tmp_path / f / n) for f, n in (("scaling", "gpt-patch-g2-n8-s0"), ("two_clocks", "g2-n8")))
    assert gpt.kind == "gpt" and np.array_equal(gpt.dataset.train, dit.dataset.train)   # the GPT on the DiT's data
    for p in ("two_clocks", "scaling", "scaling_smoke.md", "scaling_smoke.json", "scaling_smoke.png"):
        shutil.rmtree(tmp_path / p) if (tmp_path / p).is_dir() else (tmp_path / p).unlink()
    scaling.main(["--smoke", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "scaling_smoke.md").read_text() == md and (tmp_path / "scaling_smoke.json").read_text() == js
    assert (tmp_path / "scaling_smoke.png").stat().st_size > 0


def test_load_exports_reads_matching_exports_and_names_why_the_others_are_not(tmp_path):
    """A shipped export under its run's name loads; the same file under a run with another TrainConfig is
    'its export is from other settings'; a run without a file is 'no export yet'."""
    import dataclasses
    from types import SimpleNamespace
    grid, export = _analysis("scaling.grid"), importlib.import_module("scoreprobe.studies.export")
    run = next(r for r in grid.plan("cpu") if r.name == "g2-n30")
    shutil.copy(ANALYSES / "results" / "scaling_cpu" / "g2-n30.npz", tmp_path / "g2-n30.npz")
    shutil.copy(tmp_path / "g2-n30.npz", tmp_path / "other.npz")
    other = SimpleNamespace(name="other", cfg=dataclasses.replace(run.cfg, lr=run.cfg.lr * 2))
    absent = SimpleNamespace(name="absent", cfg=run.cfg)
    done, missing = export.load_exports([run, other, absent], tmp_path)
    assert set(done) == {"g2-n30"} and int(done["g2-n30"]["ds"].sizes["sample"]) > 0
    assert missing == {"other": "its export is from other settings", "absent": "no export yet"}


def test_scaling_cpu_preset_plan(tmp_path):
    """The CPU preset fits its stated budget at the measured one-thread rates, reuses two_clocks' runs (same
    names, same TrainConfig as `two_clocks.py --seeds 0,1,2`), and trains the N and G axes' first two seeds
    first, then one seed of every other configuration; every configuration has three seeds."""
    grid, two_clocks = _analysis("scaling.grid"), _analysis("two_clocks")
    runs = grid.plan("cpu")
    b = grid.budget(runs, jobs=2)
    assert b["wall_h"] <= 1.05 * grid.CPU_BUDGET_H and b["steps"] == sum(r.cfg.total_steps for r in runs)
    by_name = {r.name: r for r in runs}
    args = two_clocks.parse_args(["--seeds", "0,1,2", "--results", str(tmp_path), "--device", "cpu"])
    for G, N, seed in [(2, 240, 1), (3, 240, 2), (2, 30, 0)]:
        assert by_name[two_clocks.run_name(G, N, seed)].cfg == two_clocks.train_config(args, G, N, seed)
    assert len(by_name) == len(runs) and {r.seed for r in runs} == {0, 1, 2}
    seeds_of = {}
    for r in runs:
        seeds_of.setdefault(r.group, set()).add(r.seed)
    assert all(s == {0, 1, 2} for s in seeds_of.values()), seeds_of   # three seeds of every configuration
    core = [(2, 30), (2, 60), (2, 120), (2, 240), (3, 120), (3, 240), (4, 240)]   # the N and G axes
    first = {two_clocks.run_name(G, N, s) for G, N in core for s in (0, 1)}
    assert {r.name for r in runs[:len(first)]} == first
    others = {r.group for r in runs} - {two_clocks.run_name(G, N, 0) for G, N in core}
    second = runs[len(first):len(first) + len(others)]          # then one seed of every other configuration
    assert {r.group for r in second} == others and {r.seed for r in second} == {0}


@pytest.mark.parametrize("study", ["scaling", "sudoku_transpose"])
def test_run_estimates_match_the_times_the_shipped_exports_recorded(study):
    """run_seconds against train_s + clocks_s of every shipped export of the CPU preset (each one-thread run
    beside a second, some beside a test suite too: up to ≈ 1.6×): the median ratio per kind (DiT / GPT × puzzle /
    bits) lies within 0.6–1.8, so `--hours` and `--plan` neither skip runs that fit nor promise ones that do not
    by the factors seen before (the 16-token GPT was estimated 3× too long: ratio 0.34)."""
    grid, run_seconds = _analysis(f"{study}.grid"), _analysis("scaling.grid").run_seconds
    read_export = importlib.import_module("scoreprobe.studies.export").read_export
    runs = {r.name: r for r in grid.plan("cpu")}
    folder = ANALYSES / "results" / f"{study}_cpu"
    ratios = {}
    for f in sorted(folder.glob("*.npz")):
        info = read_export(f)
        if f.stem not in runs or not all(math.isfinite(info[k] or math.nan) for k in ("train_s", "clocks_s")):
            continue
        r = runs[f.stem]
        kind = (r.meta["model"], r.meta["rule"] in ("sudoku", "latin"))
        ratios.setdefault(kind, []).append((info["train_s"] + info["clocks_s"]) / run_seconds(r))
    assert ratios, folder
    for kind, rs in ratios.items():
        assert 0.6 <= float(np.median(rs)) <= 1.8, (kind, rs)


def test_family_order_counts_an_unreached_family_at_the_last_step_as_a_bound():
    """A seed whose columns never reach 0.9 has rows first: its τ_rows / τ_columns is an upper bound at
    the last step (not 0), the pooled ratio is a bound in that direction, seeds censored both ways are
    'mixed', and a seed reaching neither family is left out of the ratio but not of the share."""
    stats = importlib.import_module("scoreprobe.stats.runs")
    inf = math.inf
    clocks = {"a": (100.0, 200.0), "b": (400.0, inf), "c": (inf, 250.0), "d": (inf, inf)}
    draws = {k: {"tau_family:rows": (r, np.full(50, r)), "tau_family:columns": (c, np.full(50, c))}
             for k, (r, c) in clocks.items()}
    rows = lambda names: [{"run": k, "steps": 1000, "seed": i} for i, k in enumerate(names)]
    ab = stats.family_order(rows("ab"), draws)
    assert ab["per_seed"] == [0.5, 0.4] and ab["per_seed_bound"] == ["", "<"] and ab["bound"] == "<"
    assert ab["pooled"] == pytest.approx(math.sqrt(0.5 * 0.4)) and ab["share_first"] == 1.0
    assert ab["ci"][0] == 0.0 and ab["ci"][1] == pytest.approx(0.5)   # replicates of b alone: rows first, 0
    abcd = stats.family_order(rows("abcd"), draws)
    assert abcd["bound"] == "mixed" and abcd["n_reached"] == 3 and math.isnan(abcd["per_seed"][3])
    assert abcd["pooled"] == pytest.approx((0.5 * 0.4 * 4.0) ** (1 / 3))
    assert abcd["per_seed_share_first"] == [1.0, 1.0, 0.0, 0.5] and abcd["share_first"] == pytest.approx(0.625, abs=0.03)


def test_two_clocks_from_results_rewrites_the_shipped_page_with_the_current_readers(tmp_path):
    """--from-results on the shipped json (made before runs named their seed) gives the shipped md byte for byte,
    with the fit's lack-of-fit line: one run per N, so it says the interval assumes a straight line."""
    two_clocks = _analysis("two_clocks")
    shipped = ANALYSES / "results"
    shutil.copy(shipped / "two_clocks_cpu.json", tmp_path / "two_clocks_cpu.json")
    two_clocks.main(["--preset", "cpu", "--from-results", "--results", str(tmp_path)])
    md = (tmp_path / "two_clocks_cpu.md").read_text()
    assert md == (shipped / "two_clocks_cpu.md").read_text()
    assert "lack of fit not read (no replicate runs at any x): the interval above assumes ln τ_mem is linear" in md


def test_two_clocks_from_results_without_a_json_is_one_message(tmp_path, capsys):
    two_clocks = _analysis("two_clocks")
    with pytest.raises(SystemExit) as e:
        two_clocks.main(["--preset", "cpu", "--from-results", "--results", str(tmp_path)])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip() == f"two_clocks: error: --from-results: {tmp_path}/two_clocks_cpu.json is missing"
