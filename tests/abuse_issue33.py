"""The abuse corpus of issue 33, sections 2 and 5 (`--denoiser` and `train`; part of tests/abuse_corpus.py):
each attempt is built in a copy `d` of the good run directory, with d.parent as the work folder.

Each attempt is classified as abuse_attempt.run_attempt does ("clean": the typed error for the stated
reason within 2 s, the CLI one `error:` line and exit 2; "code execution", "silent", "traceback",
"wrong reason", "slow"), and then by what it did to the work folder: a file that existed before and
changed or went is "data lost"; a file that appeared (a store, a checkpoint, run.json rewritten as a
new file) is a "late refusal" -- the refusal came after work began. `cases()` lists
(name, surface, build); `python tests/abuse_corpus.py` prints the counts per surface.
"""
import json
import pickle
import shutil
import sys
from collections import Counter
from pathlib import Path

import torch

from abuse_attempt import run_attempt
from abuse_corpus import CFG, NOISE, CreatesFile
from abuse_inputs import Attempt

SURFACES = {"denoiser": "--denoiser (your own code)", "train": "train (resume, extension, the run directory)"}
TRAIN_ARGS = ["--rule", "parity", "--G", "2", "--shape", "4x4", "--layout", "random", "--rule-seed", "1",
              "--n-train", "16", "--n-heldout", "16", "--hidden-size", "16", "--depth", "1", "--num-heads", "2",
              "--batch-size", "16", "--n-checkpoints", "3", "--save-model", "--log-every", "4", "--device", "cpu",
              "--threads", "1"]
EXTENDED = CFG["total_steps"] * 2


# ---------------------------------------------------------------------------------------------
# --denoiser: a user file in the work folder, measured with clocks (API and CLI)
# ---------------------------------------------------------------------------------------------

USER = '''
import sys, time
import torch

def ok(x, sigma):
    return torch.tanh(x / sigma[:, None] ** 2)

{body}
'''


def _denoiser(body, match, steps=None, timeout=None, cli_extra=()):
    """An attempt measuring `make` of a user file holding `body` (API: denoiser_series + clocks; CLI: clocks)."""
    def build(d):
        user = d.parent / "user.py"
        user.write_text(USER.format(body=body))

        def api():
            from scoreprobe.loading.series import load_series
            from scoreprobe.loading.usercode import denoiser_series
            from scoreprobe.stats.clocks import clocks
            series = denoiser_series(f"{user}:make", load_series(d).dataset, steps=steps, trust=True, timeout=timeout)
            clocks(series, n_samples=2, n_steps=1, n_boot=2, out=d.parent / "api.zarr", progress=False)
        argv = ["clocks", "--denoiser", f"{user}:make", "--trust", "--dataset", d, "--n-samples", 2, "--n-steps", 1,
                "--out", d.parent / "cli.zarr", "--plot", d.parent / "c.png", "--device", "cpu", *cli_extra]
        if steps is not None:
            argv += ["--steps", ",".join(map(str, steps))]
        if timeout is not None:
            argv += ["--denoiser-timeout", timeout]
        from scoreprobe.errors import ConfigError
        return Attempt(api, argv if all(isinstance(s, int) for s in steps or ()) else None, ConfigError, match)
    return build


