"""docs/studies.md (issue 57 item 4): the page's study script is at most 30 lines, and it runs. The test takes
the page's python block and replaces only its two lines marked `# sizes` with toy sizes (checked: every other
line is executed as the page has it), runs it as a script would (`__name__ == "__main__"`, jobs=2 worker
processes) in a temporary folder, and checks what it printed and wrote: the table of pooled τ_mem with its
intervals or bounds, one fitted exponent per width, the figure, the grid's exports. A second run trains
nothing."""
import re
import sys

import pytest
from doc_blocks import blocks

TOY = ['axes = {"N": [1, 2], "width": [16, 32], "seed": [0, 1]}',
       'size = dict(views=1600, min_steps=200, batch_size=16, depth=1, checkpoints=5, samples=16, lr=1e-2)']


def study_code():
    """The page's python block, its `# sizes` lines replaced by TOY; the lines it replaced."""
    (block,) = [b for b in blocks("docs/studies.md") if b.lang == "python"]
    lines = block.code.splitlines()
    assert len(lines) <= 30, f"the study is {len(lines)} lines"
    marked = [i for i, line in enumerate(lines) if line.rstrip().endswith("# sizes")]
    assert len(marked) == 2 and [lines[i].split(" = ")[0] for i in marked] == ["axes", "size"]
    for i, toy in zip(marked, TOY):
        lines[i] = toy
    return "\n".join(lines) + "\n", block


def _run(code, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["study.py"])
    exec(compile(code, "docs/studies.md", "exec"), {"__name__": "__main__"})   # noqa: S102 -- our own page
    return capsys.readouterr().out


@pytest.mark.slow   # trains the page's study at toy size (18 runs)
def test_the_pages_study_runs_at_toy_size(tmp_path, monkeypatch, capsys, request):
    code, block = study_code()
    kept = [line for line in block.code.splitlines() if not line.rstrip().endswith("# sizes")]
    assert [line for line in code.splitlines() if line not in TOY] == kept   # the rest is the page's, unchanged
    out = _run(code, tmp_path, monkeypatch, capsys)
    if request.config.getoption("capture") == "no":   # shown with -s
        with capsys.disabled():
            sys.stderr.write("\n--- the study printed ---\n" + out)
    lines = out.splitlines()
    assert lines[0] == "8 runs done now, 0 before, 0 failed (logged)"
    assert lines[1] == "tau_mem in steps (rows: N, columns: width)"
    assert re.fullmatch(r"width\s+16\s+32", lines[2].strip()) and lines[3].strip() == "N"
    cell = r"(\d+ \[\d+, \d+\]|> \d+ \(\d of 2 reached\)|under-resolved)"
    for row, n in zip(lines[4:6], (1, 2)):
        assert re.fullmatch(rf"{n}\s+{cell}\s+{cell}", row.strip()), row
    num, out_ = r"-?\d+\.\d\d", r"(, \d left out \(a seed censored\))?"
    for line, w in zip(lines[6:8], (16, 32)):   # b with its interval, or why it is undefined: never a NaN
        assert re.fullmatch(rf"width {w}: (b = {num} \[{num}, {num}\] over \d N{out_}|undefined: \d N usable{out_}; "
                            r"a slope needs 2)", line), line
    assert "nan" not in out.lower()
    assert len(lines) == 8
    assert (tmp_path / "tau_mem_vs_N.png").stat().st_size > 1000
    exports = sorted(p.name for p in (tmp_path / "runs" / "mem-vs-n" / "exports").iterdir())
    assert len(exports) == 8 and "N1-width16-seed0.npz" in exports
    again = _run(code, tmp_path, monkeypatch, capsys)
    again = again.splitlines()
    assert again[0] == "0 runs done now, 8 before, 0 failed (logged)" and again[1:] == lines[1:]


@pytest.mark.parametrize("line", TOY)
def test_the_toy_sizes_are_the_pages_names(line):
    """The replaced lines set the same names the page's lines set, so nothing else changes meaning."""
    assert line.split(" = ")[0] in ("axes", "size")
