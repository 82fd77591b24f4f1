#!/usr/bin/env bash
# GPU check (issue #14): install the project, run the `gpu` tests, the GPU benchmarks and the GPU
# preset of analyses/two_clocks, each under a time limit, and write everything under $OUT:
#
#   OUT=/tmp/gpu bash bench/gpu_check.sh              # on a CUDA machine (≈ 8 min at most)
#   OUT=/tmp/dry bash bench/gpu_check.sh --dry-run    # the same steps on CPU at toy size (≈ 3 min)
#
# WHEELS=/path/to/wheels adds a local wheel folder for packages the machine's image lacks (it has no
# network). Every step's exit status goes to $OUT/summary.txt; a failing step does not stop the
# others. The exit status is the number of failed steps (0 = all passed).
set -uo pipefail
cd "$(dirname "$0")/.."

DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; fi
OUT="${OUT:-$(mktemp -d -t gpu_check.XXXX)}"
mkdir -p "$OUT"
NOISE="--rows 1000000"; DEV=cuda; RES=64; IVP=64; TWO="--device cuda --preset gpu"; ENS="--members 32 --steps 500"; STACK="--k 32 --res 64"
BASINS="--arch 6,128 --bf16 --peak-tflops 67"
EVOLVE="--steps all --res 256 --sigma-start 0.25,0.5,1,2 --models-per-pass auto"   # 24 shipped checkpoints
if [ "$DRY" = 1 ]; then
    NOISE="--rows 20000"; DEV=cpu; RES=8; IVP=4; TWO="--device cpu --smoke"; ENS="--members 2 --steps 20"; STACK="--k 2 --res 4 --n-steps 4"
    BASINS="--bf16"; EVOLVE="--steps 0,500,607 --res 8 --sigma-start 0.5,1"
fi
FAILED=0

step() {   # step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.txt, record the status
    local name="$1" limit="$2"; shift 2
    local t0; t0=$(date +%s)
    timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
    local rc=$?
    [ "$rc" -ne 0 ] && FAILED=$((FAILED + 1))
    echo "$name rc=$rc $(( $(date +%s) - t0 ))s: $*" | tee -a "$OUT/summary.txt"
}

: > "$OUT/summary.txt"
echo "gpu_check $(date -u +%FT%TZ) dry_run=$DRY git=$(git rev-parse --short HEAD 2>/dev/null)" | tee -a "$OUT/summary.txt"
if [ "$DRY" = 0 ]; then
    step install 240 python -m pip install -q ${WHEELS:+--find-links "$WHEELS"} -e ".[dev,bench]"
fi
step machine 30 bash -c 'nvidia-smi || true; python -c "import torch; print(torch.__version__, \
torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else \"cpu\")"'
step gpu_tests 180 python -m pytest -q -m gpu -p no:cacheprovider
step bench_basins 180 python bench/bench_basins.py --device "$DEV" --res "$RES" --ivp-points "$IVP"
step bench_basins_mfu 180 python bench/bench_basins.py --device "$DEV" --res "$RES" --ivp-points 2 $BASINS
step bench_noise 120 python bench/bench_noise.py $NOISE
step bench_stack 180 python bench/bench_stack.py --device "$DEV" $STACK
if [ -f bench/bench_ensemble.py ]; then
    step bench_ensemble 180 python bench/bench_ensemble.py --device "$DEV" $ENS
fi
# the basin evolution target (30 checkpoints x 256^2 x 4 sigma in <= 2 min): 24 checkpoints here, x 30/24
step basin_evolution 300 scoreprobe basins $EVOLVE --device "$DEV" --out "$OUT/evolution.zarr" --no-animate
step two_clocks 300 python analyses/two_clocks $TWO --out "$OUT/runs" --results "$OUT/two_clocks"
echo "failed steps: $FAILED (results in $OUT)" | tee -a "$OUT/summary.txt"
exit "$FAILED"
