#!/usr/bin/env python3
"""Relaunches in place, the way torchrun --max_restarts, a Slurm requeue or a Kubernetes restart
bring a job back: the same ranks on the same nodes, seconds (or less) after the teardown, with
the default settings — no disk tiers, no FT_NODE_RANKS. trainsim under launch.py's torchrun
model (--teardown torchrun: the others SIGTERMed 0.1 s after a rank dies), dp=2 tp=2 on two
nodes (ranks 0,1 on node0, ranks 2,3 on node1; rank 1 holds rank 3's shard).

  --case restart-in-place     rank 3 SIGKILLed at step 30, the group restarted in place 1 s
                              after the last rank went: every rank restores the same step (at
                              most one behind the step reached), rank 3's shard pulled by
                              node1's worker from rank 1's arena on node0 (it has no copy on its
                              node), and the job ends with trainsim_reference's checksums
  --case restart-before-plan  the same with the restart at once (--restart-delay 0): where the
                              relaunch comes before the plan its ranks wait for it
  --case requeue-before-plan  every rank SIGTERMed at once past step 10 (a preemption), the
                              job launched again the moment the launcher exited (a requeue): the
                              ranks come before the plan of the termination saves; they wait for
                              it (the workers saw their ranks end) instead of training from step 0

Each prints the restored step, the step reached, and the time from the crash (the incident's
first event) to the last rank's resume.
"""

import os
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import check, fail  # noqa: E402
from ckpt_e2e_test import CkptCluster, FAST, SMALL, check_reference, parse_args, wait_job_exit  # noqa: E402


def resumed_unix_ms(c):
    """{rank: unix ms} of each rank's first step after its restore (trainsim's "resumed" line)."""
    return {int(r): int(t) for r, t in re.findall(r"trainsim rank=(\d+) resumed step=\d+ unix_ms=(\d+)", c.job_output())}


def prefetched_ranks(c, node):
    """{rank: (step, source node, source rank)} node's worker says it pulled from another node."""
    return {int(r): (int(s), src, int(sr)) for r, s, src, sr in
            re.findall(r"rank (\d+): prefetched step (\d+) \(.*?\) from (\S+) \(copy of rank (\d+)\)",
                       c.worker_log(node))}


def restart_in_place(args, delay):
    steps, crash_step, crashed = 60, 30, 3
    model = ["--dp", "2", "--tp", "2"] + SMALL
    with CkptCluster(args, job="restart-%s" % str(delay).replace(".", "_"), nodes=2, ranks_per_node=2) as c:
        c.start_master(["--topology", "dp=2,tp=2,pp=1"], FAST)
        for node in c.node_names:  # the defaults: no FT_CKPT_DIR, no FT_CKPT_REMOTE_DIR, no FT_NODE_RANKS
            c.start_worker(node, c.ckpt_env(FAST))
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20", "--fault", "crash-kill",
                                  "--fault-rank", str(crashed), "--fault-step", str(crash_step),
                                  "--fault-restart", "0"],
                         launch_args=["--teardown", "torchrun", "--max-restarts", "1",
                                      "--restart-delay", str(delay)])
        rc = wait_job_exit(c, 150, "the job, restarted in place once, to finish")
        out = c.job_output()
        check("restart 1 of 1 in place" in out, "launch.py did not restart the group in place")
        check(rc == 0, "the job restarted in place exited %d" % rc)
        restored = c.restored()
        check(sorted(restored) == [0, 1, 2, 3] and len(set(restored.values())) == 1,
              "restored steps %s: expected one step on every rank" % restored)
        step = restored[0]
        check(crash_step - 1 <= step <= crash_step,
              "restored step %d, the crash was in step %d (at most one behind expected)" % (step, crash_step))
        pulled = prefetched_ranks(c, "node1")
        check(crashed in pulled and pulled[crashed][:2] == (step, "node0"),
              "node1's worker did not pull rank %d's shard of step %d from node0: %s (its prefetch report: %s)" %
              (crashed, step, pulled, c.hash_json("prefetch", "node1")))
        check_reference(c, args, model + ["--steps", str(steps)], 4)
        crash = [i for i in c.incidents() if crashed in [s["rank"] for s in i.get("suspects", [])]]
        fault_ms = min(i["first_event_unix_ms"] for i in crash) if crash else None
        resumed = resumed_unix_ms(c)
        took = (max(resumed.values()) - fault_ms) / 1000.0 if fault_ms and resumed else float("nan")
        for node in c.node_names:  # how the relaunch got its plan, for people
            for line in c.worker_log(node).splitlines():
                if re.search(r"settling|prefetched step|no final restore plan|restore plan version", line):
                    print("%s: %s" % (node, line[:220]))
        print("RESULT restart-delay=%s restored=%d reached=%d bit-identical=yes fault-to-resume=%.2fs "
              "rank%d-from=%s(rank %d)" % (delay, step, crash_step, took, crashed, pulled[crashed][1],
                                          pulled[crashed][2]))


def requeue_before_plan(args):
    steps = 400
    model = ["--dp", "2", "--tp", "2"] + SMALL
    with CkptCluster(args, job="requeue", nodes=2, ranks_per_node=2) as c:
        c.start_master(["--topology", "dp=2,tp=2,pp=1"], FAST)
        for node in c.node_names:
            c.start_worker(node, c.ckpt_env(FAST))
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20", "--verbose"],
                         launch_args=["--teardown", "slurm"])
        # A preemption once every rank trained a while (not after a fixed time: a loaded host
        # starts the ranks slowly): the launcher forwards SIGTERM to every rank, as srun does.
        c.wait_for(lambda: len(set(re.findall(r"trainsim rank=(\d+) step=(?:[1-9]\d+) ", c.job_output()))) == 4, 90,
                   "every rank past step 10")
        c.job_proc.send_signal(signal.SIGTERM)
        rc = wait_job_exit(c, 90, "the preempted job")
        check(rc != 0, "the preempted job exited %d" % rc)
        with open(c.job_out.name) as f:
            first = f.read()
        saved = {int(r): int(s) for r, s in re.findall(r"\[rank (\d+)\] .*termination save committed step=(\d+) ", first)}
        check(sorted(saved) == [0, 1, 2, 3] and len(set(saved.values())) == 1,
              "termination saves %s: expected one step on every rank" % saved)
        step = saved[0]
        # At once: the master has not judged the copies yet (a worker reports a copy within a
        # second of its commit).
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20"])
        rc = wait_job_exit(c, 120, "the requeued job")
        check(rc == 0, "the requeued job exited %d" % rc)
        restored = c.restored()
        waited = [r for r in range(4) if any("waits for the final restore plan" in line for line in c.rank_log(r))]
        check(restored == {r: step for r in range(4)},
              "restored %s, expected step %d (the termination saves) on every rank" % (restored, step))
        check_reference(c, args, model + ["--steps", str(steps)], 4)
        print("RESULT requeue restored=%d saved=%d ranks-that-waited-for-the-plan=%s" % (step, step, waited))


def main():
    args = parse_args()
    cases = {"restart-in-place": lambda: restart_in_place(args, 1.0),
             "restart-before-plan": lambda: restart_in_place(args, 0.0),
             "requeue-before-plan": lambda: requeue_before_plan(args)}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case]()


if __name__ == "__main__":
    main()
