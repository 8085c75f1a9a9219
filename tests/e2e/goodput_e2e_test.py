#!/usr/bin/env python3
"""Goodput end to end: ftmaster's account of where a job's GPU time went, checked cause by
cause against what this test timed itself from trainsim's own step lines (each carries the
wall clock it ended at) and from watching the job's state.

  --case crash-relaunch-slow
        dp=4 on two nodes, steps of ~200 ms, a periodic save every 20 steps and no termination
        save: rank 3 is SIGKILLed at step 38 and the launcher tears the others down 0.1 s later
        (torchrun's agent), so the relaunch restores step 20 and does steps 21-37 again. The
        test relaunches 2 s after the master stopped the job; in the relaunch rank 1 computes
        3x slower for 8 steps from step 45. `ftmaster goodput --json` then has:
          startup    the first launch's start to its first step, and the relaunch's
          detection + save-stop   the crash to the job stopped
          relaunch   the job stopped to the relaunch's ranks up
          redone     the relaunch's first step to its step 38
          slowed     the steps' time beyond a normal step while over 1.25x it (the 8 slow
                     steps on a quiet machine; the host's contention too on a loaded one)
          idle       nothing (a rank was up throughout, or the job was stopped)
        and one incident that cost the sum of the phases from the crash to step 38, ETTR their
        productive share. Tolerances: a summary pass and a report (~1 s) per boundary.
"""

import argparse
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import check, fail  # noqa: E402
from ckpt_e2e_test import CkptCluster, FAST, SMALL  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster", "reference"):
        p.add_argument("--" + name, required=name != "reference")
    p.add_argument("--case", required=True)
    return p.parse_args()


def step_lines(text):
    """[(rank, step, ms, unix_ms)] of trainsim's --verbose step lines."""
    return [(int(r), int(s), float(ms), int(t)) for r, s, ms, t in
            re.findall(r"trainsim rank=(\d+) step=(\d+) ms=([0-9.]+) unix_ms=(\d+)", text)]


def step_done_ms(lines, step):
    """When every rank had done `step` (the slowest rank's line), unix ms."""
    times = [t for _, s, _, t in lines if s == step]
    check(times, "no rank printed step %d" % step)
    return max(times)


def smoothed_steps(ms_by_step, steps):
    """Each step's time as the median of the 5 steps around it (within `steps`)."""
    steps = [s for s in steps if s in ms_by_step]
    out = []
    for i in range(len(steps)):
        around = [ms_by_step[s] for s in steps[max(0, i - 2):i + 3]]
        out.append(statistics.median(around))
    return out


def job_state(c):
    return c.db.command("HGET", c.key("master"), "job_state")


def goodput(c):
    return json.loads(c.master_cli("goodput", "--json"))


def near(what, got, want, below, above):
    ok = want - below <= got <= want + above
    print("%-22s ft %7.2f s   test %7.2f s   (allowed %.2f..%.2f)%s" %
          (what, got, want, want - below, want + above, "" if ok else "   <-- OFF"))
    return ok


