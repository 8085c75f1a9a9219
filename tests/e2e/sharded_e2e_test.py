#!/usr/bin/env python3
"""Sharded optimizer state end to end: trainsim --sharded-optimizer (each DP rank owns a slice of
the momentum buffer, registered as optimizer.momentum.dp<i>) under libft.so, one ftworker per
node, ftmaster with FT_SHARDED_OPTIMIZER=1 (every (tp, pp, dp) is its own shard).

  --case hang   dp=2 tp=2 on two nodes (node0: ranks 0,1 = dp 0; node1: ranks 2,3 = dp 1), rank 3's
                kernel hangs at step 30. Its process is alive: the master's decision asks every
                rank to save, the hung suspect included (its agent thread and copy stream are
                free while its app stream is stuck); all four copies commit step 30, untorn; the
                verdict accepts the four single-copy shards; the relaunch restores step 30 on
                every rank (rank 3 from its own copy: nobody else holds its slice) and ends with
                trainsim_reference's checksums. Termination saves are off, so rank 3's copy can
                only come from the just-in-time save.
  --case hang-periodic
                the same with periodic snapshots (FT_CKPT_EVERY=5, libft.so's non-blocking
                snapshots; one of step 30 is taken right before the hang): the hung rank's
                just-in-time save of step 30 still goes through
  --case hang-host
                rank 3's training thread hangs in host code (a data loader) instead: it saves too
  --case replicated-only-copy
                no sharding, dp=1 tp=2 on two nodes: rank 1 hangs, its shard has no other replica,
                so it saves as an alive suspect; the relaunch restores step 30
  --case frozen the same job with FT_CKPT_EVERY=4; once periodic steps are verified rank 3 is
                stopped with SIGSTOP: a host-frozen suspect cannot save its slice, so the
                decision is "stop" with no save; the plan keeps the newest step all four ranks
                committed, the relaunch restores it and ends with the reference checksums
"""

import os
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import check, fail  # noqa: E402
from ckpt_e2e_test import (FAST, SMALL, CkptCluster, parse_args, relaunch_restores,  # noqa: E402
                           suspects, wait_job_exit)

SHARDED = {"FT_SHARDED_OPTIMIZER": "1"}


def case_hang(args, job_env=None, fault="hang-kernel", sharded=True):
    steps, hang_step = 60, 30
    if sharded:
        hung, world, dp, master_env = 3, 4, 2, {**FAST, **SHARDED}
        model = ["--dp", "2", "--tp", "2", "--sharded-optimizer"] + SMALL
    else:  # replicated, but every shard has one copy: the hung rank's shard has no other
        hung, world, dp, master_env = 1, 2, 1, FAST
        model = ["--dp", "1", "--tp", "2"] + SMALL
    with CkptCluster(args, job="ck-sharded", nodes=2, ranks_per_node=world // 2) as c:
        c.start_master(["--topology", "dp=%d,tp=2,pp=1" % dp, "--order", "tp-dp-pp"], master_env)
        c.start_ckpt_workers(FAST)
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20", "--fault", fault,
                                  "--fault-rank", str(hung), "--fault-step", str(hang_step)],
                         env={"FT_CKPT_ON_SIGNAL": "none", **(job_env or {})})
        inc = c.wait_for(lambda: c.incidents("hang"), 60, "hang incident")[0]
        print("incident %s: %s suspects=%s decision=%s\n  %s" % (
            inc["id"], inc["kind"], suspects(inc), inc["decision"], inc.get("message", "")))
        check(suspects(inc) == [(hung, "node1")], "suspects %s, expected rank %d on node1" % (suspects(inc), hung))
        check(inc["decision"] == "save-then-stop", "decision %s" % inc["decision"])
        check("alive suspect %d" % hung in inc.get("message", ""),
              "the decision does not say the hung rank saves too: %s" % inc.get("message"))
        check(sharded or "no healthy replica of its shard" in inc.get("message", ""),
              "the decision does not say why the hung rank saves: %s" % inc.get("message"))
        rc = wait_job_exit(c, 60, "the job stopped by the master")
        check(rc != 0, "the hung job exited %d" % rc)

        # Every rank saved — the hung one too — the state after the last completed step.
        acks = c.acks("save")
        print("save acks: %s" % sorted((a["rank"], a["result"], a["message"]) for a in acks))
        saved = {a["rank"]: a for a in acks if a["result"] == "done"}
        check(sorted(saved) == list(range(world)),
              "ranks that acknowledged a save %s, expected all %d (the hung rank %d included)" %
              (sorted(saved), world, hung))
        labels = {r: int(re.search(r"step=(\d+)", a["message"]).group(1)) for r, a in saved.items()}
        check(set(labels.values()) == {hang_step}, "saves labelled %s, expected step %d" % (labels, hang_step))
        copies = c.copies(hang_step)
        print("copies of step %d: %s" % (hang_step, {r: (v.get("node"), v.get("torn")) for r, v in copies.items()}))
        check(sorted(copies) == list(range(world)), "copies of step %d from ranks %s" % (hang_step, sorted(copies)))
        check(not any(v.get("torn") for v in copies.values()), "a torn copy: %s" % copies)
        verdict = c.wait_for(lambda: c.verdict(hang_step), 30, "the verdict of step %d" % hang_step)
        print("verdict: %s" % verdict)
        check(verdict["state"] == "verified" and verdict["shards"] == world,
              "step %d not accepted over %d shards (one per rank): %s" % (hang_step, world, verdict))
        check("single" in verdict.get("why", "") and sharded == ("sharded" in verdict.get("why", "")),
              "the verdict does not say the shards are single copies (of a sharded optimizer: %s): %s" %
              (sharded, verdict))
        plan = c.wait_for(lambda: (c.plan() or {}).get("step") == hang_step and c.plan(), 30,
                          "the plan of step %d" % hang_step, poll=0.2)
        mine = next(r for r in plan["ranks"] if r["rank"] == hung)
        check([s["rank"] for s in mine["sources"]] == [hung],
              "rank %d's slice has a source other than its own copy: %s" % (hung, mine))

        relaunch_restores(c, args, model, steps, hang_step, world)
        lines = [line for line in c.rank_log(hung) if "restor" in line.lower()]
        print("rank %d: %s" % (hung, lines))
        c.check_namespaces()
        print("OK: %s optimizer, rank %d hung -> all %d ranks saved step %d (the suspect too) -> "
              "accepted -> relaunched -> all restored -> reference checksums" %
              ("sharded" if sharded else "replicated", hung, world, hang_step))


