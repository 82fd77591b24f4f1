"""Progress over the checkpoints of a sweep, visible wherever the user runs it.

On a terminal or in a notebook: a tqdm bar. Elsewhere (a script's redirected output, a batch job,
CI): one line per computed step on stderr, the first with an estimate of the time left, e.g.

    clocks: step 1088 (2/8) in 9.8 s; about 59 s left

`progress=False` silences both; `progress=True` forces the bar. `DEFAULT` stands in for
`progress=None` (the CLI's `-q` sets it to False).
"""
import sys
import time

from tqdm.auto import tqdm

DEFAULT = None   # what progress=None means: None (bar or lines, see above), True or False
LINE_EVERY = 30.0   # seconds: in lines mode, a count (training) also writes a line when none came for this long


def _mode(progress):
    """'bar', 'lines' or 'off' for a `progress` argument."""
    progress = DEFAULT if progress is None else progress
    return "off" if progress is False else "bar" if progress or interactive() else "lines"


def interactive():
    """A terminal on stderr or a Jupyter kernel (where tqdm.auto draws a widget)."""
    if "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class StepProgress:
    """Iterate over `pairs` (step, item), reporting each step as it finishes.

    mode: "bar" (tqdm), "lines" (one stderr line per computed step) or "off"; `progress` None picks
    "bar" when interactive, else "lines". Call `computed(step)` after a step was computed (steps
    skipped because they were already written are not timed)."""

    def __init__(self, pairs, desc, progress=None):
        self.pairs, self.desc = list(pairs), desc
        self.mode = _mode(progress)
        self.bar = tqdm(self.pairs, desc=desc, unit="step") if self.mode == "bar" else None
        self.times, self.t0, self.todo = [], time.perf_counter(), len(self.pairs)

    def __iter__(self):
        for i, (step, item) in enumerate(self.bar if self.bar is not None else self.pairs):
            if self.bar is not None:
                self.bar.set_postfix(step=step)
            self.index, self.t0 = i, time.perf_counter()
            yield step, item

    def skipped(self):
        """The current step was already written: it does not count towards the estimate."""
        self.todo -= 1

    def computed(self, step):
        if self.mode != "lines":
            return
        dt = time.perf_counter() - self.t0
        self.times.append(dt)
        left = (self.todo - len(self.times)) * sum(self.times) / len(self.times)
        eta = f"; about {left:.0f} s left" if left > 0 else ""
        sys.stderr.write(f"{self.desc}: step {step} ({self.index + 1}/{len(self.pairs)}) in {dt:.1f} s{eta}\n")
        sys.stderr.flush()


class CountProgress:
    """Progress over a count (training steps): a tqdm bar, or in "lines" mode one stderr line at
    each `mark` (a saved checkpoint) with the rate, the time left and the latest `set_postfix_str`
    (the logged loss), and between checkpoints one at least every LINE_EVERY seconds, so a batch
    job's log is never silent for long; "off" when progress is False."""

    def __init__(self, total, initial, desc, progress=None):
        self.total, self.start, self.desc = total, initial, desc
        self.mode = _mode(progress)
        self.bar = tqdm(total=total, initial=initial, desc=desc, unit="step") if self.mode == "bar" else None
        self.t0, self.postfix = time.perf_counter(), ""
        self.n, self.last_line = initial, self.t0

    def update(self, n=1):
        self.n += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.mode == "lines" and time.perf_counter() - self.last_line >= LINE_EVERY and self.n < self.total:
            self._line(self.n, None)

    def set_postfix_str(self, text):
        """The latest state (e.g. the logged loss): after the bar, or at the end of each line."""
        self.postfix = text
        if self.bar is not None:
            self.bar.set_postfix_str(text)

    def mark(self, n, what):
        """A line 'desc: step n/total (what), r steps/s; about t left' in lines mode."""
        if self.mode != "lines" or n <= self.start:
            return
        self._line(n, what)

    def _line(self, n, what):
        now = time.perf_counter()
        rate = (n - self.start) / max(now - self.t0, 1e-9)
        left = (self.total - n) / rate
        eta = f"; about {_duration(left)} left" if n < self.total else ""
        state = f"; {self.postfix}" if self.postfix else ""
        sys.stderr.write(f"{self.desc}: step {n}/{self.total}{f' ({what})' if what else ''}, {rate:.1f} steps/s"
                         f"{eta}{state}\n")
        sys.stderr.flush()
        self.last_line = now

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _duration(seconds):
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
