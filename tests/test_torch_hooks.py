"""torch's own hooks on scoreprobe hook points (issue 78 item 1): a `register_forward_hook` /
`register_forward_pre_hook` on a hook point runs and changes the output exactly as `run_with_hooks` does
(before, HookPoint.__call__ skipped nn.Module's call machinery and the hook was silently never called); it
runs before the hooks scoreprobe installs for one call; nnsight's edits (it replaces each module's
`forward`) equal ours."""
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import scoreprobe as sp
from scoreprobe.inside.hooks import hook_points
from scoreprobe.models.gpt import GPT, GPTConfig
from tests.test_inside_patch import planted

ROOT = Path(__file__).resolve().parents[1]


def _x(n=4, seed=0):
    return torch.randn(n, 36, generator=torch.Generator().manual_seed(seed))


def _zero_head(a, head=1):
    a = a.clone()
    a[:, head] = 0
    return a


@pytest.mark.parametrize("name", ["blocks.0.attn.hook_z", "blocks.1.attn.hook_pattern", "blocks.2.hook_mlp_out",
                                  "final.hook_scale"])
def test_a_torch_forward_hook_changes_the_output_as_run_with_hooks_does(shipped, name):
    D, _ = shipped
    x, point = _x(), hook_points(D.net)[name]
    with torch.no_grad():
        base = D(x, 0.7)
    ours = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[(name, lambda a, n: _zero_head(a))])
    handle = point.register_forward_hook(lambda m, inp, out: _zero_head(out))
    try:
        with torch.no_grad():
            theirs = D(x, 0.7)
    finally:
        handle.remove()
    assert not torch.equal(ours, base)
    assert torch.equal(theirs, ours)
    with torch.no_grad():
        assert torch.equal(D(x, 0.7), base)                 # removed: the idle path again, bit for bit


def test_a_torch_pre_hook_and_a_reading_hook(shipped):
    D, _ = shipped
    x = _x()
    point = hook_points(D.net)["blocks.0.hook_resid_mid"]
    ours = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("blocks.0.hook_resid_mid", lambda a, n: a * 0.5)])
    handle = point.register_forward_pre_hook(lambda m, args: (args[0] * 0.5,))
    with torch.no_grad():
        theirs = D(x, 0.7)
    handle.remove()
    assert torch.equal(theirs, ours)
    seen = []
    handle = hook_points(D.net)["blocks.1.attn.hook_pattern"].register_forward_hook(
        lambda m, inp, out: seen.append(out.shape))          # reads only: the fused attention stays
    with torch.no_grad():
        out = D(x, 0.7)
    handle.remove()
    assert len(seen) == 1 and seen[0][0] == 4 and seen[0][-1] == seen[0][-2]      # (B, head, query, key)
    with torch.no_grad():
        assert torch.equal(out, D(x, 0.7))


def test_torch_hooks_run_first_and_the_cache_reads_what_they_left(shipped):
    D, _ = shipped
    x = _x()
    name = "blocks.0.attn.hook_z"
    handle = hook_points(D.net)[name].register_forward_hook(lambda m, inp, out: _zero_head(out, 0))
    try:
        both = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[(name, lambda a, n: _zero_head(a, 1))])
        _, cache = sp.run_with_cache(D, x, 0.7, names=name, return_type="dict")
    finally:
        handle.remove()
    ref = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[(name, lambda a, n: _zero_head(_zero_head(a, 0), 1))])
    assert torch.equal(both, ref)
    assert float(cache[name][:, 0].abs().max()) == 0.0 and float(cache[name][:, 1].abs().max()) > 0


def test_a_global_module_hook_sees_every_hook_point(shipped):
    D, _ = shipped
    seen = []
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda m, inp, out: seen.append(m) if isinstance(m, type(hook_points(D.net)["hook_embed"])) else None)
    try:
        with torch.no_grad():
            D(_x(), 0.7)
    finally:
        handle.remove()
    called = {id(m) for m in seen}
    assert all(id(p) in called for n, p in hook_points(D.net).items()
               if not n.endswith(("hook_attn_scores", "hook_pattern", "hook_result", "hook_scale")))


