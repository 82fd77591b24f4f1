"""The one escaping path of the report page: every value is escaped once, where it enters the HTML.

    Markup            a str that is HTML already (made here from constant templates and escaped values)
    escape(x)         -> Markup: str(x) with & < > " ' as entities (a Markup passes unchanged)
    html(t, **v)      -> Markup: the constant template t with each {name} replaced by escape(v[name])
    join(parts, sep)  -> Markup: each part escaped (unless Markup), joined
    json_text(obj)    -> Markup: JSON for a <script type="application/json"> block, with < > & U+2028
                         U+2029 written as \\u escapes (nothing in it can end or re-open the element)
    csp(script, style) -> Markup: the page's Content-Security-Policy, its one script and one style
                         allowed by their sha256, nothing fetched, no forms, no base, no DOM sinks

No other code of scoreprobe/reports formats a value into HTML (tests/test_report_safety.py reads
the sources and fails on an f-string, `%` or `.format` that makes markup).
"""
import base64
import hashlib
import html as _html
import json
import re


class Markup(str):
    """A str that is HTML already; `escape` passes it unchanged. Made only by the functions here;
    `+` escapes a plain str operand."""
    __slots__ = ()

    def __add__(self, other):
        return Markup(str.__add__(self, escape(other)))

    def __radd__(self, other):
        return Markup(str.__add__(escape(other), self))


def escape(value):
    """`value` as HTML text, safe in element content and in double- or single-quoted attributes."""
    if isinstance(value, Markup):
        return value
    return Markup(_html.escape(str(value), quote=True))


_FIELD = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


def html(template, **values):
    """`template` (a constant of the code, never data) with each {name} replaced by escape(values[name]).

    Only `{name}` fields are read: there is no format spec, attribute access or indexing to reach
    into a value; format numbers first (f"{x:.2f}") and pass the text."""
    if isinstance(template, Markup) or not isinstance(template, str):
        raise TypeError("html(): the template must be a plain str constant")
    used = set(_FIELD.findall(template))
    if used != set(values):
        raise TypeError(f"html(): fields {sorted(used)} but values {sorted(values)}")
    return Markup(_FIELD.sub(lambda m: escape(values[m.group(1)]), template))


def join(parts, sep=""):
    """The parts escaped (a Markup part as it is) and joined with `sep` (escaped the same way)."""
    return Markup(escape(sep).join(escape(p) for p in parts))


_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def json_text(obj):
    """JSON text of `obj` for a <script type="application/json"> element (read with JSON.parse):
    `<`, `>`, `&`, U+2028 and U+2029 become \\u escapes, so no `</script>` or `<!--` can appear in
    it. Those characters occur in JSON text only inside strings, where the escapes mean the same."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return Markup(re.sub("[<>&\u2028\u2029]", lambda m: _JSON_ESCAPES[m.group(0)], text))


def sha256_source(text):
    """The CSP source expression 'sha256-…' of an inline <script> or <style> whose content is `text`."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def csp(script, style):
    """The Content-Security-Policy of a page whose only inline script is `script` and whose only
    <style> is `style` (both exactly as written into the page): nothing else runs or loads, images
    only from data: URLs, no connections, forms or <base>, and DOM string sinks (innerHTML, …)
    refused through Trusted Types."""
    return Markup(
        f"default-src 'none'; script-src {sha256_source(script)}; style-src {sha256_source(style)}; "
        "img-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'; object-src 'none'; "
        "frame-src 'none'; require-trusted-types-for 'script'; trusted-types 'none'")


def fill(template, **parts):
    """The page template with each {{NAME}} replaced, in one pass, by a Markup from this module."""
    bad = [k for k, v in parts.items() if not isinstance(v, Markup)]
    if bad:
        raise TypeError(f"fill(): {bad} are not Markup (escape them)")
    return Markup(re.sub(r"\{\{([A-Z]+)\}\}", lambda m: parts[m.group(1)], template))
