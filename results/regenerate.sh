#!/usr/bin/env bash
# Regenerates everything in results/ from models/*.yaml (and budgets/*.yaml):
#   results/<model>.csv, .svg, .png   overhead-vs-budget sweep of every strategy
#   results/max-batch/<model>.csv     largest batch per strategy within $MEMORY
#   results/report.md                 Table 2 style summary of all sweeps
# Sweeps and max-batch runs resume: re-running after an interruption only
# solves what is missing. Delete a CSV to recompute it from scratch.
#
#   bash results/regenerate.sh                 # all models
#   bash results/regenerate.sh models/vgg16.yaml
#   MEMORY=32GB TIME_LIMIT=300 bash results/regenerate.sh
#
# The committed results were made with TIME_LIMIT=30 (per solve): the exact
# strategies then report `feasible` with their proven gap where 30 s was not
# enough to prove optimality. For the three large models (mobilenet, gpt2,
# resnet50) the max-batch search ran without the MILP strategies, whose
# dozens of solves per search did not fit the session:
#   MAXBATCH_STRATEGIES=checkpoint-all,remat-fast,checkmate-approx,ap-greedy,lin-greedy,griewank-logn,dtr-greedy
set -euo pipefail
cd "$(dirname "$0")/.."

MEMORY=${MEMORY:-16GB}
TIME_LIMIT=${TIME_LIMIT:-600}
STRATEGIES=${STRATEGIES:-all}
MAXBATCH_STRATEGIES=${MAXBATCH_STRATEGIES:-$STRATEGIES}
cargo build --release --quiet
remat=target/release/remat

models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  # Smallest first, so the quick results land early.
  models=(models/vgg16.yaml models/vgg19.yaml models/unet.yaml models/fcn8.yaml
          models/segnet.yaml models/mobilenet.yaml models/gpt2.yaml models/resnet50.yaml)
fi
mkdir -p results/max-batch
for m in "${models[@]}"; do
  name=$(basename "$m" .yaml)
  "$remat" sweep "$m" --strategies "$STRATEGIES" --time-limit "$TIME_LIMIT" \
    -o "results/$name.csv" --plot "results/$name.svg"
  "$remat" plot "results/$name.csv" -o "results/$name.png"
  "$remat" max-batch "$m" --memory "$MEMORY" --strategies "$MAXBATCH_STRATEGIES" --time-limit "$TIME_LIMIT" \
    -o "results/max-batch/$name.csv"
done
# The sweep CSVs only (the *_bench.csv files are the benchmarks').
sweeps=()
for c in results/*.csv; do
  case "$c" in *_bench.csv | *_bench_*.csv) ;; *) sweeps+=("$c") ;; esac
done
"$remat" report "${sweeps[@]}" -o results/report.md
