"""Cost of the hook points (issue #37): forward of the DiT / GPT with hook points installed but idle,
against the same modules before hook points existed (their source at git commit BEFORE, imported from
`git show`), same weights, same inputs. Single calls of the two alternate; the ratio is that of their
median call times. Also: the idle hook calls of one forward timed directly, over the plain forward;
run_with_cache reading every hook point.

    PYTHONPATH=$PWD python bench/bench_hooks.py [--rounds 15] [--reps 20] [--batches 1,64,512]

The A/A column times the old module against a copy of itself: the noise floor of the ratio here.
The "torch-aware" column (issue 78) times today's hook points, which look for torch hooks on every call so
that `register_forward_hook` runs, against the same network whose hook points skip that look (the fast path
before issue 78, `FastOnly` below), same weights and inputs, in the same run.
"""
import argparse
import copy
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

BEFORE = "fcb64e0"      # parent of the hook-point commit


def old_module(name):
    """scoreprobe.models.<name> as it was at BEFORE (a fresh module object)."""
    src = subprocess.run(["git", "show", f"{BEFORE}:scoreprobe/models/{name}.py"], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[1]).stdout
    path = Path(tempfile.mkdtemp()) / f"old_{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"old_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fast_only(net):
    """A copy of `net` whose hook points take the pre-issue-78 path: fn or identity, no look for torch hooks."""
    from scoreprobe.models.hookpoint import HookPoint

    class FastOnly(HookPoint):
        def __call__(self, x):
            fn = self.fn
            return x if fn is None else fn(x)

        @property
        def active(self):
            return self.fn is not None

    net = copy.deepcopy(net)
    for m in net.modules():
        if type(m) is HookPoint:
            m.__class__ = FastOnly
    return net


def timed(fn, reps):
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


def ratio(new, old, rounds, reps):
    """Alternate single calls of `old` and `new` (in random order) rounds·reps times; the ratio of their
    median call times (medians shrug off the load spikes of a shared machine), and the medians (ms)."""
    tn, to = [], []
    rng = random.Random(0)
    for _ in range(rounds * reps):
        for fn, out in rng.sample([(old, to), (new, tn)], 2):         # random order: no first-call bias
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    mn, mo = statistics.median(tn), statistics.median(to)
    return mn / mo, 1e3 * mn, 1e3 * mo


def hook_call_cost(net, reps=2000):
    """Seconds that the idle hook points of one forward cost: one attribute access and call per hook
    point (the attention's pattern hook is an attribute test; counted as a call), timed directly."""
    from scoreprobe.inside.hooks import hook_points
    n = len(hook_points(net))
    owner = net.blocks[0] if hasattr(net, "blocks") else net.transformer.h[0]
    x = torch.zeros(1)

    def calls():
        for _ in range(n):
            owner.hook_resid_pre(x)
    return timed(calls, reps), n


def look_cost(net, net_fast, plain, a):
    """What looking for torch hooks adds to one forward, timed directly: the idle hook calls of `net` minus those
    of its fast-only copy, over the plain forward (median over rounds)."""
    return statistics.median((hook_call_cost(net)[0] - hook_call_cost(net_fast)[0]) / timed(plain, a.reps)
                             for _ in range(a.rounds))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--batches", type=lambda t: [int(v) for v in t.split(",")], default=[1, 64, 512])
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    import scoreprobe as sp
    from scoreprobe.models.gpt import GPT, GPTConfig
    series = sp.load_series()
    D = series.denoiser(series.steps[-1]).eval()
    old_dit = old_module("dit")
    net_old = old_dit.DiT(**series.arch["net"])
    net_old.load_state_dict(D.net.state_dict())
    net_old.eval()
    from scoreprobe.models.dit import DiT
    net_new = DiT(**series.arch["net"])               # built like the old one: only the module code differs
    net_new.load_state_dict(D.net.state_dict())
    net_new.eval()
    old_gpt = old_module("gpt")
    torch.manual_seed(0)
    g_new = GPT(GPTConfig()).eval()
    g_old = old_gpt.GPT(old_gpt.GPTConfig()).eval()
    g_old.load_state_dict(g_new.state_dict())
    print(f"torch {torch.__version__}, 1 thread; DiT {sum(p.numel() for p in D.net.parameters())} params "
          f"(the shipped series), GPT tiny; {a.rounds * a.reps} alternating calls each; ratio of median call times")
    net_old2 = copy.deepcopy(net_old)
    g_old2 = copy.deepcopy(g_old)
    net_fast, g_fast = fast_only(net_new), fast_only(g_new)
    print("| model | batch | plain (before hooks) ms | hooks idle ms | idle / plain | A/A control (plain / plain copy) "
          "| idle hook calls / plain (timed directly) | run_with_cache ms | cache / plain | torch-aware / fast-only "
          "| the torch-hook look, timed directly / plain |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with torch.no_grad():
        for B in a.batches:
            x = torch.randn(B, 1, 6, 6)
            t = torch.full((B,), 0.3)
            for _ in range(10):                                # warm-up: allocator, first-call paths
                net_new(x, t), net_old(x, t), net_old2(x, t)
            r, tn, to = ratio(lambda: net_new(x, t), lambda: net_old(x, t), a.rounds, a.reps)
            aa, _, _ = ratio(lambda: net_old2(x, t), lambda: net_old(x, t), a.rounds, a.reps)
            xf, s = x.reshape(B, 36), torch.full((B,), 0.7)
            rc, tc, _ = ratio(lambda: sp.run_with_cache(D, xf, s), lambda: net_old(x, t), max(3, a.rounds // 3),
                              max(2, a.reps // 4))
            direct = statistics.median(hook_call_cost(D.net)[0] / timed(lambda: net_old(x, t), a.reps)
                                       for _ in range(a.rounds))
            tf, _, _ = ratio(lambda: net_new(x, t), lambda: net_fast(x, t), a.rounds, a.reps)
            look = look_cost(D.net, net_fast, lambda: net_old(x, t), a)
            print(f"| DiT | {B} | {to:.3f} | {tn:.3f} | {r:.3f} | {aa:.3f} | {direct:.4f} | {tc:.3f} | {rc:.2f} "
                  f"| {tf:.3f} | {look:.4f} |", flush=True)
        for B in a.batches:
            idx = torch.randint(0, 3, (B, 36))
            for _ in range(10):
                g_new(idx), g_old(idx), g_old2(idx)
            r, tn, to = ratio(lambda: g_new(idx), lambda: g_old(idx), a.rounds, a.reps)
            aa, _, _ = ratio(lambda: g_old2(idx), lambda: g_old(idx), a.rounds, a.reps)
            direct = statistics.median(hook_call_cost(g_new)[0] / timed(lambda: g_old(idx), a.reps)
                                       for _ in range(a.rounds))
            tf, _, _ = ratio(lambda: g_new(idx), lambda: g_fast(idx), a.rounds, a.reps)
            look = look_cost(g_new, g_fast, lambda: g_old(idx), a)
            print(f"| GPT | {B} | {to:.3f} | {tn:.3f} | {r:.3f} | {aa:.3f} | {direct:.4f} | – | – | {tf:.3f} "
                  f"| {look:.4f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
