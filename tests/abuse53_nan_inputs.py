"""Issue 53, item 1's inputs (tests/abuse53_undefined.py): a tiny parity dataset with its oracles, denoisers that
return NaN (everywhere, at one σ, for some rows) or a constant, and a training run whose last checkpoint diverged."""
import functools
import math
import shutil
import warnings
from pathlib import Path

import torch

from abuse_corpus import CFG
from abuse_issue53 import scratch


@functools.lru_cache(maxsize=None)
def data():
    """(rule, dataset, memorizer, rule oracle): 4x4 parity with groups of 2, 12 training items."""
    from scoreprobe.data.datasets import make_dataset
    from scoreprobe.data.rules import Parity
    from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
    rule = Parity(G=2, shape=(4, 4), layout="contiguous")
    ds = make_dataset(rule, n_train=12, n_heldout=8, seed=0)
    return rule, ds, EmpiricalDenoiser(ds.train), RuleDenoiser(rule)


def nan_everywhere(x, sigma):
    """A diverged denoiser: NaN for every input. (B, D), (B,) -> (B, D)."""
    return torch.full_like(x, float("nan"))


def constant(x, sigma):
    """An untrained-looking denoiser: the same output for every input (r² is 0/0)."""
    return torch.zeros_like(x)


def nan_at(denoiser, low=0.4, high=0.6):
    """`denoiser` except NaN for the rows whose σ lies in (low, high)."""
    def D(x, sigma):
        out = denoiser(x, sigma)
        bad = (sigma > low) & (sigma < high)
        return torch.where(bad[:, None], torch.full_like(out, float("nan")), out)
    return D


def nan_rows(denoiser):
    """`denoiser` except NaN for the rows whose first coordinate is positive (some rows only)."""
    def D(x, sigma):
        out = denoiser(x, sigma)
        return torch.where((x[:, 0] > 0)[:, None], torch.full_like(out, float("nan")), out)
    return D


def recorded(call):
    """(result, [warning messages]) of call() with every warning recorded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [f"{w.category.__name__}: {w.message}" for w in caught]


def _cache():
    return scratch("abuse53-undefined-")


@functools.lru_cache(maxsize=None)
def _diverged_template():
    """A tiny training run (checkpoints 0, 1, 12) whose last checkpoint's weights are all NaN."""
    from scoreprobe.training.train import TrainConfig, train_run
    torch.set_num_threads(1)
    path = _cache() / "diverged"
    train_run(TrainConfig(**CFG), path, progress=False)
    ckpt = sorted((path / "ckpt").glob("*.pt"))[-1]
    state = torch.load(ckpt, weights_only=True)
    for key in ("model", "ema"):
        state[key] = {k: torch.full_like(v, math.nan) if v.is_floating_point() else v for k, v in state[key].items()}
    torch.save(state, ckpt)
    return path


def diverged_run(work):
    """A copy of the run whose last checkpoint (step 12) is diverged (NaN weights), in `work`."""
    dst = Path(work) / "run"
    if not dst.exists():
        shutil.copytree(_diverged_template(), dst)
    return dst
