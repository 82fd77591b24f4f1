"""The subset of Markdown docs/definitions.md is written in, as HTML: headings, paragraphs, bullet
lists (with indented continuation lines), pipe tables, **bold**, *italic*, `code`, [links](url).
The report copies the definitions into the page (it must stand alone), so this needs no library."""
import html
import re
from pathlib import Path

_INLINE = [(re.compile(r"\*\*(.+?)\*\*"), r"<strong>\1</strong>"),
           (re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])"), r"<em>\1</em>")]
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def slug(text):
    """The anchor id of a heading: lower-case words joined by '-'."""
    words = re.findall(r"[0-9a-zα-ωτσ_]+", text.lower())
    return "def-" + "-".join(words)


def inline(text):
    """Escape, then code spans, bold, italic and links (links to other files become plain text:
    nothing on the page may point off the page)."""
    parts, out = re.split(r"(`[^`]+`)", text), []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        s = html.escape(part, quote=False)
        for pattern, repl in _INLINE:
            s = pattern.sub(repl, s)
        out.append(_LINK.sub(lambda m: m.group(1), s))
    return "".join(out)


def _table(rows):
    cells = [[c.strip() for c in r.strip().strip("|").split("|")] for r in rows]
    head, body = cells[0], [r for r in cells[2:]]
    h = "".join(f"<th>{inline(c)}</th>" for c in head)
    b = "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>" for r in body)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>"


def _blocks(lines):
    """Split lines into (kind, lines) blocks: heading, table, list, para."""
    blocks, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("#"):
            blocks.append(("heading", [line]))
            i += 1
        elif line.lstrip().startswith("|"):
            j = i
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            blocks.append(("table", lines[i:j]))
            i = j
        elif line.startswith("- "):
            j = i + 1
            while j < len(lines) and (lines[j].startswith("- ") or lines[j].startswith("  ")):
                j += 1
            blocks.append(("list", lines[i:j]))
            i = j
        else:
            j = i + 1
            while j < len(lines) and lines[j].strip() and not lines[j].startswith(("#", "- ", "|")):
                j += 1
            blocks.append(("para", lines[i:j]))
            i = j
    return blocks


def to_html(text):
    """HTML of a Markdown text in the subset above (headings get `slug` ids)."""
    out = []
    for kind, lines in _blocks(text.splitlines()):
        if kind == "heading":
            level = len(lines[0]) - len(lines[0].lstrip("#"))
            title = lines[0].lstrip("#").strip()
            out.append(f'<h{level + 2} id="{slug(title)}">{inline(title)}</h{level + 2}>')
        elif kind == "table":
            out.append(_table(lines))
        elif kind == "list":
            items, cur = [], []
            for line in lines:
                if line.startswith("- ") and cur:
                    items.append(cur)
                    cur = []
                cur.append(line[2:].strip() if line.startswith("- ") else line.strip())
            items.append(cur)
            out.append("<ul>" + "".join(f"<li>{inline(' '.join(it))}</li>" for it in items) + "</ul>")
        else:
            out.append(f"<p>{inline(' '.join(s.strip() for s in lines))}</p>")
    return "\n".join(out)


def sections(text):
    """{'## heading': body markdown} of the level-2 sections of a Markdown text, in order."""
    out, title, body = {}, None, []
    for line in text.splitlines():
        if line.startswith("## "):
            if title is not None:
                out[title] = "\n".join(body)
            title, body = line[3:].strip(), []
        elif title is not None:
            body.append(line)
    if title is not None:
        out[title] = "\n".join(body)
    return out


DEFINITIONS = Path(__file__).with_name("definitions.md")   # a link to docs/definitions.md


def definitions_text():
    """docs/definitions.md, as shipped with the package (scoreprobe/reports/definitions.md links to it)."""
    return DEFINITIONS.read_text(encoding="utf-8")
