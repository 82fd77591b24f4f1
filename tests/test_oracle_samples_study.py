"""analyses/oracle_samples: the md regenerates byte-identically from the shipped json; one model gives no interval."""
import json
import shutil
from pathlib import Path

from tests.test_analyses import _analysis

RESULTS = Path(__file__).resolve().parents[1] / "analyses" / "results"


def test_from_results_is_byte_identical(tmp_path):
    shutil.copy(RESULTS / "oracle_samples.json", tmp_path / "oracle_samples.json")
    assert _analysis("oracle_samples").main(["--from-results", "--results", str(tmp_path)]) == 0
    assert (tmp_path / "oracle_samples.md").read_text() == (RESULTS / "oracle_samples.md").read_text()


def test_one_model_has_no_interval_over_models():
    study = _analysis("oracle_samples")
    res = json.loads((RESULTS / "oracle_samples.json").read_text())
    first = next(iter(res["models"]))
    one = dict(res, models={first: res["models"][first]})
    md = study.markdown(one)
    assert "One model: no interval over models" in md and "[" not in md.split("## share")[1].split("##")[0]
