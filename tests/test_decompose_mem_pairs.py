"""analyses/decompose's pairs past τ_mem (section 3b) from a json alone, and its --only stage selector."""
import copy
import functools
import json
from pathlib import Path

import pytest

from tests.test_analyses import _analysis

ROOT = Path(__file__).resolve().parents[1]


def _with_mem_pairs():
    return copy.deepcopy(_planted())


@functools.lru_cache(maxsize=1)
def _planted():
    """The shipped json with its N = 120 pairs posing as a pairs_mem stage in which member n120-r0-b memorizes at
    step 2000 (a planted clock: the md must place each measured step against it)."""
    _analysis("decompose")
    res = json.loads((ROOT / "analyses" / "results" / "decompose.json").read_text())
    res.pop("summary", None)
    mem = copy.deepcopy(res["pairs"])
    mem["by_n"] = {"8": mem["by_n"]["120"]}
    mem["by_n"]["8"]["clocks"]["n120-r0-b"]["tau_mem"] = 2000.0
    res["pairs_mem"] = mem
    res["params"] = dict(res["params"], mem_pairs=dict(pair_Ns=[8], pair_steps=7000, pair_checkpoints=10,
                                                       pair_first=300, pair_measure_at=[1000, 3500, 7000]))
    return res


def test_section_3b_reads_each_step_against_the_members_clocks():
    from analyses.decompose.write import markdown, summaries
    res = _with_mem_pairs()
    s = summaries(res)
    md = markdown(res, s, "")
    assert "## 3b. Disjoint training sets across the memorization boundary" in md
    sec = md[md.index("## 3b."):]
    assert "τ_mem reached by n120-r0-b" in sec
    assert "(0 of 7 members past their τ_rule, 0 of 7 past their τ_mem)" in sec       # step 1025 < 2000
    assert "1 of 7 past their τ_mem)" in sec                                           # step 3500 > 2000
    floor = s["pairs_mem"]["by_n"]["8"]["floor"]["cosine"][5][0]                        # σ = 1
    assert f"{floor:.2f}" in md[md.index("An earlier version"):md.index("## 3b.")]     # the floor, not a claim
    assert "two memorizers already agree strongly there — was wrong" in md


def test_without_pairs_mem_there_is_no_section_3b():
    from analyses.decompose.write import markdown, summaries
    res = _with_mem_pairs()
    res.pop("pairs_mem")
    md = markdown(res, summaries(res), "")
    assert "## 3b." not in md and "they are not measured in this json" in md


def test_only_refuses_an_unknown_stage(capsys):
    run = __import__("analyses.decompose.run", fromlist=["parse_args"])
    with pytest.raises(SystemExit) as e:
        run.parse_args(["--only", "pairs_mem,bogus"])
    assert e.value.code == 2 and "bogus" in capsys.readouterr().err
    assert run.wanted(run.parse_args(["--only", "pairs_mem"])) == {"pairs_mem"}
    assert run.wanted(run.parse_args(["--pairs-only"])) >= {"pairs", "pairs_mem"}


def test_with_clocks_keeps_the_stored_tau_of_a_model_whose_clocks_are_not_here(tmp_path):
    """A merge run (--only) on a machine without a model's run directory keeps the τ its json holds; a
    clocks.json that is here is read."""
    from analyses.decompose.stages import with_clocks
    m = {"models": ["seed0", "seed1"], "taus": {"seed0": {"tau_rule": 1.0}, "seed1": {"tau_rule": 2.0}}}
    (tmp_path / "checkpoints" / "parity-default").mkdir(parents=True)
    (tmp_path / "checkpoints" / "parity-default" / "clocks.json").write_text(json.dumps({"taus": {"tau_rule": 7.0}}))
    got = with_clocks(m, tmp_path, "open")["taus"]
    assert got["seed0"]["tau_rule"] == 7.0 and got["seed1"] == {"tau_rule": 2.0}


def test_section_3c_with_one_pair_and_no_same_data_member_keeps_its_table_rectangular():
    from analyses.decompose.write import markdown, summaries
    res = _with_mem_pairs()
    long = copy.deepcopy(res["pairs"])
    long["by_n"] = {"120": long["by_n"]["120"]}
    rec = long["by_n"]["120"]
    rec["replicates"] = {"0": {k: v for k, v in rec["replicates"]["0"].items() if k != "same_data"}}
    rec["clocks"] = {k: v for k, v in rec["clocks"].items() if k in ("n120-r0-a", "n120-r0-b")}
    res["pairs_long"] = long
    res["params"] = dict(res["params"], long_pairs=[dict(pair_Ns=[120], pair_replicates=1, pair_same_data=[],
                                                         pair_steps=7000, pair_checkpoints=10, pair_first=300,
                                                         pair_measure_at=[1000, 3500, 7000])])
    md = markdown(res, summaries(res), "")
    sec = md[md.index("## 3c."):]
    assert "N = 120: 1 disjoint pair, no same-data member, 7000 steps" in sec
    assert "(0 of 2 members past their τ_rule" in sec or "of 2 members past their τ_rule" in sec
    lines = sec.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("| measure |")]
    assert len(heads) == 3                                              # one agreement table per measured step
    for i in heads:
        table = lines[i:lines.index("", i)]
        assert len(table) > 3 and all(line.count("|") == 5 for line in table)   # 4 columns, none empty
        assert not any("| |" in line or "|  |" in line for line in table)
    assert "decompose_disjoint_long.png" in sec


def test_train_member_refuses_an_unknown_member_with_exit_2(capsys):
    study = _analysis("decompose")
    assert study.main(["--train-member", "n7-r9-z"]) == 2
    assert "no long-pairs member 'n7-r9-z'" in capsys.readouterr().err