def complete_steps(c, world):
    """Steps of which every rank of the world has an untorn copy, oldest first."""
    out = []
    for step in c.steps():
        copies = c.copies(step)
        if sorted(r for r, v in copies.items() if not v.get("torn")) == list(range(world)):
            out.append(step)
    return out


def case_frozen(args):
    steps, frozen = 100000, 3
    model = ["--dp", "2", "--tp", "2", "--sharded-optimizer"] + SMALL
    world = 4
    with CkptCluster(args, job="ck-sharded-frozen", nodes=2, ranks_per_node=2) as c:
        c.start_master(["--topology", "dp=2,tp=2,pp=1", "--order", "tp-dp-pp"], {**FAST, **SHARDED})
        c.start_ckpt_workers(FAST)
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20"],
                         env={"FT_CKPT_ON_SIGNAL": "none", "FT_CKPT_EVERY": "4"})
        c.wait_for(lambda: [s for s in c.steps() if s >= 12 and (c.verdict(s) or {}).get("state") == "verified"],
                   60, "a verified periodic step >= 12")
        pid = c.wait_for(lambda: c.rank_pids().get(frozen), 10, "rank %d's pid" % frozen)
        os.kill(pid, signal.SIGSTOP)
        print("rank %d (pid %d) stopped with SIGSTOP" % (frozen, pid))
        try:
            inc = c.wait_for(lambda: c.incidents("host-frozen"), 60, "host-frozen incident")[0]
            print("incident %s: %s suspects=%s decision=%s\n  %s" % (
                inc["id"], inc["kind"], suspects(inc), inc["decision"], inc.get("message", "")))
            check(suspects(inc) == [(frozen, "node1")], "suspects %s" % suspects(inc))
            check(inc["decision"] == "stop", "decision %s, expected stop (a frozen rank cannot save its slice)" %
                  inc["decision"])
            check("rank %d of shard tp=1 pp=0 cannot save" % frozen in inc.get("message", ""),
                  "the decision does not say the frozen rank cannot save: %s" % inc.get("message"))
            rc = wait_job_exit(c, 60, "the job stopped by the master")
            check(rc != 0, "the stopped job exited %d" % rc)
        finally:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        check(not c.acks("save"), "save commands were acknowledged: %s" % c.acks("save"))
        complete = complete_steps(c, world)
        print("steps with a copy from every rank: %s (all steps: %s)" % (complete, c.steps()))
        check(complete, "no step with a copy from every rank")
        newest = complete[-1]
        plan = c.wait_for(lambda: (c.plan() or {}).get("step") == newest and c.plan(), 30,
                          "the plan of step %d (the newest every rank has)" % newest, poll=0.2)
        print("planned step %d (version %d)" % (plan["step"], plan["version"]))
        relaunch_restores(c, args, model, newest + 8, newest, world)
        c.check_namespaces()
        print("OK: sharded optimizer, rank %d frozen -> stop without a save -> the plan keeps step %d, the "
              "newest every rank committed -> relaunched -> all restored -> reference checksums" % (frozen, newest))


def main():
    args = parse_args()
    cases = {"hang": case_hang,
             "hang-periodic": lambda a: case_hang(a, {"FT_CKPT_EVERY": "5"}),
             "hang-host": lambda a: case_hang(a, fault="hang-host"),
             "replicated-only-copy": lambda a: case_hang(a, sharded=False),
             "frozen": case_frozen}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
