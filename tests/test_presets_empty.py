"""Every study on the scaling machinery regenerates its tables from an empty results folder (nothing exported
yet): every planned run is listed as not done, and nothing is trained."""
import pytest

from tests.test_analyses import _analysis

STUDIES = [("data_draws.run", ["--smoke"]), ("sudoku_transpose.run", ["--smoke"]), ("gpt_dit_match.run", ["--smoke"]),
           ("exactk_ladder.run", ["--smoke"]), ("sampler_scaling.run", ["--smoke"]),
           ("remedies.g3_run", ["--preset", "g3-smoke"]), ("capacity_exponent.run", ["--smoke"])]


@pytest.mark.parametrize("module,argv", STUDIES, ids=[m.split(".")[0] for m, _ in STUDIES])
def test_from_results_with_nothing_exported(tmp_path, module, argv, capsys):
    _analysis(module).main(argv + ["--out", str(tmp_path), "--from-results"])
    md = [p for p in tmp_path.glob("*.md")]
    assert len(md) == 1 and "no export yet" in md[0].read_text()
    assert not (tmp_path / "two_clocks").exists() and not (tmp_path / "scaling").exists()   # nothing trained
