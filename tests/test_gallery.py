"""viz/gallery.py and `scoreprobe samples`: pixel grids with states, copied items, outlined groups, puzzle symbols.

Ground truth: planted samples (a violated group tints exactly its cells), brute-force group borders, the training
item a copy names is bit-identical to it, and the gallery's samples are the first samples of `clocks`."""
import numpy as np
import pytest

import scoreprobe as sp
from scoreprobe.cli import main
from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.data.grids import grids_to_bits
from scoreprobe.data.rules import Parity, Sudoku
from scoreprobe.errors import ConfigError
from scoreprobe.viz.gallery import group_cells, outline_ids, plot_gallery


def _tinted(ax):
    return sorted((int(p.get_y() + 0.5), int(p.get_x() + 0.5)) for p in ax.patches)


def _brute_borders(ids):
    H, W = ids.shape
    return sum(ids[r, c] != ids[r, c + 1] for r in range(H) for c in range(W - 1)) + \
        sum(ids[r, c] != ids[r + 1, c] for r in range(H - 1) for c in range(W))


@pytest.mark.parametrize("layout", ["contiguous", "random"])
def test_a_violated_parity_group_tints_exactly_its_cells(layout):
    rule = Parity(3, shape=(3, 4), layout=layout, seed=2)
    good = rule.sample(2, seed=0)
    bad = good.copy()
    g = 1
    bad[1, rule.groups[g][0]] ^= 1                       # one bit of group g flipped: that group alone is odd
    fig = plot_gallery(bad, rule, state=np.array([STATE_CODES["valid_novel"], STATE_CODES["rule_violating"]]))
    ax0, ax1 = fig.axes[:2]
    assert _tinted(ax0) == []
    want = sorted(zip(*(a.tolist() for a in np.divmod(rule.groups[g], 4))))
    assert _tinted(ax1) == want
    ids = outline_ids(rule)
    assert sorted(ids.ravel().tolist()) == sorted(np.repeat(np.arange(rule.n_groups), 3).tolist())
    drawn = [line for line in ax1.get_lines() if line.get_color() == "#ff7f0e"]
    assert len(drawn) == _brute_borders(ids)
    assert ax1.get_title() == "violating" and ax0.get_title() == "novel"
    np.testing.assert_array_equal(ax1.get_images()[0].get_array(), bad[1].reshape(3, 4))


def test_sudoku_is_drawn_as_symbols_with_its_boxes_outlined():
    rule = Sudoku(4)
    grid = np.array([[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]]) - 1
    bits = grids_to_bits(grid[None], 4)
    assert rule.is_valid(bits).all()
    broken = bits.copy().reshape(1, 4, 4, 4)
    broken[0, :, 0, 0] = 0                                # cell (0, 0) empty: its row, column and box fail
    fig = plot_gallery(np.concatenate([bits, broken.reshape(1, -1)]), rule)
    ax0, ax1 = fig.axes[:2]
    texts = sorted(((round(t.get_position()[1]), round(t.get_position()[0])), t.get_text()) for t in ax0.texts)
    assert [t for _, t in texts] == [str(v + 1) for v in grid.ravel()]
    assert "·" in [t.get_text() for t in ax1.texts]
    assert _tinted(ax0) == []
    # row 0, column 0 and box 0 violated: their cells, with repeats (a cell in two groups is tinted twice)
    cells = group_cells(rule)
    violated = np.flatnonzero(~rule.group_valid(broken.reshape(1, -1))[0])
    assert sorted(violated.tolist()) == [0, 4, 8]
    assert _tinted(ax1) == sorted((int(r), int(c)) for g in violated for r, c in zip(*cells[g]))
    assert len([l for l in ax0.get_lines() if l.get_color() == "#ff7f0e"]) == _brute_borders(outline_ids(rule)) == 8


def test_copies_name_the_training_item_they_equal():
    rule = Parity(2, shape=(3, 4))
    data = sp.make_dataset(rule, 12, 12, seed=0)
    ds = sp.clocks({0: sp.EmpiricalDenoiser(data.train)}, dataset=data, rule=rule, n_samples=16, keep_bits=True,
                   progress=False).isel(step=0)
    bits = ds["bits"].values
    index = data.train_index.lookup(bits)
    assert (ds["state"].values == STATE_CODES["valid_memorized"]).all() and (index >= 0).all()
    fig = plot_gallery(bits, rule, ds["state"].values, index, labels=range(16))
    for i, ax in enumerate(fig.axes[:16]):
        k = int(ax.get_title().rsplit("#", 1)[1])
        assert ax.get_title().startswith(f"{i}: copy of #") and np.array_equal(data.train[k], bits[i])


def test_bad_bits_are_config_errors():
    rule = Parity(2, shape=(3, 4))
    for bad in (np.zeros((0, 12), np.uint8), np.zeros((2, 11), np.uint8)):
        with pytest.raises(ConfigError):
            plot_gallery(bad, rule)


def test_samples_command_draws_the_first_samples_of_clocks(tmp_path, capsys):
    from scoreprobe.probes.clocks import gallery_samples
    from scoreprobe.training.train import TrainConfig, train_run
    cfg = TrainConfig(rule={"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 0}, n_train=16,
                      n_heldout=16, hidden_size=32, depth=1, num_heads=2, batch_size=16, total_steps=8,
                      n_checkpoints=3, log_every=4, resume_every=7)
    run = train_run(cfg, tmp_path / "run", progress=False)
    series = sp.load_series(run)
    got = gallery_samples(series, 8, 12, seed=3, n_steps=6)
    want = sp.clocks(series, n_samples=40, seed=3, n_steps=6, steps=[8], keep_bits=True, progress=False)
    np.testing.assert_array_equal(got["state"], want["state"].values[0, :12])
    np.testing.assert_array_equal(got["bits"], want["bits"].values[0, :12])
    out = tmp_path / "g.png"
    main(["samples", str(run), "--step", "8", "--n-samples", "12", "--seed", "3", "--n-steps", "6", "--out", str(out)])
    text = capsys.readouterr().out
    assert out.read_bytes()[:4] == b"\x89PNG" and "12 samples of" in text and "at step 8 (seed 3)" in text
    with pytest.raises(SystemExit) as e:
        main(["samples", str(run), "--step", "5", "--out", str(out)])
    assert e.value.code == 2 and "not a checkpoint" in capsys.readouterr().err
