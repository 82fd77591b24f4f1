"""analyses/sudoku_transpose and the transpose transform: a transposed Sudoku is a Sudoku and its families map rows
<-> columns (checked against loop-by-loop references), the transposed runs train on exactly the transposed grids,
the preset reuses the scaling runs, the architecture / data split recovers planted effects, and the smoke preset
runs end to end and regenerates byte-identically from its exports."""
import importlib
import json
import math

import numpy as np
import pytest

from scoreprobe.data.datasets import load_dataset, make_dataset, transposed_dataset
from scoreprobe.data.rules import LatinSquare, Parity, Sudoku, grids_to_bits
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.training.config import TrainConfig
from scoreprobe.training.run_dir import init_run_dir
from tests.test_analyses import ANALYSES, _analysis
from tests.test_families import perturbed, reference

SWAP = {"rows": "columns", "columns": "rows", "boxes": "boxes", "cells": "cells"}


@pytest.mark.parametrize("rule", [Sudoku(4), LatinSquare(4)], ids=["sudoku4", "latin4"])
def test_a_transposed_grid_is_valid_and_the_map_is_the_matrix_transpose(rule):
    grids = rule._grids()                                                   # (n_valid, 4, 4) symbols
    bits = grids_to_bits(grids, 4)
    T = rule.transposed(bits)
    assert np.array_equal(T, grids_to_bits(grids.transpose(0, 2, 1), 4))   # cell (r, c) holds grid[c, r]
    assert rule.is_valid(T).all() and np.array_equal(rule.transposed(T), bits)
    assert {t.tobytes() for t in T} == {b.tobytes() for b in bits}          # a bijection of the valid set
    assert (T != bits).any(axis=1).sum() > len(bits) // 2                   # not the identity
    g = np.array([[0, 1, 2, 3], [2, 3, 0, 1], [1, 0, 3, 2], [3, 2, 1, 0]])   # by hand: row 0 becomes column 0
    assert np.array_equal(rule.transposed(grids_to_bits(g[None], 4)), grids_to_bits(g.T[None], 4))


@pytest.mark.parametrize("rule", [Sudoku(4), LatinSquare(4)], ids=["sudoku4", "latin4"])
def test_families_of_a_transposed_grid_swap_rows_and_columns(rule):
    """On valid, random and perturbed patterns: family f of the transposed pattern (loop-by-loop reference) is
    family SWAP[f] of the pattern."""
    rng = np.random.default_rng(1)
    rows_only = grids_to_bits(rng.random((200, 4, 4)).argsort(axis=2), 4)     # every row a permutation
    bits = np.concatenate([perturbed(rule, rng, 200), rows_only])
    names = rule.family_names
    got, ref = rule.family_valid(rule.transposed(bits)), rule.family_valid(bits)
    assert np.array_equal(got, ref[:, [names.index(SWAP[f]) for f in names]])
    by_loop = np.array([[reference(x, 4, rule.name == "sudoku")[f] for f in names] for x in rule.transposed(bits)])
    assert np.array_equal(got, by_loop)
    r, c = names.index("rows"), names.index("columns")
    assert (ref[:, r] & ~ref[:, c]).sum() > 100 and (got[:, c] & ~got[:, r]).sum() > 100   # the two differ


def test_a_transposed_run_trains_on_the_transposed_draw(tmp_path):
    """init_run_dir with transpose=True writes the draw of make_dataset (same data seed) with every training and
    held-out grid transposed; transpose is refused for rules whose valid set it does not keep."""
    cfg = dict(rule={"name": "sudoku", "n": 4}, n_train=12, n_heldout=20, data_seed=3, total_steps=10)
    plain = make_dataset(Sudoku(4), 12, 20, seed=3)
    ds = init_run_dir(TrainConfig(**cfg, transpose=True), tmp_path / "t")
    stored = load_dataset(tmp_path / "t" / "dataset.npz", Sudoku(4))
    for got in (ds, stored):
        assert np.array_equal(got.train, Sudoku(4).transposed(plain.train))
        assert np.array_equal(got.heldout, Sudoku(4).transposed(plain.heldout))
    assert np.array_equal(init_run_dir(TrainConfig(**cfg), tmp_path / "o").train, plain.train)
    with pytest.raises(ConfigError, match="transpose"):
        TrainConfig(transpose=True).validate()                              # parity
    with pytest.raises(ConfigError):
        TrainConfig(**cfg, transpose="yes").validate()
    with pytest.raises(DataError):
        transposed_dataset(make_dataset(Parity(2, shape=(4, 4)), 4, 4, seed=0))


