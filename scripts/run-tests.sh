#!/usr/bin/env bash
# `make test`: every test but the soaks, in two streams at once on one build tree, then the
# checkpoint campaign.
#   timed  the end-to-end tests timed against the job's own pace or the wall clock (label
#          e2e-timed: a slowdown's ratio, a pause, a healthy job's quiet, a Redis failover, I/O
#          timeouts), one at a time, at the CPU share they were started with;
#   rest   the unit suites and every other end-to-end test, two at a time, at a low CPU share
#          (low-cpu-share.sh: 16 shares against a session's 1024): they fill what the timed test
#          leaves idle (about 80% of the machine: its job waits on simulated GPUs) and yield the
#          moment it wants a core. Their jobs' simulated GPUs (gpusim's stream workers) run at
#          256 shares beside them (low-cpu-share.sh, GPUSIM_DEVICE_CPU_GROUP): a real GPU is not
#          starved with its host, and a starved simulated one held collectives for seconds after
#          their peers finished them, which ft named hangs.
#   campaign  the checkpoint campaign's seeds (label e2e-campaign), once both streams are done,
#          two at a time on the whole machine: beside the timed stream their jobs' simulated
#          GPUs slowed a paced job enough for ft to name a job-wide slowdown or a slow link, and
#          timed themselves they made that stream 16 minutes.
# Why: beside two ordinary tests at equal share on two cores, every rank of a timed test's job
# slowed alike (1.28x once), which ft rightly reports as a job-wide slowdown, and a SIGSTOPped
# rank once went unnamed in time. The timed stream is the longest (about 710 s here); the rest
# ends before it (about 500 s); the campaign takes about 2 minutes after them.
# Where no CPU cgroup can be made (not root, no cpu controller), the streams run one after the
# other: the unit suites, the timed tests, the other end-to-end tests.
# Usage: run-tests.sh BUILD_DIR [TIMEOUT_S]
set -uo pipefail
build=${1:?usage: run-tests.sh BUILD_DIR [TIMEOUT_S]}
timeout_s=${2:-300}
here=$(dirname "$0")
ctest_args=(--test-dir "$build" --output-on-failure --timeout "$timeout_s")

# Each stream's lines carry its name, so that their interleaved output stays readable.
run_timed() {
  ctest "${ctest_args[@]}" -L e2e-timed -j 1 2>&1 | sed -u 's/^/[timed] /'
}
# run_rest LABEL_OPTION LABEL_REGEX [LAUNCHER...]
run_rest() {
  local option=$1 labels=$2
  shift 2
  "$@" ctest "${ctest_args[@]}" "$option" "$labels" -j 2 2>&1 | sed -u 's/^/[rest]  /'
}

if "$here/low-cpu-share.sh" --check; then
  echo "tests: the timed end-to-end ones one at a time; the rest beside them at a low CPU share;" \
    "then the checkpoint campaign"
  run_timed &
  timed_pid=$!
  run_rest -LE 'soak|e2e-timed|e2e-campaign' "$here/low-cpu-share.sh" 16
  rest_rc=$?
  wait "$timed_pid"
  timed_rc=$?
  ctest "${ctest_args[@]}" -L e2e-campaign -j 2 2>&1 | sed -u 's/^/[campaign] /'
  campaign_rc=${PIPESTATUS[0]}
else
  echo "tests: no CPU cgroup can be made here (root and a cpu controller are needed): the unit" \
    "suites, then the timed end-to-end tests one at a time, then the other end-to-end tests"
  run_rest -L unit || { echo "tests failed: the unit suites" >&2; exit 1; }
  run_timed
  timed_rc=$?
  run_rest -LE 'soak|unit|e2e-timed'
  rest_rc=$?
  campaign_rc=0  # the campaign ran with the rest
fi

if [ "$timed_rc" -ne 0 ] || [ "$rest_rc" -ne 0 ] || [ "$campaign_rc" -ne 0 ]; then
  echo "tests failed: timed rc=$timed_rc, rest rc=$rest_rc, campaign rc=$campaign_rc" >&2
  exit 1
fi
