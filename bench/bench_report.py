"""`scoreprobe report` on the shipped series: time from nothing and with the stores there, page size,
and render time in headless Chromium; optionally a screenshot of the slider-linked sections.

    python bench/bench_report.py [--dir /tmp/report-bench] [--from-nothing] [--screenshot docs/report.png]

Targets (issue 26): page <= 5 MB, renders in <= 2 s; `scoreprobe report` <= 3 min on 2 cores from
nothing and <= 10 s when the stores exist. Prints the load average next to every timing: on a
shared machine the wall times scale with it.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))   # the DevTools driver of the tests
from browser import Browser, find_chromium, wait_for  # noqa: E402


def run_report(out):
    """Wall seconds of one `scoreprobe report --out OUT` in a fresh process, and its output."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "scoreprobe", "report", "--out", str(out)], check=True,
                       capture_output=True, text=True)
    return time.perf_counter() - t0, p.stdout


def render_times(page, loads):
    """Milliseconds from navigation to the page's script having drawn everything, per load."""
    out = []
    with Browser() as b:
        for _ in range(loads):
            b.events.clear()
            b.goto(page.resolve().as_uri())
            out.append(wait_for(lambda: b.js("window.__report && window.__report.ready")))
        errors = b.errors()
    return out, errors


def screenshot(page, path, step_index=None):
    """PNG of the slider bar, the basin map and the score field at one step (default: the middle one)."""
    with Browser(width=1200, height=1000) as b:
        b.goto(page.resolve().as_uri())
        wait_for(lambda: b.js("window.__report && window.__report.ready"))
        pick = "Math.floor(s.max / 2)" if step_index is None else str(int(step_index))
        b.js(f"(() => {{ const s = document.getElementById('step-slider'); s.value = {pick}; "
             "s.dispatchEvent(new Event('input')); })()")
        box = b.js("(() => { const a = document.querySelector('.linked').getBoundingClientRect(), "
                   "f = document.getElementById('field').getBoundingClientRect(); "
                   "return {x: a.x - 8, y: a.y + window.scrollY - 8, width: a.width + 16, height: f.bottom - a.top + 16}; })()")
        b.screenshot(path, clip=box)
    from PIL import Image   # a palette PNG: about a third of the bytes, for the README
    Image.open(path).convert("RGB").quantize(colors=192, method=Image.Quantize.MEDIANCUT,
                                             dither=Image.Dither.NONE).save(path, optimize=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", default="/tmp/scoreprobe-report-bench", help="Where the page and its cache go.")
    p.add_argument("--from-nothing", action="store_true", help="Remove the cache first (about 3 min on 2 idle cores).")
    p.add_argument("--loads", type=int, default=3, help="Page loads to time.")
    p.add_argument("--screenshot", default=None, help="Write a PNG of the linked sections here.")
    args = p.parse_args(argv)
    out = Path(args.dir) / "report.html"
    if args.from_nothing:
        shutil.rmtree(out.parent / "report.cache", ignore_errors=True)
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    t, text = run_report(out)
    print(text.strip())
    print(f"first run:  {t:6.1f} s (load {os.getloadavg()[0]:.1f})")
    t, _ = run_report(out)
    print(f"second run: {t:6.1f} s with the stores there (load {os.getloadavg()[0]:.1f}; target <= 10 s)")
    print(f"page: {out.stat().st_size / 1e6:.2f} MB (target <= 5 MB)")
    if find_chromium() is None:
        print("no Chromium: render time not measured")
        return
    ms, errors = render_times(out, args.loads)
    print(f"render: median {statistics.median(ms):.0f} ms of {len(ms)} loads ({', '.join(f'{m:.0f}' for m in ms)}; "
          f"target <= 2000 ms); console errors: {len(errors)}")
    if args.screenshot:
        screenshot(out, args.screenshot)
        print(f"wrote {args.screenshot}")


if __name__ == "__main__":
    main()
