"""Issue 33's abuse corpus (tests/abuse_issue33.py): every attempt on `--denoiser` and `train` is clean --
the typed error for the stated reason within 2 s, one CLI line and exit 2, no code run, no file of the
work folder changed (no data lost) and none written before the refusal (no late refusal)."""
import shutil
import warnings

import pytest
import torch

import abuse_issue33
from abuse_corpus import CFG
from scoreprobe.training.train import TrainConfig, train_run

CASES = abuse_issue33.cases()


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("abuse33") / "good"
    train_run(TrainConfig(**CFG), path, progress=False)
    import scoreprobe.cli  # noqa: F401  imports before the first timed attempt
    import scoreprobe.stats.clocks  # noqa: F401
    return path


def test_the_corpus_covers_both_surfaces():
    surfaces = [s for _, s, _ in CASES]
    assert set(surfaces) == set(abuse_issue33.SURFACES) and min(map(surfaces.count, set(surfaces))) >= 15


@pytest.mark.parametrize("name,surface,build", CASES, ids=[c[0] for c in CASES])
def test_attempt_is_clean(name, surface, build, good_run, tmp_path):
    shutil.copytree(good_run, tmp_path / "run")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome, detail = abuse_issue33.run_case(build, tmp_path / "run", tmp_path)
    assert outcome == "clean", detail
    assert torch.get_num_threads() == 1
