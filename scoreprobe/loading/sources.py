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
import warnings
from pathlib import Path

from scoreprobe.errors import ConfigError, DataError, StepGuessWarning, user_stacklevel
from scoreprobe.limits import MAX_STEP

RUN_STEP_FILE = r"^step_(\d+)\.pt$"   # RUN/ckpt/step_0000500.pt, as `scoreprobe train` writes them
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
    if len(set(out)) != len(out):
        raise ConfigError("a checkpoint file is named twice among the sources")
    return out


def _step_int(text, where):
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
        try:
            rx = re.compile(pattern)
        except re.error as e:
            raise ConfigError(f"--step-from-name {pattern!r} is not a regular expression: {e}") from None
        steps = []
        for f in files:
            m = rx.search(f.name)
            text = (m.group(1) if m and rx.groups else m.group(0)) if m else None
            if text is None or not text.isdigit():
                raise ConfigError(f"--step-from-name {pattern!r} finds no step number in {f.name}")
            steps.append(_step_int(text, f.name))
        return steps
    numbers = [re.findall(r"\d+", f.name[: -len(f.suffix)] if f.suffix else f.name) for f in files]
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
    blank lines and lines starting with # are skipped)."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read the steps file {path}: {e}") from None
    files, steps = [], []
    for i, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        step, _, name = line.strip().partition(" ")
        if not step.isdigit() or not name.strip():
            raise ConfigError(f"{path}:{i}: expected 'STEP PATH', got {line.strip()[:80]!r}")
        steps.append(_step_int(step, f"{path}:{i}"))
        files.append(path.parent / name.strip())
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
    path = Path(spec)
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
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    file_options = {"--steps-file": steps_file, "--step-from-name": step_pattern, "--dataset": dataset,
                    "--rule": rule, "--data-size": data_size, "--set": overrides or None,
                    "--trust": trust or None, "--ema": None if ema == "auto" else ema}
    given = [k for k, v in file_options.items() if v is not None]
    if steps_file is None and (not paths or (len(paths) == 1 and is_run_dir(paths[0]))):
        if given:
            raise ConfigError(f"{', '.join(given)} apply to checkpoint files, not to a run directory (it "
                              "states its data, steps and settings)")
        return load_series(paths[0] if paths else None)
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
