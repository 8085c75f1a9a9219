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

  --case after-finish   the same job name launched twice, with a local disk tier (copies outlive
                        the arenas): the first launch crashes at step 30 and its restart in
                        place finishes step 60; the master withdraws the plan at the finish. The
                        second launch starts from scratch, crashes at step 20, and its restart
                        restores step 20 — not the first launch's step 30, still on disk and
                        reported again — and ends bit-identical to an uninterrupted 40-step run

  --case preemption     a sharded optimizer (dp=2 tp=2, every rank its own shard), SIGTERM to
                        every rank at a random moment of a random step (srun's, a preemption),
                        the job relaunched with the same command: every rank restores one step,
                        at most one behind the newest step a rank reached, bit-identical — never
                        a split between two steps, never nothing (issue 28 item 4)

--repeat N runs the case N times in a row and prints one line per run and a RESULT line.
"""

import argparse
import json
import os
import random
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt_e2e_test import CkptCluster, check_reference, wait_job_exit  # noqa: E402
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
    p.add_argument("--case", required=True, choices=sorted(CASES) + ["after-finish", "preemption"])
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


def restored_by_launch(out):
    """[{rank: step} before the restart, {rank: step} after it] from one launch.py run's output."""
    before, _, after = out.partition("in place")
    found = lambda text: {int(r): int(s) for r, s in re.findall(r"trainsim rank=(\d+) restored step=(\d+)", text)}
    return found(before), found(after)


def launch_twice(args, run):
    job = "relaunch-after-finish-%d-%d" % (os.getpid(), run)
    restart = ["--teardown", "torchrun", "--max-restarts", "1", "--restart-delay", "1"]
    with CkptCluster(args, job=job, nodes=2, ranks_per_node=2) as c:
        c.start_master(TOPOLOGY)
        for node in c.node_names:
            c.start_ckpt_worker(node)  # a local tier: the first launch's copies stay on disk
        c.start_ckpt_job(MODEL + ["--steps", str(STEPS), "--compute-ms", "20", "--fault", "crash-kill",
                                  "--fault-rank", str(FAULTY), "--fault-step", str(FAULT_STEP),
                                  "--fault-restart", "0"], timeout=150, launch_args=restart)
        c.wait_for(lambda: c.job_proc.poll() is not None, 170, "the first launch to end", poll=0.2)
        check(c.job_proc.returncode == 0, "the first launch exited %s" % c.job_proc.returncode)
        _, first = restored_by_launch(c.job_output())
        check(set(first.values()) == {FAULT_STEP}, "the first launch's restart restored %s" % first)
        c.wait_for(lambda: c.db.command("HGET", c.key("master"), "job_state") == "finished", 30, "job_state finished")
        plan = c.wait_for(lambda: (c.plan() or {}).get("step") == -1 and c.plan(), 30,
                          "the finished run's plan withdrawn (step -1)")
        old = c.copies(FAULT_STEP)
        check(len(old) >= 3, "the first launch's copies of step %d are gone from Redis: %s" % (FAULT_STEP, old))
        print("after the finish: plan %d step %d; %d copies of step %d still reported (tiers %s)" % (
            plan["version"], plan["step"], len(old), FAULT_STEP, sorted({t for v in old.values() for t in v["tiers"]})))

        steps_b, fault_b = 40, 20
        c.start_ckpt_job(MODEL + ["--steps", str(steps_b), "--compute-ms", "20", "--fault", "crash-kill",
                                  "--fault-rank", str(FAULTY), "--fault-step", str(fault_b),
                                  "--fault-restart", "0"], timeout=150, launch_args=restart)
        c.wait_for(lambda: c.job_proc.poll() is not None, 170, "the second launch to end", poll=0.2)
        out = c.job_output()
        check("restart 1 of 1 in place" in out, "launch.py did not restart the second launch:\n" + out[-3000:])
        check(c.job_proc.returncode == 0, "the second launch exited %s" % c.job_proc.returncode)
        start, restart_b = restored_by_launch(out)
        check(not start, "the second launch restored %s at its start: the finished run's state" % start)
        steps = set(restart_b.values())
        check(sorted(restart_b) == list(range(WORLD)) and len(steps) == 1,
              "the second launch's restart restored %s: expected one step on all %d ranks" % (restart_b, WORLD))
        step = steps.pop()
        check(fault_b - 1 <= step <= fault_b,
              "restored step %d: the second launch had reached step %d (the first launch's step %d is of "
              "a finished run)" % (step, fault_b, FAULT_STEP))
        check_reference(c, args, MODEL + ["--steps", str(steps_b)], WORLD)
        rewinds = json.loads(c.db.command("GET", c.key("ckpt:rewinds")) or "{}").get("rewinds", [])
        print("run %d: the second launch started from scratch and its restart restored step %d on every rank, "
              "bit-identical; rewinds %s" % (run, step, [(w["step"], w["why"]) for w in rewinds]), flush=True)
        return fault_b - step


def preempt_once(args, run):
    """One preemption of a sharded job with the defaults; returns how many steps the restore is
    behind the newest step a rank reached."""
    steps = 200
    model = MODEL + ["--sharded-optimizer", "--steps", str(steps), "--compute-ms", "20"]
    job = "relaunch-preempt-%d-%d" % (os.getpid(), run)
    rng = random.Random(1000 + run)
    with CkptCluster(args, job=job, nodes=2, ranks_per_node=2) as c:
        c.start_master(TOPOLOGY, {"FT_SHARDED_OPTIMIZER": "1"})  # what a sharded job's deployment says
        for node in c.node_names:
            c.start_worker(node)  # memory only
        c.start_ckpt_job(model + ["--verbose"], timeout=150, launch_args=["--teardown", "slurm"])
        at = rng.randrange(15, 40)
        c.wait_for(lambda: re.search(r"trainsim rank=\d+ step=%d " % at, c.job_output()), 90, "step %d" % at, poll=0.01)
        time.sleep(rng.uniform(0, 0.03))  # anywhere in a step of about 25 ms
        c.job_proc.send_signal(signal.SIGTERM)  # srun forwards it to every rank
        rc = wait_job_exit(c, 60, "the preempted job")
        check(rc == 128 + signal.SIGTERM, "the preempted job exited %d, expected %d" % (rc, 128 + signal.SIGTERM))
        reached = {}
        for r, st in re.findall(r"trainsim rank=(\d+) step=(\d+) ", c.job_output()):
            reached[int(r)] = max(reached.get(int(r), 0), int(st) + 1)
        saves = {}
        for r in range(WORLD):
            for line in c.rank_log(r):
                m = re.search(r"termination save committed step=(\d+) ", line)
                if m:
                    saves.setdefault(r, []).append(int(m.group(1)))
        c.start_ckpt_job(model, timeout=150)  # the same command, no signal
        c.wait_for(lambda: c.job_proc.poll() is not None, 120, "the relaunched job to end", poll=0.2)
        check(c.job_proc.returncode == 0, "the relaunched job exited %s" % c.job_proc.returncode)
        restored = c.restored()
        step_set = set(restored.values())
        check(sorted(restored) == list(range(WORLD)) and len(step_set) == 1,
              "run %d: the relaunch restored %s (signalled after step %d; termination saves %s, reached %s)" % (
                  run, restored, at, saves, reached))
        step = step_set.pop()
        newest = max(reached.values())
        check(step >= newest - 1, "run %d: restored step %d, ranks reached %s (termination saves %s)" % (
            run, step, reached, saves))
        check_reference(c, args, MODEL + ["--sharded-optimizer", "--steps", str(steps)], WORLD)
        print("run %d: SIGTERM after step %d: termination saves %s, reached %s -> restored step %d on every rank, "
              "bit-identical" % (run, at, saves, reached, step), flush=True)
        return newest - step


def main():
    args = parse_args()
    if args.case == "preemption":
        behind = [preempt_once(args, run) for run in range(args.repeat)]
        print("RESULT relaunch case=preemption runs=%d restored_all=%d max_steps_behind=%d" % (
            len(behind), len(behind), max(behind)))
        print("OK: preemption: %d of %d runs restored one step on every rank, at most %d behind, bit-identical"
              % (len(behind), args.repeat, max(behind)))
        return
    if args.case == "after-finish":
        behind = [launch_twice(args, run) for run in range(args.repeat)]
        print("RESULT relaunch case=after-finish runs=%d max_steps_behind=%d" % (len(behind), max(behind)))
        print("OK: after-finish: %d of %d runs started the second launch from scratch and restored its own step"
              % (len(behind), args.repeat))
        return
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
