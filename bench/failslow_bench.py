#!/usr/bin/env python3
"""make bench-failslow: how fast a slow rank is named, whether a healthy node is ever evicted for
slowness, and whether the job is back at full speed after the slow node is replaced.

    python3 bench/failslow_bench.py [BUILD_DIR]      (default: build)

Runs the fail-slow scenarios of tests/e2e/failslow_e2e_test.py REPEAT times each (default 3) on
trainsim/gpusim with real ftworkers, ftmaster and redis-server — rank 5 of 8 (dp=2 tp=4, 2 nodes)
1.2x, 1.5x (FT_SLOW_ACTION=evict: saved, stopped, node1 evicted, relaunched on node2) and 3x
slower (dp=8, in the backward pass), 1.5x behind overlapped gradient all-reduces and in a pipeline
stage, every rank 1.5x slower (job-wide, FT_SLOW_ACTION=evict), and one DP communicator's
transfer or one pipeline link 20 ms slower (gpusim's GPUSIM_NCCL_SLOW) — and collects each run's
`RESULT failslow case=...` line. Ends with one line:

  RESULT failslow localize_s=<median over the localized runs> localize_max_s=<max>
         false_evictions=<evictions of a node that was not the slow one, all runs>
         step_time_after_ratio=<median over the evict runs> runs=<n> failed=<n>

localize_s: from the fault (trainsim's own timestamp) to the straggler incident's decision.
step_time_after_ratio: rank 0's step time after the replacement over before the fault (lower
quartiles). Targets (docs/failslow.md): localize_s <= 30, false_evictions = 0, ratio <= 1.03.
Environment: REPEAT, CASES (comma-separated, default the eight above).
"""
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    repeat = int(os.environ.get("REPEAT", "3"))
    cases = os.environ.get("CASES", "localize-x1.2,evict,localize-x3,overlap,pipeline,job-wide,slow-link,slow-p2p-link").split(",")
    env = dict(os.environ)
    env.update({"LD_LIBRARY_PATH": os.path.join(build, "gpusim"),
                "GPUSIM_KERNEL_LIBS": os.path.join(build, "tests/workloads/trainsim/libtrainsim_kernels.so"),
                "PYTHONDONTWRITEBYTECODE": "1"})
    trainsim = os.path.join(build, "tests/workloads/trainsim")
    argv = [sys.executable, os.path.join(ROOT, "tests/e2e/failslow_e2e_test.py"),
            "--launch", os.path.join(ROOT, "tests/workloads/trainsim/launch.py"),
            "--trainsim", os.path.join(trainsim, "trainsim"), "--libft", os.path.join(build, "preload/libft.so"),
            "--ftworker", os.path.join(build, "ftworker/ftworker"), "--ftmaster", os.path.join(build, "ftmaster/ftmaster"),
            "--reference", os.path.join(trainsim, "trainsim_reference")]
    localize, ratios, false_evictions, runs, failed = [], [], 0, 0, 0
    for k in range(repeat):
        for case in cases:
            runs += 1
            out = subprocess.run(argv + ["--case", case], env=env, capture_output=True, text=True, timeout=900)
            m = re.search(r"^RESULT failslow (.*)$", out.stdout, re.M)
            if out.returncode != 0 or not m:
                failed += 1
                tail = [line for line in out.stdout.splitlines() if "FAIL" in line][-1:]
                print("run %d %s: failed (exit %d) %s" % (k + 1, case, out.returncode, tail), flush=True)
                continue
            fields = dict(kv.split("=", 1) for kv in m.group(1).split())
            print("run %d %s: %s" % (k + 1, case, m.group(1)), flush=True)
            if "localize_s" in fields:
                localize.append(float(fields["localize_s"]))
            if "step_time_after_ratio" in fields:
                ratios.append(float(fields["step_time_after_ratio"]))
            false_evictions += int(fields.get("false_evictions", "0"))
    print("RESULT failslow localize_s=%s localize_max_s=%s false_evictions=%d step_time_after_ratio=%s runs=%d "
          "failed=%d" % ("%.1f" % statistics.median(localize) if localize else "nan",
                         "%.1f" % max(localize) if localize else "nan", false_evictions,
                         "%.3f" % statistics.median(ratios) if ratios else "nan", runs, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
