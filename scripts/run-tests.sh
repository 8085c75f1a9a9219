#!/usr/bin/env bash
# `make test`: every test but the soaks, in three lanes at once on one build tree.
#   pace   the end-to-end tests timed against the job's own pace (label e2e-pace: a slowdown's
#          ratio, a pause, a healthy job's quiet), one at a time, at the CPU share they were
#          started with;
#   timed  the end-to-end tests timed against the wall clock (label e2e-timed: the checkpoint
#          campaign's SIGSTOPped rank named in time, the goodput ledger, a Redis failover, I/O
#          timeouts), one at a time, in a CPU group of 256 shares: a quarter of the pace lane's,
#          so the pace lane's job gets the CPU it wants first and this lane the rest of it;
#   rest   the unit suites and every other end-to-end test, two at a time, at a low CPU share
#          (low-cpu-share.sh: 16 shares against a session's 1024): they fill what the timed lanes
#          leave idle (their jobs wait on simulated GPUs most of the time) and yield the moment
#          one wants a core.
# Why: beside two ordinary tests at equal share on two cores, every rank of a paced job slowed
# alike (1.28x once), which ft rightly reports as a job-wide slowdown, and a SIGSTOPped rank once
# went unnamed in time. One lane for every timed test took about 1,000 s here, the critical path
# of make test; the two lanes take about 600 s and 400 s side by side, the rest about 700 s.
# Where no CPU cgroup can be made (not root, no cpu controller), the lanes run one after the
# other: the unit suites, the paced tests, the timed tests, the other end-to-end tests.
# Usage: run-tests.sh BUILD_DIR [TIMEOUT_S]
set -uo pipefail
build=${1:?usage: run-tests.sh BUILD_DIR [TIMEOUT_S]}
timeout_s=${2:-300}
here=$(dirname "$0")
ctest_args=(--test-dir "$build" --output-on-failure --timeout "$timeout_s")

# Each lane's lines carry its name, so that their interleaved output stays readable.
# run_lane NAME LABEL_REGEX [LAUNCHER...]: the lane's tests one at a time.
run_lane() {
  local name=$1 labels=$2
  shift 2
  "$@" ctest "${ctest_args[@]}" -L "$labels" -j 1 2>&1 | sed -u "s/^/[$name] /"
}
# run_rest LABEL_OPTION LABEL_REGEX [LAUNCHER...]
run_rest() {
  local option=$1 labels=$2
  shift 2
  "$@" ctest "${ctest_args[@]}" "$option" "$labels" -j 2 2>&1 | sed -u 's/^/[rest]  /'
}

if "$here/low-cpu-share.sh" --check; then
  echo "tests: the paced end-to-end ones one at a time; the wall-clock timed ones one at a time at" \
    "a quarter of their share; the rest beside them at a low CPU share"
  run_lane pace '^e2e-pace$' &
  pace_pid=$!
  run_lane timed '^e2e-timed$' "$here/low-cpu-share.sh" 256 &
  timed_pid=$!
  run_rest -LE 'soak|e2e-pace|e2e-timed' "$here/low-cpu-share.sh" 16
  rest_rc=$?
  wait "$pace_pid"
  pace_rc=$?
  wait "$timed_pid"
  timed_rc=$?
else
  echo "tests: no CPU cgroup can be made here (root and a cpu controller are needed): the unit" \
    "suites, then the paced end-to-end tests, then the timed ones, one at a time, then the other" \
    "end-to-end tests"
  run_rest -L unit || { echo "tests failed: the unit suites" >&2; exit 1; }
  run_lane pace '^e2e-pace$'
  pace_rc=$?
  run_lane timed '^e2e-timed$'
  timed_rc=$?
  run_rest -LE 'soak|unit|e2e-pace|e2e-timed'
  rest_rc=$?
fi

if [ "$pace_rc" -ne 0 ] || [ "$timed_rc" -ne 0 ] || [ "$rest_rc" -ne 0 ]; then
  echo "tests failed: pace rc=$pace_rc, timed rc=$timed_rc, rest rc=$rest_rc" >&2
  exit 1
fi
