"""Start-up cost: `import scoreprobe` and `scoreprobe --help` against `import torch`, in fresh processes.

    python bench/bench_startup.py [--repeat 5]

Prints the median wall time of each and a last line of ratios. Targets (issue 13): `import
scoreprobe` no more than `import torch` + 20% (it is lazy: PEP 562), `scoreprobe --help` ≤ 1 s.
"""
import argparse
import statistics
import subprocess
import sys
import time

CASES = {
    "import torch": [sys.executable, "-c", "import torch"],
    "import scoreprobe": [sys.executable, "-c", "import scoreprobe"],
    "import scoreprobe; sp.Parity": [sys.executable, "-c", "import scoreprobe as sp; sp.Parity"],
    "scoreprobe --help": [sys.executable, "-m", "scoreprobe", "--help"],
}


def wall(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    wall(CASES["import torch"])                      # warm the file cache once
    med = {name: statistics.median(wall(cmd) for _ in range(args.repeat)) for name, cmd in CASES.items()}
    for name, t in med.items():
        print(f"{name:<32s} {t:6.2f} s")
    torch_t = med["import torch"]
    print(f"ratios to import torch: import scoreprobe {med['import scoreprobe'] / torch_t:.2f}, "
          f"scoreprobe --help {med['scoreprobe --help'] / torch_t:.2f} (target <= 1.2; --help <= 1 s)")


if __name__ == "__main__":
    main()
