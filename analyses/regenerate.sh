#!/usr/bin/env bash
# Every table, figure and the findings page that regenerates from the shipped results (exports, .json), no
# training: `bash analyses/regenerate.sh`, then `git status analyses/results docs` shows what changed (nothing,
# when the code that reads them is unchanged). Studies whose tables need their run directories (two_clocks,
# sampler_clocks, gpt_clocks, remedies' cpu preset, mechanism's remeasurement) are not in this list.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
run() { echo "== python analyses/$*"; python analyses/"$@" > /dev/null; }
for s in scaling capacity_exponent data_draws exactk_ladder gpt_dit_match sampler_scaling sudoku_transpose \
         mechanism_seeds atp_agreement oracle_samples decompose circuits; do
  run "$s" --from-results
done
run remedies --preset g3 --from-results
run circuits --series closed --from-results
run circuits --series gpt --from-results
run features --from-results
run features --causal --from-results
run mechanism --rereport analyses/results/mechanism.json
run findings
