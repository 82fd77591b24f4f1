"""What in a report page did not come from the page's own template and script (`injected_markup`): the check
every page test and the report part of the abuse corpus (tests/abuse_report.py) apply to a page made from hostile
data."""
import base64
import hashlib
import html.parser
import json


class _Markup(html.parser.HTMLParser):
    """Every start tag with its attributes, and the text of each <script>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.scripts, self._in = [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in = dict(attrs)
            self.scripts.append([dict(attrs), ""])

    def handle_endtag(self, tag):
        if tag == "script":
            self._in = None

    def handle_data(self, data):
        if self._in is not None:
            self.scripts[-1][1] += data


def injected_markup(text):
    """What in a report page did not come from the page's own template and script (a list of
    findings; [] for a clean page): event-handler attributes, tags the page never makes, links or
    images that leave the page, scripts other than the data block and the one script the CSP allows
    by its hash, and data that no longer parse."""
    p = _Markup()
    p.feed(text)
    found = []
    csp = [a.get("content", "") for t, a in p.tags if t == "meta" and a.get("http-equiv", "").lower()
           == "content-security-policy"]
    if len(csp) != 1 or "'unsafe-inline'" in csp[0] or "connect-src 'none'" not in csp[0]:
        found.append(f"content security policy {csp}")
    for tag, attrs in p.tags:
        found += [f"<{tag} {k}=...>" for k in attrs if k.lower().startswith("on")]
        if tag in ("iframe", "object", "embed", "base", "form", "link", "frame", "svg", "math", "style") and \
                not (tag == "style" and not attrs):
            found.append(f"<{tag}>")
        if tag == "meta" and "http-equiv" in attrs and attrs["http-equiv"].lower() != "content-security-policy":
            found.append(f"<meta http-equiv={attrs['http-equiv']}>")
        if tag == "img" and not attrs.get("src", "").startswith("data:image/png;base64,"):
            found.append(f"<img src={attrs.get('src')}>")
        if tag == "a" and not attrs.get("href", "#").startswith("#"):
            found.append(f"<a href={attrs.get('href')}>")
    runnable = [body for attrs, body in p.scripts if attrs.get("type") != "application/json"]
    data = [body for attrs, body in p.scripts if attrs.get("type") == "application/json"]
    digest = lambda s: "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"  # noqa: E731
    if len(runnable) != 1 or not csp or digest(runnable[0]) not in csp[0]:
        found.append(f"{len(runnable)} runnable scripts, not the one the policy names")
    try:
        assert len(data) == 1
        json.loads(data[0])
    except (AssertionError, ValueError):
        found.append("the embedded data no longer parse")
    return found
