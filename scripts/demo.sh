#!/usr/bin/env bash
# The main job: an 8-rank trainsim job (dp=2, tp=2, pp=2) on two simulated nodes of four
# ranks, on the CPU stand-ins for the CUDA runtime and NCCL. Prints each rank's parameter
# checksum, checks data-parallel replicas against each other and against the single-process
# reference, and ends with one RESULT line.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$build/tests/workloads/trainsim
steps=${DEMO_STEPS:-50}
model=(--dp 2 --tp 2 --pp 2 --steps "$steps")

export LD_LIBRARY_PATH=$root/$build/gpusim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GPUSIM_KERNEL_LIBS=$root/$work/libtrainsim_kernels.so

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "demo: 8 ranks on 2 simulated nodes (dp=2 tp=2 pp=2), $steps steps"
start=$(date +%s.%N)
python3 tests/workloads/trainsim/launch.py --nodes 2 --ranks-per-node 4 --timeout 120 -- \
  "$work/trainsim" "${model[@]}" | tee "$log"
end=$(date +%s.%N)

expected=$("$work/trainsim_reference" "${model[@]}")
ok=1
ranks=0
for r in $(seq 0 7); do
  got=$(grep -o "trainsim rank=$r .*checksum=[0-9a-f]*" "$log" | grep -o 'checksum=[0-9a-f]*' || true)
  want=$(grep "trainsim rank=$r " <<<"$expected" | grep -o 'checksum=[0-9a-f]*')
  if [ -n "$got" ] && [ "$got" = "$want" ]; then
    ranks=$((ranks + 1))
  else
    echo "demo: rank $r ${got:-printed no checksum}, reference $want" >&2
    ok=0
  fi
done
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
echo "RESULT demo ranks=8 nodes=2 steps=$steps wall_s=$wall ranks_matching_reference=$ranks ok=$ok"
[ "$ok" = 1 ]
