#!/usr/bin/env bash
# make fuzz: runs each libFuzzer binary of tests/fuzz for SECONDS, from its seeds (written by the
# target's replayer) and its regressions folder, keeping what it learns in BUILD/corpus/<target>
# between runs. A crash, leak, timeout or out-of-memory input lands in BUILD/artifacts/<target>/
# and fails the run: fix the parser, then add the input to tests/fuzz/regressions/<target>/ so
# every `make test` replays it.
#   scripts/run-fuzzers.sh BUILD SECONDS TARGET...
set -uo pipefail
build=$1 seconds=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
total_runs=0 failed=()
for t in "$@"; do
  corpus="$build/corpus/$t" artifacts="$build/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  "$build/tests/fuzz/fuzz_${t}_replay" --write-seeds "$corpus" >/dev/null || { failed+=("$t"); continue; }
  log="$build/fuzz-$t.log"
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$artifacts/" "$corpus" "$root/tests/fuzz/regressions/$t" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
  total_runs=$((total_runs + ${runs:-0}))
  if [ $rc -ne 0 ] || [ -n "$(ls -A "$artifacts")" ]; then
    failed+=("$t")
    echo "fuzz $t: FAILED (status $rc): $(ls "$artifacts" | head -3 | tr '\n' ' ')see $log"
  else
    echo "fuzz $t: ${runs:-?} runs in $seconds s, no crash"
  fi
done
echo "RESULT fuzz targets=$# seconds_each=$seconds runs=$total_runs failed=${#failed[@]}"
[ ${#failed[@]} -eq 0 ]
