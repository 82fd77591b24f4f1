"""Checkpoint sources as people name them: a run directory, checkpoint files, a glob, a folder of
files or a steps file, with the data the models are to be compared with.

    series = open_source(["results/000-DiT/checkpoints/*.pt"], dataset="data.npz",
                         parameterization="ddpm_eps", num_heads=6)

Every analysis command of the CLI takes its SOURCES through `open_source`. A run directory written
by `scoreprobe train` carries everything; files need the data (`dataset=`: an .npz of train /
held-out bits, a run directory whose data to use, or a rule spec with `data_size=`) and their
training steps: from `steps_file` (lines `STEP PATH`), from `step_pattern` (a regular expression
whose first group, or whole match, is the step), or else from the last number in each file name —
a guess, so it is named in a StepGuessWarning. See docs/checkpoints.md.
"""
import glob
import os
import re
import stat
import warnings
from pathlib import Path

from scoreprobe.errors import ConfigError, DataError, StepGuessWarning, user_stacklevel
from scoreprobe.limits import MAX_STEP, MAX_STEPS_FILE_BYTES, check_bool

RUN_STEP_FILE = r"^step_([0-9]+)\.pt$"   # RUN/ckpt/step_0000500.pt, as `scoreprobe train` writes them
_DIGITS = re.compile(r"[0-9]+")         # steps are ASCII digits: int() would take '²' or '٣' too
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".pkl", ".pickle")


# ---------------------------------------------------------------------------------------------
# Files and steps
# ---------------------------------------------------------------------------------------------

def is_run_dir(path):
    """A directory written by `scoreprobe train` (it holds run.json)."""
    return Path(path).is_dir() and (Path(path) / "run.json").is_file()


def _is_model_dir(path):
    from scoreprobe.loading.diffusers_dit import find_diffusers_dir
    return find_diffusers_dir(path) is not None


def expand_paths(paths):
    """Checkpoint paths from what a user typed: glob patterns are expanded (sorted), a folder of
    checkpoint files gives its files (suffixes in CHECKPOINT_SUFFIXES), a diffusers folder stays one
    checkpoint. ConfigError for a path that does not exist or a pattern or folder without checkpoints."""
    out = []
    for text in map(str, paths):
        check_path_text(text, "the source")
        if not os.path.exists(text) and glob.has_magic(text):
            found = sorted(glob.glob(text))
            if not found:
                raise ConfigError(f"no file matches {text!r}")
            out += [Path(f) for f in found if Path(f).is_file() or _is_model_dir(f)]
            continue
        p = Path(text)
        if not p.exists():
            raise ConfigError(f"no checkpoint file or folder at {p}")
        if p.is_dir() and not _is_model_dir(p):
            found = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in CHECKPOINT_SUFFIXES)
            if not found:
                raise ConfigError(f"{p} is a folder without checkpoint files ({', '.join(CHECKPOINT_SUFFIXES)}), "
                                  "a run directory or a diffusers model folder")
            out += found
            continue
        out.append(p)
    if len({os.path.realpath(p) for p in out}) != len(out):
        raise ConfigError("a checkpoint file is named twice among the sources (symlinks resolved)")
    return out


def check_path_text(text, what):
    """ConfigError for a path the OS cannot take (a NUL byte, a name over 255 bytes, over 4096 in all),
    before it reaches os.stat (which would raise OSError / ValueError)."""
    text = os.fspath(text)
    text = text if isinstance(text, str) else os.fsdecode(text)
    raw = os.fsencode(text)
    if b"\0" in raw:
        raise ConfigError(f"{what} {text[:60]!r} contains a NUL byte")
    if len(raw) > 4096 or any(len(part) > 255 for part in raw.split(b"/")):
        raise ConfigError(f"{what} {text[:40]!r}... is too long for a path (names up to 255 bytes, 4096 in all)")
    return text


# --step-from-name takes a restricted pattern language, so that matching a file name ends quickly:
# Python's re backtracks, and '(a+)+$' would take centuries on a 40-character name. Allowed: literals,
# classes, '.', anchors, groups and '|', with at most MAX_QUANTIFIERS quantifiers (?, *, +, {m,n}),
# each on a single character, class or '.' (at most 2 of them repeating more than once); no
# quantified groups, backreferences or lookarounds. Names are matched on their first 255 characters,
# so the time per name is polynomial: at most about 0.3 s for a worst-case pattern and name
# (measured on one core), microseconds for ordinary ones.
MAX_QUANTIFIERS = 3
MAX_PATTERN_CHARS = 200


