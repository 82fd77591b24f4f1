"""`trust` means True (issue 33, section 4): every public entry point that takes `trust` accepts only a
real bool; "false", "False", 0, 1, None are one ConfigError before any file is read or any code runs."""
import pickle

import pytest

from scoreprobe.errors import ConfigError
from scoreprobe.loading.formats import read_file
from scoreprobe.loading.series import CheckpointSeries, describe_checkpoint, load_checkpoint, load_series, series_from_files
from scoreprobe.loading.sources import open_source
from scoreprobe.loading.usercode import denoiser_series, load_callable

SHIPPED = load_series()
NOT_BOOLS = ["false", "False", "true", 0, 1, None, [], "0"]


class CreatesFile:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


@pytest.fixture
def hostile(tmp_path):
    """A module file and a pickle whose code would create tmp_path / MARKER."""
    (tmp_path / "evil.py").write_text(f"open({str(tmp_path / 'MARKER')!r}, 'w')\ndef make():\n    return lambda x, s: x\n")
    (tmp_path / "evil.pt").write_bytes(pickle.dumps({"ema": CreatesFile(tmp_path / "MARKER")}))
    return tmp_path


def _entry_points(d):
    ckpt = SHIPPED.checkpoint_path(SHIPPED.steps[-1])
    return {
        "load_checkpoint": lambda t: load_checkpoint(d / "evil.pt", trust=t),
        "describe_checkpoint": lambda t: describe_checkpoint(d / "evil.pt", trust=t),
        "read_file": lambda t: read_file(d / "evil.pt", trust=t),
        "series_from_files": lambda t: series_from_files([d / "evil.pt"], [1], SHIPPED.dataset, trust=t),
        "open_source": lambda t: open_source([d / "evil.pt"], dataset=SHIPPED.dataset, trust=t),
        "CheckpointSeries": lambda t: CheckpointSeries(None, {1: ckpt}, SHIPPED.dataset, trust=t),
        "load_callable": lambda t: load_callable(f"{d / 'evil.py'}:make", trust=t),
        "denoiser_series": lambda t: denoiser_series(f"{d / 'evil.py'}:make", SHIPPED.dataset, trust=t),
    }


@pytest.mark.parametrize("entry", ["load_checkpoint", "describe_checkpoint", "read_file", "series_from_files",
                                   "open_source", "CheckpointSeries", "load_callable", "denoiser_series"])
@pytest.mark.parametrize("value", NOT_BOOLS, ids=repr)
def test_trust_that_is_not_a_bool_is_refused_before_any_code_runs(hostile, entry, value):
    call = _entry_points(hostile)[entry]
    with pytest.raises(ConfigError, match=r"trust must be True or False"):
        call(value)
    assert not (hostile / "MARKER").exists()


def test_trust_false_refuses_user_code_and_true_runs_it(hostile):
    with pytest.raises(ConfigError, match="--trust"):
        denoiser_series(f"{hostile / 'evil.py'}:make", SHIPPED.dataset, trust=False)
    assert not (hostile / "MARKER").exists()
    series = denoiser_series(f"{hostile / 'evil.py'}:make", SHIPPED.dataset, trust=True)
    assert (hostile / "MARKER").exists() and series.steps == [0]