def test_the_plan_reuses_the_scaling_runs_and_pairs_the_orientations():
    grid = _analysis("sudoku_transpose.grid")
    plan = grid.plan("cpu")
    scaling = {r.name: r for r in _analysis("scaling.grid").plan("cpu", ("puzzles",))}
    reused = [r for r in plan if r.folder == "scaling"]
    assert len(plan) == 54 == len({r.name for r in plan}) and len(reused) == 3
    for r in reused:
        assert r.cfg == scaling[r.name].cfg and r.meta["arch"] == "dit" and not r.cfg.transpose
    exports = importlib.import_module("scoreprobe.studies.export")
    done, _ = exports.load_exports(reused, grid.export_folder(ANALYSES / "results", "cpu", reused[0]))
    assert sorted(done) == sorted(r.name for r in reused)                   # the shipped exports match exactly
    key = lambda r: (r.meta["arch"], r.meta["data_seed"], r.seed)           # noqa: E731
    pairs = {}
    for r in plan:
        assert (r.cfg.data_seed, r.cfg.seed, r.cfg.transpose) == (r.meta["data_seed"], r.seed, r.meta["transposed"])
        pairs.setdefault(key(r), {})[r.cfg.transpose] = r.cfg
    assert len(pairs) == 27
    for (arch, _, _), both in pairs.items():
        assert both[True] == TrainConfig(**{**both[False].to_dict(), "transpose": True})
        assert (both[False].patch_shape == "1x4") == (arch == "dit-rows")
        assert (both[False].model, both[False].token_order) == (("gpt", "raster") if arch == "gpt-raster" else
                                                               ("dit", "raster"))


def _rows(a, delta, noise, steps=7500, T=10):
    """Rows and curves with planted ln(τ_rows / τ_columns) = a + δ_d + e (original) and a − δ_d + e' (transposed)
    at every threshold; noise(o, d, s) -> e."""
    rows, curves = [], {}
    for o in (False, True):
        for d, dd in enumerate(delta):
            for s in range(3):
                name = f"{'T' if o else 'o'}-d{d}-s{s}"
                lr = a + (-dd if o else dd) + noise(o, d, s)
                rows.append({"run": name, "seed": s, "steps": steps,
                             "meta": {"data_seed": d, "transposed": o, "arch": "dit"}})
                curves[name] = {"tau_family:rows": np.full(T, 1000 * math.exp(lr)),
                                "tau_family:columns": np.full(T, 1000.0)}
    return [r for r in rows if not r["meta"]["transposed"]], [r for r in rows if r["meta"]["transposed"]], curves


def _sym(o, d, s):
    """Init-seed noise, equal and opposite in the two orientations (its mean is 0 within every data seed)."""
    return (-1 if o else 1) * 0.04 * (s - 1)


def test_the_split_recovers_a_planted_data_preference():
    S, tables = importlib.import_module("analyses.sudoku_transpose.transpose_split"), importlib.import_module("analyses.sudoku_transpose.transpose_split_md")
    delta = [-0.8, 0.0, 0.3]
    ro, rt, curves = _rows(0.0, delta, _sym)
    two = S.family_ratio_curve(ro, curves)[0]
    assert "two-level" in two["units"] and math.isclose(two["value"], math.exp(np.mean(delta)), rel_tol=1e-9)
    assert math.isclose(two["var_data"], np.var(delta, ddof=1), rel_tol=1e-9)
    kept, by_seed = S.architecture_part(ro, rt, curves), S.data_part_by_seed(ro, rt, curves)
    # every pair's kept part is exactly 1 here (the init noise cancels within a pair): a zero-width interval at 1
    assert math.isclose(kept[0]["value"], 1.0, rel_tol=1e-9) and kept[0]["ci"][0] <= 1 + 1e-12
    assert kept[0]["ci"][1] >= 1 - 1e-12 and "two-level" in kept[0]["units"]
    for d, dd in enumerate(delta):
        assert math.isclose(by_seed[d][0]["value"], math.exp(dd), rel_tol=1e-9)
    assert by_seed[0][0]["ci"][1] < 1 < by_seed[2][0]["ci"][0] and by_seed[1][0]["ci"][0] < 1 < by_seed[1][0]["ci"][1]
    text = tables.decision(kept, by_seed)
    assert text == ("data preference (reversed by transposition): the grids' rows first at data seed(s) 0; "
                    "the grids' columns first at data seed(s) 2")


