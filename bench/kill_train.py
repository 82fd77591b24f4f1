"""Kill-injection check of `scoreprobe train`: SIGKILL a training run at random moments, resume it,
and compare the run directory with an uninterrupted run.

    python bench/kill_train.py --n 20          # 20 kills at random moments (≈ 5 min on 2 cores)
    python bench/kill_train.py --n 10 --extend --pad-log 300000   # kills during an extension (600 -> 1200)
                                                                  # of a run whose log has 300 000 more lines

With --extend each trial first trains the run to 600 steps unkilled, then extends it to 1200 and
kills the extension; the reference is the same extension unkilled. --pad-log N prepends N log
records of step 0 (kept by every rewrite) to the log before the killed command, so the log rewrite
of each start (train_log.jsonl after a resume drops the lines past the state) takes a while and the
random kills land in it too.

A tiny DiT (width 32, depth 1, patch 1 on parity 3x4) trains 600 steps with one thread, so CPU
training is bitwise reproducible. For each trial the run is killed (SIGKILL) after a random delay,
then `scoreprobe train` is run again on the same directory until it finishes. The finished run
must equal the uninterrupted one: the same checkpoint files with bitwise-equal tensors, the same
training log (no duplicated or missing lines) and no `resume.pt` left. Prints one line per trial
and the counts; exit status 1 when any trial differs.
"""
import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARGS = ["--rule", "parity", "--G", "2", "--layout", "random", "--shape", "3x4", "--n-train", "8", "--n-heldout", "8",
        "--hidden-size", "32", "--depth", "1", "--num-heads", "2", "--patch-size", "1", "--batch-size", "16",
        "--total-steps", "600", "--n-checkpoints", "8", "--resume-every", "50", "--log-every", "25",
        "--device", "cpu", "--threads", "1"]


def train(run_dir, kill_after=None, total=600):
    """Run `scoreprobe train`; SIGKILL it after `kill_after` seconds. Returns (return code, seconds)."""
    args = list(ARGS)
    args[args.index("--total-steps") + 1] = str(total)
    cmd = [sys.executable, "-m", "scoreprobe", "-q", "train", str(run_dir), *args]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        p.wait(timeout=kill_after)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    return p.returncode, time.perf_counter() - t0


def pad(run_dir, n):
    """Prepend n log records of step 0 to RUN_DIR/train_log.jsonl (created when missing)."""
    if n:
        log = Path(run_dir) / "train_log.jsonl"
        old = log.read_text() if log.exists() else ""
        log.write_text("".join(
            json.dumps({"step": 0, "loss": 1.0, "pad": i}) + "\n" for i in range(n)) + old)


def same_run(a, b):
    """(equal, reason): checkpoints bitwise equal, logs equal, no resume.pt, same run.json config."""
    import torch
    if (b / "resume.pt").exists():
        return False, "resume.pt left behind"
    if any(p.name.endswith(".tmp") for p in b.rglob("*")):
        return False, "a temporary file left behind"
    names = sorted(p.name for p in (a / "ckpt").iterdir())
    if names != sorted(p.name for p in (b / "ckpt").iterdir()):
        return False, "different checkpoint files"
    for name in names:
        x, y = (torch.load(d / "ckpt" / name, weights_only=True) for d in (a, b))
        if any(not torch.equal(x["ema"][k], y["ema"][k]) for k in x["ema"]):
            return False, f"{name}: weights differ"
    if (a / "train_log.jsonl").read_text() != (b / "train_log.jsonl").read_text():
        return False, "training logs differ"
    if json.loads((a / "run.json").read_text())["config"] != json.loads((b / "run.json").read_text())["config"]:
        return False, "run.json configs differ"
    return True, "equal to the uninterrupted run"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20, help="trials")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    ap.add_argument("--extend", action="store_true", help="kill an extension 600 -> 1200 instead")
    ap.add_argument("--pad-log", type=int, default=0, metavar="N", help="N more log lines (step 0) before the kill")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kill_train_"))
    total = 1200 if args.extend else 600
    first = work / "first"
    if args.extend and train(first)[0] != 0:
        raise SystemExit("the first 600 steps failed")
    prepare = (lambda d: shutil.copytree(first, d)) if args.extend else (lambda d: d.mkdir())
    prepare(work / "ref")
    pad(work / "ref", args.pad_log)
    rc, full = train(work / "ref", total=total)
    if rc != 0:
        raise SystemExit("the uninterrupted run failed")
    rng, ok = random.Random(args.seed), 0
    for i in range(args.n):
        run = work / f"t{i}"
        prepare(run)
        pad(run, args.pad_log)
        delay = rng.uniform(0.5, full)          # start-up included: kills land anywhere in the run
        rc, _ = train(run, kill_after=delay, total=total)
        resumes = 0
        while rc != 0 and resumes < 3:
            rc, _ = train(run, total=total)
            resumes += 1
        equal, why = same_run(work / "ref", run) if rc == 0 else (False, f"resume failed (rc {rc})")
        ok += equal
        print(f"trial {i:2d}: killed after {delay:5.2f} s of {full:.2f} s, {resumes} resume(s): {why}", flush=True)
        shutil.rmtree(run, ignore_errors=True)
    shutil.rmtree(work)
    what = "extension 600 -> 1200" if args.extend else "run"
    print(f"train ({what}, {args.pad_log} padded log lines): {args.n} kills at random moments, {ok}/{args.n} "
          "finished runs equal to the uninterrupted run")
    return 0 if ok == args.n else 1


if __name__ == "__main__":
    sys.exit(main())
