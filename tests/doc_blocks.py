"""The fenced code blocks of README.md and docs/*.md, and how tests/test_doc_blocks.py runs them.

A block is a ```python or ```bash fence (an unlabelled fence holds text, a folder tree, not code).
HTML comment lines right above the opening fence mark it:

    <!-- slow -->   it trains or takes minutes: run only under `-m slow`
    <!-- gpu -->    it needs CUDA as written: run only under `-m gpu` (skipped without CUDA)

Python blocks run as written, a page's blocks in order in one namespace (like a notebook), compiled
with the page's line numbers so that a traceback points at the markdown. A `print(...)` whose line
ends in a comment states what it prints: the comment's text up to its first ": " (the rest explains
it) must equal the printed text, whitespace aside (`print(x.mean())   # 1.0: all valid`).

Bash lines are split at `&&`; every `scoreprobe ...` command runs in-process through the CLI entry
point; any other command must be one the test lists.
"""
import ast
import io
import re
import shlex
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
MARKERS = ("gpu", "slow")
FENCE = re.compile(r"^```([\w-]*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
MARK = re.compile(r"^<!--\s*([\w-]+)\s*-->$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its page (relative to the repository), 1-based index among the page's fences,
    language ("python", "bash", "" for text), the line of its opening fence, its code and its markers."""
    page: str
    index: int
    lang: str
    line: int
    code: str
    marks: tuple

    @property
    def id(self):
        return f"{self.page}#{self.index}"


def blocks(page):
    """Every fenced block of `page` (a path relative to the repository root), in order."""
    text = (ROOT / page).read_text()
    out = []
    for i, m in enumerate(FENCE.finditer(text), 1):
        above = text[:m.start()].splitlines()
        marks = []
        while above and MARK.match(above[-1].strip()):
            marks.append(MARK.match(above.pop().strip()).group(1))
        unknown = sorted(set(marks) - set(MARKERS))
        if unknown:
            raise ValueError(f"{page}, block {i}: unknown marker(s) {unknown}; known: {MARKERS}")
        out.append(Block(page, i, m.group(1), text.count("\n", 0, m.start()) + 1, m.group(2),
                         tuple(sorted(set(marks)))))
    return out


def all_blocks():
    """Every fenced block of every page."""
    return [b for page in PAGES for b in blocks(page)]


def commands(block):
    """A bash block's commands: each line split like a shell (comments dropped), then at `&&`."""
    out = []
    for line in block.code.replace("\\\n", " ").splitlines():
        cmd = []
        for word in shlex.split(line, comments=True) + ["&&"]:
            if word != "&&":
                cmd.append(word)
            elif cmd:
                out.append(cmd)
                cmd = []
    return out


def claims(block):
    """{(first line, last line): claim} of the block's print statements whose last line carries a
    comment, in the page's line numbers: the comment up to its first ": "."""
    code = "\n" * block.line + block.code
    comments = {t.start[0]: t.string.lstrip("#").strip()
                for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type == tokenize.COMMENT}
    out = {}
    for node in ast.walk(ast.parse(code)):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "print"
                and node.end_lineno in comments):
            out[(node.lineno, node.end_lineno)] = comments[node.end_lineno].split(": ", 1)[0].strip()
    return out


def _words(text):
    return " ".join(str(text).split())


def run_python(block, env):
    """Execute a python block in the namespace `env` (shared by a page's blocks); check its claims.
    Returns [(line, printed text)] of its prints."""
    filename = str(ROOT / block.page)
    printed = []

    def doc_print(*args, sep=" ", end="\n", file=None, flush=False):
        frame = sys._getframe(1)
        if frame.f_code.co_filename == filename:
            printed.append((frame.f_lineno, sep.join(str(a) for a in args)))
        print(*args, sep=sep, end=end, file=file, flush=flush)

    env["print"] = doc_print
    exec(compile("\n" * block.line + block.code, filename, "exec"), env)   # noqa: S102 -- our own docs
    for (first, last), claim in claims(block).items():
        said = [text for line, text in printed if first <= line <= last]
        assert said, f"{block.id} (line {first}) claims {claim!r} but printed nothing"
        for text in said:
            assert _words(text) == _words(claim), \
                f"{block.id} (line {first}) printed {text!r}; its comment says {claim!r}"
    return printed


def set_options(argv, values):
    """argv with the values of the options in `values` ({option: value}) replaced where present."""
    out = list(argv)
    for i, a in enumerate(out[:-1]):
        if a in values:
            out[i + 1] = values[a]
    return out