def test_the_split_recovers_a_planted_architecture_preference():
    S, tables = importlib.import_module("analyses.sudoku_transpose.transpose_split"), importlib.import_module("analyses.sudoku_transpose.transpose_split_md")
    ro, rt, curves = _rows(-0.5, [0.0, 0.0, 0.0], lambda o, d, s: 0.03 * ((s + d) % 3 - 1) * (1 if o else -1))
    kept, by_seed = S.architecture_part(ro, rt, curves), S.data_part_by_seed(ro, rt, curves)
    assert math.isclose(kept[0]["value"], math.exp(-0.5), rel_tol=1e-9) and kept[0]["ci"][1] < 1
    assert all(c[0]["ci"][0] < 1 < c[0]["ci"][1] for c in by_seed.values())
    assert tables.decision(kept, by_seed) == "architecture preference (kept by transposition): image rows first"
    ratio_t = S.family_ratio_curve(rt, curves)
    assert ratio_t[0]["ci"][1] < 1                                          # kept: image rows first on both
    curves[rt[4]["run"]]["tau_family:columns"][9] = np.inf                   # one run never reaches 0.95 in columns
    assert S.family_ratio_curve(rt, curves)[9]["censored"] and S.architecture_part(ro, rt, curves)[9]["censored"]
    assert not S.architecture_part(ro, rt, curves)[8]["censored"]


@pytest.mark.slow   # trains both orientations' smoke runs end to end: the study's own unit tests stay in the default suite
def test_smoke_then_from_results(tmp_path):
    run = _analysis("sudoku_transpose.run")
    run.main(["--smoke", "--out", str(tmp_path)])
    md, js = (tmp_path / "sudoku_transpose_smoke.md").read_text(), (tmp_path / "sudoku_transpose_smoke.json").read_text()
    plan = _analysis("sudoku_transpose.grid").plan("smoke")
    ours = sorted(r.name for r in plan if r.folder != "scaling")
    assert sorted(p.stem for p in (tmp_path / "sudoku_transpose_smoke").glob("*.npz")) == ours
    assert [p.stem for p in (tmp_path / "scaling_smoke").glob("*.npz")] == ["sudoku4-n8-s0"]
    assert f"{len(plan)} of {len(plan)} planned runs done" in md and "image coordinates" in md
    assert set(json.loads(js)["archs"]) == {"dit", "dit-rows", "gpt-raster"}
    plain = load_dataset(tmp_path / "scaling" / "sudoku4-n8-s0" / "dataset.npz")
    for name in ("sudoku4-T-n8-d0-s0", "sudoku4-rowpatch-T-n8-d0-s0", "sudoku4-gpt-raster-T-n8-d0-s0"):
        t = load_dataset(tmp_path / "sudoku_transpose" / name / "dataset.npz")
        assert np.array_equal(t.train, Sudoku(4).transposed(plain.train))
        assert np.array_equal(t.heldout, Sudoku(4).transposed(plain.heldout))
    arch = json.loads((tmp_path / "sudoku_transpose" / "sudoku4-rowpatch-n8-d0-s0" / "run.json").read_text())["arch"]
    assert arch["net"]["patch_size"] == [1, 4]
    run.main(["--smoke", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "sudoku_transpose_smoke.md").read_text() == md
    assert (tmp_path / "sudoku_transpose_smoke.json").read_text() == js


def test_bad_arguments_exit_2_before_any_work(tmp_path):
    run = _analysis("sudoku_transpose.run")
    for argv in (["--jobs", "0"], ["--hours", "-1"], ["--preset", "huge"]):
        with pytest.raises(SystemExit) as e:
            run.main(argv + ["--out", str(tmp_path)])
        assert e.value.code == 2
    assert not any(tmp_path.iterdir())
