"""A headless Chromium driven over the DevTools protocol through a pipe (--remote-debugging-pipe:
commands on fd 3, replies on fd 4, NUL-separated JSON), so the tests need no browser driver package."""
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium():
    """Path of a Chromium-family browser on PATH, or None."""
    return next((p for p in map(shutil.which, NAMES) if p), None)


class Browser:
    """One headless browser with one page; `events` collects every protocol event of the page."""

    def __init__(self, exe=None, width=1280, height=900):
        exe = exe or find_chromium()
        self.profile = tempfile.mkdtemp(prefix="scoreprobe-chromium-")
        to_child, self._w = os.pipe()       # we write commands, the browser reads fd 3
        self._r, from_child = os.pipe()     # the browser writes fd 4, we read

        def fds():
            a, b = os.dup(to_child), os.dup(from_child)
            os.dup2(a, 3)
            os.dup2(b, 4)
        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"]
        self.proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=fds, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self._id, self._replies, self.events, self._cv = 0, {}, [], threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        target = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.page(f"{domain}.enable")
        self.page("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def _read(self):
        buf = b""
        while True:
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                return
            buf += chunk
            *messages, buf = buf.split(b"\0")
            with self._cv:
                for raw in messages:
                    msg = json.loads(raw)
                    (self._replies.__setitem__(msg["id"], msg) if "id" in msg else self.events.append(msg))
                self._cv.notify_all()

    def call(self, method, session=None, timeout=30, **params):
        """Send one command and wait for its result (RuntimeError on a protocol error)."""
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        with self._cv:
            if not self._cv.wait_for(lambda: self._id in self._replies, timeout):
                raise TimeoutError(f"{method}: no reply in {timeout} s")
            reply = self._replies.pop(self._id)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def page(self, method, **params):
        return self.call(method, session=self.session, **params)

    def wait_event(self, method, timeout=30):
        """Wait until an event `method` of the page has arrived."""
        with self._cv:
            if not self._cv.wait_for(lambda: any(e["method"] == method for e in self.events), timeout):
                raise TimeoutError(f"no {method} in {timeout} s")

    def goto(self, url):
        """Navigate and wait for the load event."""
        self.page("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def js(self, expression):
        """The value of a JavaScript expression on the page (exceptions raise RuntimeError)."""
        r = self.page("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, path, clip=None):
        """PNG of the page (or of `clip` {x, y, width, height} in page pixels) to `path`."""
        import base64
        kw = {"format": "png", "captureBeyondViewport": True}
        if clip:
            kw["clip"] = {**clip, "scale": 1}
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.page("Page.captureScreenshot", **kw)["data"]))

    def errors(self):
        """Console errors, uncaught exceptions and error log entries seen so far (texts)."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(str(p.get("exceptionDetails")))
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(str(p.get("args")))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    def requests(self):
        """URLs of every network request the page made."""
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._w)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def wait_for(check, timeout=10.0, every=0.05):
    """Poll `check()` until it is truthy (returns it) or `timeout` passes (returns the last value)."""
    end = time.monotonic() + timeout
    value = check()
    while not value and time.monotonic() < end:
        time.sleep(every)
        value = check()
    return value