def run_case(args, fault):
    """fault: "crash" (restores the periodic step: steps redone) or "hang" (the just-in-time
    save of the step reached: nothing redone but the step the hang broke off)."""
    steps, crash_step, crashed, every = 60, 38, 3, 20
    slow_rank, slow_step, slow_steps, factor = 1, 45, 8, 3
    model = ["--dp", "4"] + SMALL + ["--steps", str(steps), "--compute-ms", "200", "--verbose"]
    with CkptCluster(args, job="gp-" + fault, nodes=2, ranks_per_node=2) as c:
        c.start_master([], FAST)
        c.start_ckpt_workers(FAST)
        t_launch1 = time.time() * 1000
        if fault == "crash":
            c.start_ckpt_job(model + ["--fault", "crash-kill", "--fault-rank", str(crashed), "--fault-step",
                                      str(crash_step)],
                             env={"FT_CKPT_EVERY": str(every), "FT_CKPT_ON_SIGNAL": "none"},
                             launch_args=["--teardown", "torchrun"])
        else:
            c.start_ckpt_job(model + ["--fault", "hang-kernel", "--fault-rank", str(crashed), "--fault-step",
                                      str(crash_step)], env={"FT_CKPT_EVERY": str(every)})
        # The master's stop, timed as it happens (the launcher may exit later: its ranks save on
        # the stop's SIGTERM first).
        c.wait_for(lambda: job_state(c) == "stopped", 120, "the job stopped by the master", poll=0.05)
        t_stopped = time.time() * 1000
        c.wait_for(lambda: c.job_proc.poll() is not None, 60, "the first launch gone", poll=0.1)
        run1 = step_lines(c.job_output())
        first1 = step_done_ms(run1, 0)  # steps count from 0
        reached = max(s for r, s, _, _ in run1 if r == crashed)
        check(reached == crash_step - 1, "rank %d's last step %d, expected %d" % (crashed, reached, crash_step - 1))
        t_fault = max(t for r, s, _, t in run1 if r == crashed and s == reached)
        restore = every if fault == "crash" else reached + 1  # a step is labelled by the steps done
        plan = c.wait_for(lambda: (c.plan() or {}).get("step") == restore and c.plan(), 30,
                          "the plan naming step %d" % restore, poll=0.2)
        print("first launch: %s after step %d, plan step %d (version %d)" % (fault, reached, plan["step"],
                                                                           plan["version"]))

        time.sleep(2)  # the relaunch's own delay: charged to relaunch
        t_relaunch = time.time() * 1000
        c.start_ckpt_job(model + ["--fault", "slow", "--fault-rank", str(slow_rank), "--fault-step", str(slow_step),
                                  "--slow-steps", str(slow_steps), "--slow-factor", str(factor)],
                         env={"FT_CKPT_EVERY": str(every)})
        c.wait_for(lambda: c.job_proc.poll() is not None, 180, "the relaunch finished", poll=0.1)
        check(c.job_proc.returncode == 0, "the relaunch exited %d" % c.job_proc.returncode)
        check(set(c.restored().values()) == {restore}, "restored %s, expected step %d" % (c.restored(), restore))
        c.wait_for(lambda: job_state(c) == "finished", 30, "the job finished", poll=0.1)
        out2 = c.job_output()
        run2 = step_lines(out2)
        resumed = [int(t) for t in re.findall(r"trainsim rank=\d+ resumed step=%d unix_ms=(\d+)" % (restore + 1), out2)]
        check(len(resumed) == 4, "resumed lines %s" % resumed)
        t_resumed = max(resumed)
        t_past = step_done_ms(run2, reached + 1)
        # Slowed, by the ledger's rule (docs/goodput.md) applied to the steps as trainsim timed
        # them: a step whose smoothed time (the median of the 5 around it) is over 1.25x the
        # job's normal step (the best smoothed one) counts its excess. On a quiet machine that is
        # just rank 1's 8 slow steps; on a loaded one the host's contention counts as well, as it
        # does for the ledger (the job really ran slower).
        own = {s: ms for r, s, ms, _ in run2 if r == 0}
        own1 = {s: ms for r, s, ms, _ in run1 if r == 0}
        smoothed = smoothed_steps(own1, range(1, reached + 1)) + smoothed_steps(own, range(reached + 2, steps))
        normal = min(smoothed)
        slowed = sum(ms - normal for ms in smoothed if ms > 1.25 * normal) / 1000
        print("relaunch: resumed %.2f s after it started, step %d done %.2f s later; normal step %.0f ms, "
              "the slow steps %s ms" % ((t_resumed - t_relaunch) / 1e3, reached + 1, (t_past - t_resumed) / 1e3,
                                       normal, [round(own[s]) for s in range(slow_step, slow_step + slow_steps)]))

        time.sleep(1.5)  # the ledger's last write after the job finished
        g = goodput(c)
        print("$ ftmaster goodput\n" + c.master_cli("goodput"), end="")
        wall = g["wall_s"]
        ok = True
        # The first launch's start to its first step (a launch's first step is start-up), and
        # the relaunch's start to its first step after the restore.
        ok &= near("startup", wall["startup"], (first1 - t_launch1 + t_resumed - t_relaunch) / 1e3, 1.5, 1.5)
        ok &= near("detection+save-stop", wall["detection"] + wall["save-stop"], (t_stopped - t_fault) / 1e3, 1.5, 1.5)
        # Ends when the relaunch's first rank is up: a little after the launcher started.
        ok &= near("relaunch", wall["relaunch"], (t_relaunch - t_stopped) / 1e3, 1.0, 2.5)
        ok &= near("redone", wall["redone"], (t_past - t_resumed) / 1e3, 1.5, 1.5)
        ok &= near("slowed", wall["slowed"], slowed, 0.6 * slowed, 0.6 * slowed + 1.0)
        ok &= near("idle", wall["idle"], 0, 0, 1.0)
        productive = (t_fault - first1 + step_done_ms(run2, steps - 1) - t_past) / 1e3 - slowed
        ok &= near("productive", wall["productive"], productive, 3.0, 3.0)
        if not ok:  # the ledger's own state (normal step, furthest step, redo budget) says why
            print("ledger state: %s" % c.db.command("HGET", c.key("master"), "goodput"))
        check(ok, "a cause of the goodput ledger is off what the test timed (above)")
        rank_s = g["rank_s"]
        for cause, seconds in wall.items():
            check(abs(rank_s[cause] - 4 * seconds) <= 0.01 * max(1.0, rank_s[cause]),
                  "%s: %.2f rank-s for %.2f s on 4 ranks" % (cause, rank_s[cause], seconds))
        ettr = rank_s["productive"] / sum(rank_s.values())
        check(abs(g["ettr"] - ettr) < 1e-9 and 0 < ettr < 1, "ETTR %s, productive share %s" % (g["ettr"], ettr))
        # One incident, the crash's, charged from the crash until the job passed step 38 again.
        incidents = c.incidents()
        check(len(g["incidents"]) == 1, "goodput's incidents %s" % g["incidents"])
        inc = g["incidents"][0]
        check(inc["id"] in [i["id"] for i in incidents], "incident %s is not in the stream %s" %
              (inc["id"], [i["id"] for i in incidents]))
        check(not inc["open"], "the incident still costs: %s" % inc)
        lost = sum(inc["rank_s"].values()) / 4
        want = (t_past - t_fault) / 1e3  # the crash to step 38 done again
        check(near("incident's cost", lost, want, 2.5, 2.5), "the incident's cost is off")
        check(inc["rank_s"]["slowed"] == 0, "slow steps charged to the crash: %s" % inc)
        print("OK (%s): ETTR %.3f; fault -> stopped %.2f s, relaunch %.2f s, redone %.2f s, slowed %.2f s, "
              "as the test timed them" % (fault, ettr, (t_stopped - t_fault) / 1e3, wall["relaunch"], wall["redone"],
                                         wall["slowed"]))


def main():
    args = parse_args()
    cases = {"crash-relaunch-slow": lambda a: run_case(a, "crash"), "hang-relaunch-slow": lambda a: run_case(a, "hang")}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
