"""Issue 54, part B (the GPT–DiT match): the md states which sampler each model's clocks were read with, from the
exports themselves, and where a GPT order is ahead of the DiT per training FLOP, with its value and interval."""
import importlib
import json
from pathlib import Path

import pytest


RESULTS = Path(__file__).resolve().parents[1] / "analyses" / "results"


@pytest.mark.parametrize("config, text", [
    ({"sampler": {"name": "heun"}, "n_steps": 32}, "heun, 32 steps"),
    ({"sampler": {"name": "ancestral", "temperature": 1.0}, "n_steps": None}, "ancestral, temperature 1"),
    ({"sampler": {"name": "edm-stochastic", "s_churn": 40.0}, "n_steps": 32}, "edm-stochastic, 32 steps, s_churn 40"),
    ({}, "unknown"),
])
def test_the_sampler_of_an_export(config, text):
    assert importlib.import_module("analyses.gpt_dit_match.model_match").sampler_of(config) == text


def test_the_md_names_the_samplers_of_the_exports():
    rep = json.loads((RESULTS / "gpt_dit_match_cpu.json").read_text())
    md = (RESULTS / "gpt_dit_match_cpu.md").read_text()
    info = importlib.import_module("scoreprobe.studies.export").read_export(RESULTS / "gpt_dit_match_cpu" / "dit-lr0.001-g2-n120-s0.npz")
    assert info["clocks_config"]["sampler"]["name"] == "heun"          # the DiT: the PF-ODE (Heun), not ancestral
    by = {}
    for r in rep["runs"]:
        by.setdefault(r["match_model"], set()).add(r["sampler"])
    assert by["dit"] == {"heun, 32 steps"} and all(v == {"ancestral, temperature 1"} for m, v in by.items() if m != "dit")
    line = next(line for line in md.splitlines() if line.startswith("**Samplers**"))
    assert "DiT: heun, 32 steps" in line and "GPT raster order: ancestral, temperature 1" in line
    assert "not read with one sampler" in line


def test_the_raster_gpt_ahead_per_flop_is_stated_with_its_interval():
    rep = json.loads((RESULTS / "gpt_dit_match_cpu.json").read_text())
    md = (RESULTS / "gpt_dit_match_cpu.md").read_text()
    curve = rep["versus_dit"]["gpt-raster"]["tau_rule"]["flop"]
    ahead = [r for r in curve if r.get("value") is not None and not r.get("censored") and r["ci"][1] < 1]
    assert [r["threshold"] for r in ahead] == [0.4]
    r = ahead[0]
    line = next(line for line in md.splitlines() if line.startswith("- Per FLOP, GPT raster order earlier than the DiT (τ_rule"))
    assert f"0.4: {r['value']:.2f} [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]" in line and "CI includes 1 at 0.5–0.85" in line
