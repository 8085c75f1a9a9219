#!/usr/bin/env bash
# make bench-overhead: what libft.so adds, measured with and without it in one run.
#   - per call, from overhead_bench: a kernel launch (<<<>>>) and an ncclAllReduce enqueue,
#     RUNS alternating runs each way, medians, added = median(with) - median(without);
#   - per training step: trainsim 8 ranks (dp=2 tp=2 pp=2) at a ~100 ms step, median step
#     time of every rank after warm-up, ratio with/without.
# On the gpusim stand-ins by default; BENCH_REAL=1 uses whatever libcudart/libnccl the loader
# finds (a GPU host). Ends with one line: RESULT overhead ...
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
runs=${RUNS:-5}
libft=$root/$build/preload/libft.so
work=$build/tests/workloads/trainsim
if [ "${BENCH_REAL:-0}" != 1 ]; then
  export LD_LIBRARY_PATH=$root/$build/gpusim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export GPUSIM_KERNEL_LIBS=$root/$work/libtrainsim_kernels.so
fi
export FT_JOB=bench-overhead-$$

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

launch_with=() launch_without=() nccl_with=() nccl_without=()
for ((i = 0; i < runs; i++)); do
  line=$("$build/bench/overhead_bench")
  launch_without+=("$(grep -o 'launch_ns=[0-9.]*' <<<"$line" | cut -d= -f2)")
  nccl_without+=("$(grep -o 'nccl_ns=[0-9.]*' <<<"$line" | cut -d= -f2)")
  line=$(LD_PRELOAD=$libft "$build/bench/overhead_bench")
  launch_with+=("$(grep -o 'launch_ns=[0-9.]*' <<<"$line" | cut -d= -f2)")
  nccl_with+=("$(grep -o 'nccl_ns=[0-9.]*' <<<"$line" | cut -d= -f2)")
done
lw=$(printf '%s\n' "${launch_with[@]}" | median)
lo=$(printf '%s\n' "${launch_without[@]}" | median)
nw=$(printf '%s\n' "${nccl_with[@]}" | median)
no=$(printf '%s\n' "${nccl_without[@]}" | median)
echo "bench: kernel launch ${lo} ns without, ${lw} ns with; ncclAllReduce enqueue ${no} ns without, ${nw} ns with (medians of $runs)"

# Median step time (ms) over every rank's steps after the first two.
step_ms() {
  python3 tests/workloads/trainsim/launch.py --nodes 2 --ranks-per-node 4 --timeout 300 -- \
    "$work/trainsim" --dp 2 --tp 2 --pp 2 --steps 12 --compute-ms 100 --verbose 2>/dev/null |
    grep -o 'step=[0-9]* ms=[0-9.]*' | awk -F'[= ]' '$2 >= 2 { print $4 }' | median
}
steps_with=() steps_without=()
step_runs=${STEP_RUNS:-5}
for ((i = 0; i < step_runs; i++)); do
  steps_without+=("$(step_ms)")
  steps_with+=("$(LD_PRELOAD=$libft step_ms)")
done
sw=$(printf '%s\n' "${steps_with[@]}" | median)
so=$(printf '%s\n' "${steps_without[@]}" | median)
echo "bench: trainsim step ${so} ms without, ${sw} ms with (median of $step_runs runs, 8 ranks)"

awk -v lw="$lw" -v lo="$lo" -v nw="$nw" -v no="$no" -v sw="$sw" -v so="$so" 'BEGIN {
  printf "RESULT overhead nccl_added_ns=%.0f launch_added_ns=%.0f step_ratio=%.4f step_ms=%.1f\n",
         nw - no, lw - lo, sw / so, so }'