def compile_step_pattern(pattern):
    """The compiled --step-from-name pattern; ConfigError outside the restricted language (see above)."""
    def bad(why):
        return ConfigError(f"--step-from-name {str(pattern)[:60]!r} {why}; allowed: literals, classes, '.', "
                           f"anchors, groups, '|' and up to {MAX_QUANTIFIERS} quantifiers each on one character "
                           "or class (docs/checkpoints.md)")
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_CHARS:
        raise bad(f"must be a string of at most {MAX_PATTERN_CHARS} characters")
    try:
        from re import _parser as sre_parse   # Python >= 3.11
    except ImportError:                       # pragma: no cover
        import sre_parse
    try:
        parsed = sre_parse.parse(pattern)
        rx = re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as e:
        raise ConfigError(f"--step-from-name {pattern[:60]!r} is not a regular expression: {e}") from None
    repeats = []
    _walk_pattern(parsed, repeats, bad)
    if len(repeats) > MAX_QUANTIFIERS or sum(hi > 1 for hi in repeats) > 2:
        raise bad(f"has {len(repeats)} quantifiers ({sum(hi > 1 for hi in repeats)} repeating)")
    return rx


def _walk_pattern(items, repeats, bad):
    """Collect the upper bounds of the pattern's quantifiers; `bad(why)` for what the language leaves out."""
    names = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
    single = {"LITERAL", "NOT_LITERAL", "IN", "ANY", "CATEGORY"}
    for op, av in items:
        name = str(op)
        if name in names:
            lo, hi, body = av
            body = list(body)
            if len(body) != 1 or str(body[0][0]) not in single:
                raise bad("quantifies a group or sequence (nested repetition can take exponential time)")
            repeats.append(hi)
        elif name in ("GROUPREF", "GROUPREF_EXISTS", "ASSERT", "ASSERT_NOT", "ATOMIC_GROUP"):
            raise bad("uses a backreference, lookaround or atomic group")
        elif name == "SUBPATTERN":
            _walk_pattern(av[-1], repeats, bad)
        elif name == "BRANCH":
            for branch in av[1]:
                _walk_pattern(branch, repeats, bad)


def _step_int(text, where):
    if not _DIGITS.fullmatch(text):
        raise ConfigError(f"{where}: {text[:20]!r} is not a step (ASCII digits 0-9 only)")
    if len(text) > 13 or int(text) > MAX_STEP:
        raise ConfigError(f"{where}: step {text[:20]} is beyond the limit {MAX_STEP} (scoreprobe.limits.MAX_STEP)")
    return int(text)


def steps_from_names(files, pattern=None):
    """Training step of each file from its name.

    pattern : regular expression searched in each file name; its first group (or the whole match)
        is the step. None: the last number in the name without its suffix (`0050000.pt` -> 50000,
        `epoch=3-step=1200.ckpt` -> 1200); a file name without a number is step 0 when it is the
        only file. The default rule warns (StepGuessWarning) with what it read.

    Returns
    -------
    list of int, one per file.
    """
    if pattern is not None:
        rx = compile_step_pattern(pattern)
        steps = []
        for f in files:
            m = rx.search(f.name[:255])
            text = (m.group(1) if m and rx.groups else m.group(0)) if m else None
            if text is None or not _DIGITS.fullmatch(text):
                raise ConfigError(f"--step-from-name {pattern!r} finds no step number in {f.name} (ASCII digits)")
            steps.append(_step_int(text, f.name))
        return steps
    numbers = [_DIGITS.findall(f.name[: -len(f.suffix)] if f.suffix else f.name) for f in files]
    if len(files) == 1 and not numbers[0]:
        steps = [0]
    elif not all(numbers):
        bare = next(f.name for f, n in zip(files, numbers) if not n)
        raise ConfigError(f"{bare} has no number in its name to read a step from; pass --step-from-name REGEX "
                          "or --steps-file FILE (lines 'STEP PATH')")
    else:
        steps = [_step_int(n[-1], f.name) for f, n in zip(files, numbers)]
    shown = ", ".join(f"{f.name} -> {s}" for f, s in list(zip(files, steps))[:4]) + (", ..." if len(files) > 4 else "")
    warnings.warn(f"training steps read from the file names (the last number in each; {shown}); pass "
                  "--step-from-name REGEX or --steps-file FILE (steps_file=) when that is wrong", StepGuessWarning,
                  stacklevel=user_stacklevel())
    return steps


def read_steps_file(path):
    """(files, steps) from a text file of lines `STEP PATH` (paths relative to the file's folder;
    blank lines and lines starting with # are skipped). Only a regular file of at most
    limits.MAX_STEPS_FILE_BYTES is read (a FIFO or /dev/zero is refused before it is opened)."""
    path = Path(check_path_text(path, "the steps file"))
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ConfigError(f"the steps file {path} is not a regular file")
        if os.stat(path).st_size > MAX_STEPS_FILE_BYTES:
            raise ConfigError(f"the steps file {path} is larger than {MAX_STEPS_FILE_BYTES} bytes "
                              "(scoreprobe.limits.MAX_STEPS_FILE_BYTES)")
        with open(path, "rb") as f:
            lines = f.read(MAX_STEPS_FILE_BYTES + 1).decode().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read the steps file {path}: {e}") from None
    files, steps = [], []
    for i, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        step, _, name = line.strip().partition(" ")
        if not _DIGITS.fullmatch(step) or not name.strip():
            raise ConfigError(f"{path}:{i}: expected 'STEP PATH' (STEP in ASCII digits), got {line.strip()[:80]!r}")
        steps.append(_step_int(step, f"{path}:{i}"))
        files.append(path.parent / check_path_text(name.strip(), f"{path}:{i}: the path"))
    if not files:
        raise ConfigError(f"the steps file {path} lists no checkpoints")
    return files, steps


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------

