"""The report's features section (reports.features_section): each given SAE's best latents with their
top-activating inputs, every name escaped; a folder that cannot be shown is named with the reason, never a crash."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.reports.features_section import features_body, features_payload
from scoreprobe.reports.render import _sections

pytest.importorskip("safetensors")

HOSTILE = '<script>alert("x")</script>'


def _record(**kw):
    return dict(folder=f"saes/{HOSTILE}", site=f"blocks.0.{HOSTILE}", step=36000, sigma=0.7, n_rows=8, d_sae=4,
                arch="topk", explained_variance=0.5, l0=1.0, dead=0, coverage=0, n_defined=3, by="parity groups",
                latents=[(2, f"group0=odd{HOSTILE}", 0.25, 3)], png="iVBORw0KGgo=", **kw)


def test_the_section_escapes_every_name_from_a_file():
    records = [_record(), dict(folder=HOSTILE, problem=f"CheckpointError: {HOSTILE} holds no SAE")]
    text = str(features_body(records))
    assert "<script>" not in text and text.count("&lt;script&gt;") == 5
    assert "latent" in text and "0.25" in text and "data:image/png;base64,iVBORw0KGgo=" in text
    page = "".join(str(p) for p in _sections({"features": records}, {}, [], []))
    assert '<section id="features">' in page and "<script>" not in page
    assert '<section id="features">' not in "".join(str(p) for p in _sections({}, {}, [], []))   # no SAEs: none


def test_a_folder_without_an_sae_or_without_its_step_and_sigma_is_named_with_the_reason(tmp_path):
    sae = sp.train_sae(np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32), 8, k=2, steps=5,
                       progress=False)                            # rows of a tensor: no step, no σ recorded
    sp.save_sae(sae, tmp_path / "bare")
    (tmp_path / "empty").mkdir()
    got = features_payload(None, [tmp_path / "empty", tmp_path / "bare"])
    assert [sorted(r) for r in got] == [["folder", "problem"]] * 2
    assert got[0]["problem"].startswith("CheckpointError") and "records no site" in got[1]["problem"]


def test_the_shipped_series_shows_an_saes_best_latents_with_their_top_inputs(tmp_path):
    series = sp.load_series()
    clean = np.concatenate([series.dataset.train, series.dataset.heldout])[:32]
    x = torch.as_tensor(sp.to_signed(clean), dtype=torch.float32) + 0.7 * sp.randn_per_sample(0, np.arange(32), 36)
    site = "blocks.3.hook_resid_post"
    _, cache = sp.run_with_cache(series.denoiser(36000), x, 0.7, names=[site])
    sae = sp.train_sae(cache, 16, site=site, k=2, steps=10, progress=False)
    sae.config.update(step=36000, sigma=0.7)            # as train_sae records it for one cell of a cache_series store
    sp.save_sae(sae, tmp_path / "s")
    (r,) = features_payload(series, [tmp_path / "s"], n_rows=32, n_best=2, k_top=3)
    assert (r["site"], r["step"], r["sigma"], r["n_rows"], r["by"]) == (site, 36000, 0.7, 32, "parity groups")
    scores = sp.sae_scores(sp.load_sae(tmp_path / "s"), cache, sp.rule_features(
        series.rule, sp.to_bits(x).numpy(), clean=clean, train=series.dataset.train), site=site)
    lat, feat, f1 = sp.best_latents(scores, 2, prefix="group")
    assert [(a, b) for a, b, _, _ in r["latents"]] == list(zip(lat.tolist(), feat.tolist()))
    assert r["explained_variance"] == float(scores.explained_variance) and len(r["png"]) > 100


def test_the_regenerate_command_names_the_sae_folders(tmp_path):
    import shlex
    from scoreprobe.reports import command_line, make_plan
    plan = make_plan(sp.load_series(), tmp_path / "r.html", steps=[36000], sections=("clocks",))
    folder = tmp_path / "saes" / "a b"
    args = shlex.split(command_line(plan, None, [folder]))
    assert args[args.index("--sae") + 1] == str(folder) and args.count("--sae") == 1
    assert "--sae" not in command_line(plan)
