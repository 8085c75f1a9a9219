#!/usr/bin/env python3
"""Recovery the way jobs really fail and come back, with the settings a new user starts with:
no disk tiers, no periodic saves, no FT_NODE_RANKS, nothing tuned. trainsim (dp=2 tp=2 on two
simulated nodes, rank 3 on node1 holds the shard rank 1 holds on node0) under libft.so, one
ftworker per node, ftmaster, a real redis-server; launch.py plays torchrun, restarting the failed
group in place with the same command line (--max-restarts), as torchrun's elastic agent, a Slurm
requeue or a Kubernetes restart do.

  --case exception      rank 3 ends by a failure through its exit path at step 30 (exit(1), what
                        an uncaught Python exception does), torchrun 1.13's default monitor
                        (the others SIGTERMed 5 s later), an elastic restart at once: a crash
                        incident names rank 3 and its exit status, the job is never `finished`,
                        and the restarted group restores one step on every rank, at most one
                        behind the step reached, and ends bit-identical to an uninterrupted run
  --case kill-in-place  rank 3 SIGKILLed at step 30, the rest SIGTERMed 0.1 s later (torchrun's
                        agent), the group restarted in place 1 s after the last rank went: the
                        same bounds; rank 3 has no copy of its own (it was killed), so its shard
                        comes from its replica on node0
  --case elastic        the same, restarted at once (torchrun --max_restarts): the ranks start
                        before the master has judged the copies, and wait for its plan
                        (measured with --repeat; ckpt.e2e_restart-before-plan is its make-test case)

--repeat N runs the case N times in a row and prints one line per run and a RESULT line.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt_e2e_test import CkptCluster, check_reference  # noqa: E402
from cluster import check  # noqa: E402

STEPS, FAULT_STEP, FAULTY = 60, 30, 3
MODEL = ["--dp", "2", "--tp", "2", "--param-bytes", "256kb", "--hidden", "4096"]
TOPOLOGY = ["--topology", "dp=2,tp=2,pp=1"]
WORLD = 4

CASES = {
    # fault, launch.py's teardown and restart, what the incident's evidence must say of rank 3
    "exception": ("fail", ["--grace", "5", "--kill-after", "30", "--max-restarts", "1"],
                  "exited with status 1"),
    "kill-in-place": ("crash-kill", ["--teardown", "torchrun", "--max-restarts", "1", "--restart-delay", "1"],
                      "rank 3"),
    "elastic": ("crash-kill", ["--teardown", "torchrun", "--max-restarts", "1"], "rank 3"),
}


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster", "reference"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--case", required=True, choices=sorted(CASES))
    p.add_argument("--repeat", type=int, default=1)
    return p.parse_args()


def run_once(args, case, run):
    fault, launch_args, evidence = CASES[case]
    job = "relaunch-%s-%d-%d" % (case, os.getpid(), run)
    with CkptCluster(args, job=job, nodes=2, ranks_per_node=2) as c:
        c.start_master(TOPOLOGY)
        for node in c.node_names:
            c.start_worker(node)  # no FT_CKPT_DIR, no remote directory: memory only
        t0 = time.monotonic()
        c.start_ckpt_job(MODEL + ["--steps", str(STEPS), "--compute-ms", "20", "--fault", fault,
                                  "--fault-rank", str(FAULTY), "--fault-step", str(FAULT_STEP),
                                  "--fault-restart", "0"],
                         timeout=150, launch_args=launch_args)
        c.wait_for(lambda: c.job_proc.poll() is not None, 170, "the job, restarted in place, to end", poll=0.2)
        rc = c.job_proc.returncode
        out = c.job_output()
        check("restart 1 of 1 in place" in out, "launch.py did not restart the group:\n" + out[-3000:])
        check(rc == 0, "the restarted group exited %s" % rc)
        crashes = c.incidents("crash")
        check(crashes, "no crash incident; incidents: %s" % [i["kind"] for i in c.incidents()])
        inc = crashes[0]
        named = sorted((s["rank"], s["node"]) for s in inc["suspects"])
        check((FAULTY, "node1") in named, "the crash incident names %s, expected rank 3 on node1" % named)
        text = json.dumps(inc)
        check(evidence in text, "the crash incident does not say '%s': %s" % (evidence, text[:1500]))
        check("exit code 0" not in text and "code 0)" not in text,
              "the incident calls the failure 'code 0': %s" % text[:1500])
        restored = c.restored()
        steps = set(restored.values())
        check(sorted(restored) == list(range(WORLD)) and len(steps) == 1,
              "the restarted ranks restored %s: expected one step on all %d ranks" % (restored, WORLD))
        step = steps.pop()
        check(FAULT_STEP - 1 <= step <= FAULT_STEP,
              "restored step %d; the job had reached step %d (at most one behind)" % (step, FAULT_STEP))
        check_reference(c, args, MODEL + ["--steps", str(STEPS)], WORLD)
        resumed = [line for line in out.splitlines() if "resumed step=" in line]
        took = time.monotonic() - t0
        print("run %d: %s, incident %s naming %s, restored step %d of %d on every rank, bit-identical; "
              "%.1f s in all (%d resumed lines)" % (run, case, inc["kind"], named, step, FAULT_STEP, took,
                                                      len(resumed)), flush=True)
        return step


def main():
    args = parse_args()
    results = []
    for run in range(args.repeat):
        results.append(run_once(args, args.case, run))
    behind = [FAULT_STEP - s for s in results]
    print("RESULT relaunch case=%s runs=%d restored_all=%d max_steps_behind=%d" % (
        args.case, len(results), len(results), max(behind)))
    print("OK: %s: %d of %d runs restored one step on every rank, at most %d behind, bit-identical" % (
        args.case, len(results), args.repeat, max(behind)))


if __name__ == "__main__":
    main()