def dataset_from(spec, rule=None, data_size=None, data_seed=0):
    """The Dataset named by `spec`: a Dataset, the path of an .npz (keys train, heldout), a run
    directory (its dataset.npz), or a rule spec (dict or JSON text) with `data_size` = (n_train,
    n_heldout) drawn by `make_dataset` with `data_seed`. `rule` (Rule or spec) is the rule an .npz
    without a stored rule is read with, and must agree with one that has it."""
    from scoreprobe.data.datasets import load_dataset, make_dataset
    from scoreprobe.data.rules import Rule, rule_from_spec
    if rule is not None and not isinstance(rule, Rule):
        rule = rule_from_spec(rule)
    if hasattr(spec, "train"):
        return spec
    if isinstance(spec, dict) or (isinstance(spec, str) and spec.lstrip().startswith("{")):
        if data_size is None:
            raise ConfigError("a rule spec as the dataset needs --data-size N_TRAIN,N_HELDOUT (data_size=)")
        n_train, n_heldout = data_size
        return make_dataset(rule_from_spec(spec), n_train, n_heldout, seed=data_seed)
    path = Path(check_path_text(spec, "--dataset"))
    if data_size is not None:
        raise ConfigError("--data-size (data_size=) applies to a rule spec as the dataset, not to a file")
    if path.is_dir():
        if not (path / "dataset.npz").is_file():
            raise DataError(f"{path} is a folder without dataset.npz; pass the .npz itself")
        path = path / "dataset.npz"
    return load_dataset(path, rule)


def _run_of_file(f):
    """The run directory of a file written by `scoreprobe train` (RUN/ckpt/step_*.pt), else None."""
    run = Path(f).resolve().parent.parent
    return run if Path(f).parent.name == "ckpt" and is_run_dir(run) else None


# ---------------------------------------------------------------------------------------------
# The one entry point
# ---------------------------------------------------------------------------------------------

def open_source(paths=(), *, steps_file=None, step_pattern=None, dataset=None, rule=None, data_size=None,
                data_seed=0, trust=False, ema="auto", **overrides):
    """A CheckpointSeries from what a user names.

    Parameters
    ----------
    paths : () for the shipped series; one run directory; or checkpoint files, glob patterns,
        folders of checkpoint files, diffusers folders (one checkpoint each).
    steps_file : text file of lines `STEP PATH` instead of `paths`.
    step_pattern : regex reading each file's step from its name (default: the last number, warned).
    dataset, rule, data_size, data_seed : the data (see `dataset_from`); files of a scoreprobe run
        directory default to that run's data.
    trust, ema, **overrides : as for `load_checkpoint` (parameterization, schedule, num_heads, ...).

    Returns
    -------
    CheckpointSeries.
    """
    from scoreprobe.loading.series import load_series, series_from_files
    trust = check_bool(trust, "trust")
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    for p in paths:
        check_path_text(p, "the source")
    file_options = {"--steps-file": steps_file, "--step-from-name": step_pattern, "--dataset": dataset,
                    "--rule": rule, "--data-size": data_size, "--set": overrides or None,
                    "--trust": trust or None, "--ema": None if ema == "auto" else ema}
    given = [k for k, v in file_options.items() if v is not None]
    if steps_file is None and (not paths or (len(paths) == 1 and is_run_dir(paths[0]))):
        if given:
            raise ConfigError(f"{', '.join(given)} apply to checkpoint files, not to a run directory (it "
                              "states its data, steps and settings)")
        return load_series(paths[0] if paths else None)
    if len(paths) > 1 and any(is_run_dir(p) for p in paths):
        runs = [str(p) for p in paths if is_run_dir(p)]
        raise ConfigError(f"{len(runs)} run director{'y' if len(runs) == 1 else 'ies'} among {len(paths)} sources ({', '.join(runs[:3])}"
                          f"{', ...' if len(runs) > 3 else ''}): an analysis reads one series; run it once per "
                          "run directory, or measure and compare several runs with `scoreprobe compare RUN...`")
    if steps_file is not None:
        if paths or step_pattern is not None:
            raise ConfigError("--steps-file names the files and their steps: give no SOURCES and no --step-from-name")
        files, steps = read_steps_file(steps_file)
    else:
        files, steps = expand_paths(paths), None
    runs = {_run_of_file(f) for f in files}
    if dataset is None:
        if len(runs) != 1 or None in runs:
            raise ConfigError("checkpoint files carry no training data: pass --dataset (dataset=) with an .npz "
                              "of train/heldout bits, a run directory, or a rule spec with --data-size")
        dataset = next(iter(runs))
    data = dataset_from(dataset, rule, data_size, data_seed)
    if steps is None:
        our_names = step_pattern is None and None not in runs    # RUN/ckpt/step_*.pt state their step
        steps = steps_from_names(files, RUN_STEP_FILE if our_names else step_pattern)
    return series_from_files(files, steps, data, trust=trust, ema=ema, **overrides)
