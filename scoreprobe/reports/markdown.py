"""The subset of Markdown docs/definitions.md is written in, as HTML: headings, paragraphs, bullet
lists (with indented continuation lines), pipe tables, **bold**, *italic*, `code`, [links](url).
The report copies the definitions into the page (it must stand alone), so this needs no library.
Text is escaped by `safe.escape` before any tag is added; tags come from constants here."""
import re
from pathlib import Path

from scoreprobe.reports.safe import Markup, escape, html, join

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
            out.append(html("<code>{c}</code>", c=part[1:-1]))
            continue
        s = str(escape(part))   # the patterns split only at * [ ] ( ): never inside an entity
        for pattern, repl in _INLINE:
            s = pattern.sub(repl, s)
        out.append(Markup(_LINK.sub(lambda m: m.group(1), s)))
    return join(out)


def _table(rows):
    cells = [[c.strip() for c in r.strip().strip("|").split("|")] for r in rows]
    head, body = cells[0], [r for r in cells[2:]]
    h = join(html("<th>{c}</th>", c=inline(c)) for c in head)
    b = join(html("<tr>{r}</tr>", r=join(html("<td>{c}</td>", c=inline(c)) for c in r)) for r in body)
    return html("<table><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>", h=h, b=b)


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
            tag = f"h{min(level + 2, 6)}"
            out.append(html('<{tag} id="{id}">{title}</{tag}>', tag=tag, id=slug(title), title=inline(title)))
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
            out.append(html("<ul>{li}</ul>", li=join(html("<li>{t}</li>", t=inline(" ".join(it))) for it in items)))
        else:
            out.append(html("<p>{t}</p>", t=inline(" ".join(s.strip() for s in lines))))
    return join(out, "\n")


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