DENOISER_CASES = [
    ("raises", _denoiser("def make():\n    return {0: lambda x, s: 1 / 0}", "step 0 raised ZeroDivisionError")),
    ("make_raises", _denoiser("def make():\n    raise KeyError('nope')", "raised KeyError")),
    ("step_1e30", _denoiser("def make():\n    return {10**30: ok}", "out of range")),
    ("step_negative", _denoiser("def make():\n    return {-5: ok, 0: ok}", "out of range")),
    ("step_negative_function", _denoiser("def make(step):\n    return ok", "out of range", steps=[-3, 0])),
    ("steps_strings", _denoiser("def make(step):\n    return ok", "must be an integer", steps=["a", "b"])),
    ("step_bool", _denoiser("def make():\n    return {True: ok}", "must be an integer")),
    ("exit0_in_denoiser", _denoiser("def bye(x, s):\n    sys.exit(0)\ndef make():\n    return {0: bye}",
                                    "raised SystemExit")),
    ("exit0_in_make", _denoiser("def make():\n    raise SystemExit(0)", "raised SystemExit")),
    ("exit0_in_step_function", _denoiser("def make(step):\n    sys.exit(0)", "raised SystemExit", steps=[0])),
    ("bool_output", _denoiser("def make():\n    return {0: lambda x, s: x > 0}", "returned a bool tensor")),
    ("int_output", _denoiser("def make():\n    return {0: lambda x, s: (x > 0).long()}", "returned a int64 tensor")),
    ("complex_output", _denoiser("def make():\n    return {0: lambda x, s: x.to(torch.complex64)}",
                                 "returned a complex64 tensor")),
    ("none_output", _denoiser("def make():\n    return {0: lambda x, s: None}", "returned NoneType")),
    ("list_output", _denoiser("def make():\n    return {0: lambda x, s: x.tolist()}", "returned list")),
    ("wrong_shape", _denoiser("def make():\n    return {0: lambda x, s: x[:, :3]}", "returned shape")),
    ("sleeps_forever", _denoiser("def make():\n    return {0: lambda x, s: time.sleep(10**6)}", "took more than 0.3 s",
                                 timeout=0.3)),
    ("timeout_negative", _denoiser("def make():\n    return ok", "timeout", timeout=-1.0)),
    ("timeout_inf", _denoiser("def make():\n    return ok", "timeout", timeout=float("inf"))),
]


# ---------------------------------------------------------------------------------------------
# train: the good run (12 steps, final_state.pt kept), broken, then resumed or extended
# ---------------------------------------------------------------------------------------------

def _train(breaker, match, total=EXTENDED, error="CheckpointError", threads=1, hold_lock=False):
    """An attempt training the broken copy to `total` steps (API train_run; CLI train)."""
    def build(d):
        from scoreprobe import errors
        from scoreprobe.training.train import TrainConfig, train_run
        breaker(d)
        holder = []

        def api():
            from scoreprobe.training.guard import RunLock
            before = torch.get_num_threads()
            torch.set_num_threads(threads)
            holder.extend([RunLock(d).acquire()] if hold_lock else [])
            try:
                train_run(TrainConfig(**{**CFG, "total_steps": total}), d, progress=False)
            finally:
                torch.set_num_threads(before)
                for lock in holder:
                    lock.release()
        argv = ["train", d, *TRAIN_ARGS, "--total-steps", total]
        argv[argv.index("--threads") + 1] = str(threads)
        return Attempt(api, None if hold_lock else argv, getattr(errors, error), match)
    return build


def _json(edit):
    def fix(d):
        meta = json.loads((d / "run.json").read_text())
        edit(meta)
        (d / "run.json").write_text(json.dumps(meta))
    return fix


def _state(edit, name="final_state.pt"):
    def fix(d):
        sd = torch.load(d / "final_state.pt", weights_only=True)
        edit(sd)
        torch.save(sd, d / name)
    return fix


def _log_line(line):
    def fix(d):
        lines = (d / "train_log.jsonl").read_text().splitlines(True)
        (d / "train_log.jsonl").write_text("".join(lines[:1] + [line] + lines[1:]))
    return fix


def _set(**kv):
    return lambda meta: meta.update(kv)


def _write(name, data):
    return lambda d: (d / name).write_bytes(data(d) if callable(data) else data)


def _foreign_weights(sd):
    sd.pop("run", None)
    sd["ema"] = {k: v + 1e-3 for k, v in sd["ema"].items()}


def _hold(d):
    pass