def test_a_torch_hook_on_the_planted_head_ablates_the_circuit():
    D = planted()
    x = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    ours = sp.run_with_hooks(D, x, 1.0, fwd_hooks=[("blocks.0.attn.hook_pattern", lambda a, n: _zero_head(a, 0))])
    handle = hook_points(D.net)["blocks.0.attn.hook_pattern"].register_forward_hook(
        lambda m, inp, out: _zero_head(out, 0))
    with torch.no_grad():
        theirs = D(x, 1.0)
    handle.remove()
    with torch.no_grad():
        base = D(x, 1.0)
    assert torch.equal(theirs, ours) and abs(float(theirs[0, 0] - base[0, 0])) > 0.1


def test_a_torch_hook_on_a_gpt_hook_point():
    torch.manual_seed(0)
    g = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16)).eval()
    bits = torch.randint(0, 2, (3, 36), generator=torch.Generator().manual_seed(1))
    name = "blocks.1.hook_mlp_out"
    ours = sp.run_with_hooks(g, bits, None, fwd_hooks=[(name, lambda a, n: a * 0)])
    handle = hook_points(g)[name].register_forward_hook(lambda m, inp, out: out * 0)
    theirs = sp.run_with_hooks(g, bits, None)
    handle.remove()
    assert torch.equal(theirs, ours) and not torch.equal(ours, sp.run_with_hooks(g, bits, None))


NNSIGHT_SCRIPT = """
import torch, scoreprobe as sp
from nnsight import NNsight
from scoreprobe.models.gpt import GPT, GPTConfig
D = sp.load_series().denoiser(36000).eval()
x = torch.randn(4, 36, generator=torch.Generator().manual_seed(0)); s = torch.full((4,), 0.7)
def zero1(a, name=None):
    a = a.clone(); a[:, 1] = 0; return a
ours = sp.run_with_hooks(D, x, s, fwd_hooks=[("blocks.0.attn.hook_z", zero1)])
m = NNsight(D)
with torch.no_grad(), m.trace(x, s):
    m.net.blocks[0].attn.hook_z.output[:, 1] = 0
    z = m.net.blocks[1].attn.hook_z.output.save()
    out = m.output.save()
with sp.hooks(D, fwd_hooks=[("blocks.0.attn.hook_z", zero1)]):
    _, cache = sp.run_with_cache(D, x, s, names="blocks.1.attn.hook_z", return_type="dict")
assert torch.equal(z, cache["blocks.1.attn.hook_z"]), "nnsight's read differs from run_with_cache's"
assert not torch.equal(ours, D(x, s).detach())
assert torch.equal(out, ours), "nnsight edit differs from run_with_hooks"
torch.manual_seed(0)
g = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16)).eval()
bits = torch.randint(0, 2, (3, 36), generator=torch.Generator().manual_seed(1))
ours = sp.run_with_hooks(g, bits, None, fwd_hooks=[("blocks.1.hook_mlp_out", lambda a, n: a * 0)])
from scoreprobe.inside.cache import gpt_inputs
mg = NNsight(g)
with torch.no_grad(), mg.trace(gpt_inputs(g, bits)):
    mg.transformer.h[1].hook_mlp_out.output[:] = 0
    logits = mg.output.save()
assert torch.equal(logits, ours), "nnsight GPT edit differs from run_with_hooks"
print("OK")
"""


@pytest.mark.slow
def test_nnsight_traces_the_dit_and_the_gpt_and_its_edit_equals_run_with_hooks():
    """In a fresh interpreter: importing nnsight patches torch and `object` process-wide (nnsight/__init__.py)."""
    if importlib.util.find_spec("nnsight") is None:
        pytest.skip("nnsight is not installed (pip install 'scoreprobe[nnsight]')")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(NNSIGHT_SCRIPT)], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stderr[-2000:]
