#!/usr/bin/env bash
# make bench-overhead: what libft.so adds, measured with and without it in one run.
#   - per call, from overhead_bench: a kernel launch (<<<>>>) and an ncclAllReduce enqueue,
#     RUNS alternating runs each way, medians, added = median(with) - median(without);
#   - per training step: trainsim 8 ranks (dp=2 tp=2 pp=2) at a ~100 ms step, median step
#     time of every rank after warm-up; STEP_RUNS pairs of runs, one without and one with
#     libft.so back to back (the order alternates from pair to pair, so neither side always
#     runs second), the ratio taken within each pair (a pair shares the machine's load of the
#     moment) and the median of those ratios reported with their spread (min..max) and
#     interquartile range.
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
# trainsim registers its state with libft.so (--ft save: no ftworker here, so no restore plan
# to ask for); the arenas, which outlive the ranks by design, go to a directory removed at exit.
FT_CKPT_ARENA_DIR=$(mktemp -d /dev/shm/ft-bench-overhead.XXXXXX)
export FT_CKPT_ARENA_DIR
trap 'rm -rf "$FT_CKPT_ARENA_DIR"' EXIT

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
    "$work/trainsim" --dp 2 --tp 2 --pp 2 --steps 12 --compute-ms 100 --verbose --ft save 2>/dev/null |
    grep -o 'step=[0-9]* ms=[0-9.]*' | awk -F'[= ]' '$2 >= 2 { print $4 }' | median
}
ratios=() steps_with=() steps_without=()
step_runs=${STEP_RUNS:-16}
for ((i = 0; i < step_runs; i++)); do
  if ((i % 2 == 0)); then
    without=$(step_ms)
    with=$(LD_PRELOAD=$libft step_ms)
  else
    with=$(LD_PRELOAD=$libft step_ms)
    without=$(step_ms)
  fi
  steps_without+=("$without")
  steps_with+=("$with")
  ratios+=("$(awk -v w="$with" -v o="$without" 'BEGIN { printf "%.5f", w / o }')")
  echo "bench: pair $((i + 1))/$step_runs: step ${without} ms without, ${with} ms with, ratio ${ratios[-1]}"
done
sw=$(printf '%s\n' "${steps_with[@]}" | median)
so=$(printf '%s\n' "${steps_without[@]}" | median)
# Median, min..max and quartiles (the medians of the lower and upper halves) of the pair ratios.
read -r ratio rmin rmax q1 q3 < <(printf '%s\n' "${ratios[@]}" | sort -g | awk '
  function med(lo, hi,   n) { n = hi - lo + 1; return n % 2 ? v[lo + (n - 1) / 2] : (v[lo + n / 2 - 1] + v[lo + n / 2]) / 2 }
  { v[NR] = $1 }
  END { h = int(NR / 2); printf "%.4f %.4f %.4f %.4f %.4f\n", med(1, NR), v[1], v[NR], med(1, h), med(NR - h + 1, NR) }')
echo "bench: trainsim step ${so} ms without, ${sw} ms with (medians of $step_runs runs each, 8 ranks);" \
     "ratio with/without per pair: median ${ratio}, spread ${rmin}..${rmax}, interquartile ${q1}..${q3}"

awk -v lw="$lw" -v lo="$lo" -v nw="$nw" -v no="$no" -v r="$ratio" -v rmin="$rmin" -v rmax="$rmax" \
    -v q1="$q1" -v q3="$q3" -v n="$step_runs" -v so="$so" 'BEGIN {
  printf "RESULT overhead nccl_added_ns=%.0f launch_added_ns=%.0f step_ratio=%.4f step_ratio_spread=%.4f..%.4f step_ratio_iqr=%.4f..%.4f step_pairs=%d step_ms=%.1f\n",
         nw - no, lw - lo, r, rmin, rmax, q1, q3, n, so }'