TRAIN_CASES = [
    ("log_nested_line", _train(_log_line("[" * 100_000 + "]" * 100_000 + "\n"), "not training-log records")),
    ("log_bad_json_line", _train(_log_line("{not json\n"), "not training-log records")),
    ("log_string_step", _train(_log_line('{"step": "4", "loss": 1.0}\n'), "not training-log records")),
    ("run_json_truncated", _train(_write("run.json", lambda d: (d / "run.json").read_bytes()[:150]), "readable JSON")),
    ("run_json_empty", _train(_write("run.json", b""), "readable JSON")),
    ("steps_strings", _train(_json(lambda m: m.update(checkpoint_steps=[str(s) for s in m["checkpoint_steps"]])),
                             "checkpoint step must be an integer")),
    ("steps_edited_down", _train(_json(lambda m: m.update(checkpoint_steps=m["checkpoint_steps"][:2])),
                                 "not the schedule")),
    ("steps_edited_down_resume", _train(_json(lambda m: m.update(checkpoint_steps=m["checkpoint_steps"][:2])),
                                        "not the schedule", total=CFG["total_steps"])),
    ("extended_from_strings", _train(_json(_set(extended_from=["6"])), "extended_from must be an integer")),
    ("extended_from_dict", _train(_json(_set(extended_from={"a": 6})), "extended_from must be a list")),
    ("extended_from_unreached", _train(_json(_set(extended_from=[6])), "not the schedule")),
    ("extended_from_beyond_total", _train(_json(_set(extended_from=[50])), "must increase")),
    ("total_steps_string", _train(_json(lambda m: m["config"].update(total_steps="12")), "total_steps must be")),
    ("final_state_other_run", _train(_state(lambda sd: sd.update(run="0" * 16)), "belongs to another run")),
    ("final_state_legacy_other_weights", _train(_state(_foreign_weights), "EMA weights at step 12 differ")),
    ("final_state_other_step", _train(_state(lambda sd: sd.update(step=4)), "holds step 4")),
    ("final_state_random_bytes", _train(_write("final_state.pt", NOISE), "final_state.pt is not a readable")),
    ("final_state_truncated", _train(_write("final_state.pt", lambda d: (d / "final_state.pt").read_bytes()[:999]),
                                     "final_state.pt is not a readable")),
    ("final_state_hostile_pickle", _train(_write("final_state.pt", lambda d: pickle.dumps(
        {"ema": CreatesFile(d.parent / "MARKER")})), "final_state.pt is not a readable")),
    ("resume_other_run", _train(_state(lambda sd: sd.update(run="1" * 16, step=4), "resume.pt"),
                                "belongs to another run", total=CFG["total_steps"])),
    ("threads_2_extension", _train(lambda d: None, "trained with 1 CPU thread", error="ConfigError", threads=2)),
    ("second_trainer", _train(_hold, "being trained by", error="ConfigError", hold_lock=True)),
]


def cases():
    """(name, surface, build) of every attempt."""
    return ([(f"denoiser_{n}", "denoiser", b) for n, b in DENOISER_CASES]
            + [(f"train_{n}", "train", b) for n, b in TRAIN_CASES])


# ---------------------------------------------------------------------------------------------
# Running an attempt: outcome, then what it did to the work folder
# ---------------------------------------------------------------------------------------------

def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def run_case(build, d, cwd):
    """(outcome, detail) of one attempt in the run copy `d` (work folder d.parent, CLI run from `cwd`)."""
    attempt = build(d)
    before = _snapshot(d.parent)
    threads = torch.get_num_threads()
    try:
        outcome, detail = run_attempt(lambda _: attempt, d, cwd)
    finally:
        torch.set_num_threads(threads)
    after = _snapshot(d.parent)
    if outcome == "code execution":
        return outcome, detail
    lost = [p for p in before if after.get(p) != before[p]]
    if lost:
        return "data lost", f"changed or removed: {lost[:5]}; {detail}"
    new = [p for p in after if p not in before]
    if new:
        return "late refusal", f"written before the refusal: {new[:5]}; {detail}"
    return outcome, detail


OUTCOMES = ("clean", "code execution", "data lost", "traceback", "late refusal", "silent", "wrong reason", "slow",
            "allocation")


def main(good, work):
    """Every attempt in a fresh copy of the good run `good` under `work`; prints the counts per surface."""
    import scoreprobe.cli  # noqa: F401  imports done before the first attempt is timed
    import scoreprobe.stats.clocks  # noqa: F401
    per = Counter()
    for name, surface, build in cases():
        folder = work / name
        shutil.copytree(good, folder / "run")
        outcome, detail = run_case(build, folder / "run", folder)
        per[surface, outcome] += 1
        if outcome != "clean":
            print(f"{name}: {outcome}: {detail.strip()[:300]}")
        shutil.rmtree(folder, ignore_errors=True)
    for surface, what in SURFACES.items():
        n = sum(v for (s, _), v in per.items() if s == surface)
        counts = " / ".join(f"{o} {per[surface, o]}" for o in OUTCOMES)
        print(f"issue 33, {what}: {n} attempts: {counts}")
    return per


if __name__ == "__main__":
    import tempfile
    import warnings
    sys.path.insert(0, str(Path(__file__).parent))
    from scoreprobe.training.train import TrainConfig, train_run
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="abuse-33-"))
    train_run(TrainConfig(**CFG), tmp / "good", progress=False)
    main(tmp / "good", tmp)
    shutil.rmtree(tmp, ignore_errors=True)
