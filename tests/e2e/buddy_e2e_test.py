#!/usr/bin/env python3
"""Buddy copies end to end (docs/checkpoints.md, "Buddy copies"): trainsim --sharded-optimizer
(every rank its own shard: nobody else holds its bytes) under libft.so with a periodic snapshot
every 10 steps, one ftworker per node with FT_CKPT_REPLICATE_EVERY=10 (each node pulls the newest
copy of the previous node's ranks into its memory and reports it in ft:{J}:ckpt:<step>:buddy),
ftmaster with FT_SHARDED_OPTIMIZER=1. No disk tier anywhere: the host arenas and the buddy
copies are the only copies. Termination saves are off and the master saves nothing once a
sharded rank is dead, so every survivor's newest copy is the last snapshot, step 30.

  --case kill       dp=2 tp=2 on two nodes (node0: ranks 0,1; node1: ranks 2,3). Rank 1 is
                    SIGKILLed at step 38 (trainsim --fault crash-kill) and its memory goes with it
                    (its arena file removed, as a pod's /dev/shm is). Its shard's only copy is the
                    buddy copy node1 holds: the plan names step 30 with node1's copy as rank 1's
                    one source; relaunched, rank 1's worker pulls it before the rank starts, every
                    rank restores step 30 and the job ends with trainsim_reference's checksums
                    (bit for bit the same training).
  --case node-lost  the same job; node1 lost at step 38: rank 3 crashes, its worker is SIGKILLed,
                    rank 2 too, node1's shared memory is wiped. Ranks 2 and 3 have their buddy
                    copies on node0; a replacement node2 (FT_NODE_RANKS=2-3) pulls them from
                    node0 before its ranks start, the job relaunched on node0,node2 restores step
                    30 everywhere and ends with the reference checksums.
"""

import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import check, fail  # noqa: E402
from ckpt_e2e_test import (CHUNK, FAST, SMALL, CkptCluster, check_reference, parse_args,  # noqa: E402
                           prefetch_report, wait_job_exit)

SHARDED = {"FT_SHARDED_OPTIMIZER": "1"}
EVERY = 10
SNAPSHOT = {"FT_CKPT_EVERY": str(EVERY), "FT_CKPT_ON_SIGNAL": "none"}
REPLICATE = {"FT_CKPT_REPLICATE_EVERY": str(EVERY)}
MODEL = ["--dp", "2", "--tp", "2", "--sharded-optimizer"] + SMALL
TOPOLOGY = ["--topology", "dp=2,tp=2,pp=1", "--order", "tp-dp-pp"]
STEPS, FAULT_STEP, PLANNED = 60, 38, 30
WORLD = 4
# Steps slow enough that the buddies pull step 30 (a poll a second) before the fault at step 38.
RUN = ["--steps", str(STEPS), "--compute-ms", "300"]


def start_worker(c, node, ranks):
    """A worker with buddy copies on, told the ranks its node runs (FT_NODE_RANKS: it prefetches
    their planned copies from other nodes), with no disk tier."""
    return c.start_worker(node, {**FAST, **CHUNK, **REPLICATE, "FT_NODE_RANKS": ranks})


def buddies(c, step):
    """{rank: CkptCopy} of ft:{J}:ckpt:<step>:buddy."""
    raw = c.db.command("HGETALL", c.key("ckpt:%d:buddy" % step)) or []
    return {int(r): json.loads(v) for r, v in zip(raw[0::2], raw[1::2])}


def wait_buddies(c, step, holders):
    """Waits until each rank's buddy copy of `step` is reported by its holder ({rank: node})."""
    def ready():
        got = buddies(c, step)
        return got if all(r in got and got[r]["node"] == n for r, n in holders.items()) else None
    got = c.wait_for(ready, 60, "buddy copies of step %d held by %s" % (step, holders), poll=0.2)
    for r, v in sorted(got.items()):
        check(v.get("buddy") is True and v.get("tiers") == ["replica"] and not v.get("torn"),
              "rank %d's buddy copy of step %d: %s" % (r, step, v))
    print("buddy copies of step %d: %s" % (step, {r: v["node"] for r, v in sorted(got.items())}))
    return got


def wait_plan(c, step, sources, nodes):
    """Waits until the master plans `step` with exactly `sources` ({rank: [(rank, node, tier)]})
    for the ranks named there, and the workers of `nodes` wrote it to their plan files. Returns
    the plan."""
    def ready():
        value = c.db.command("GET", c.key("restore"))
        plan = json.loads(value) if value else None
        if not plan or plan.get("step") != step:
            return None
        lines = {x["rank"]: [(s["rank"], s["node"], s["tiers"][0]) for s in x["sources"]] for x in plan["ranks"]}
        if len(lines) != WORLD or any(lines.get(r) != want for r, want in sources.items()):
            return None
        # Every live worker wrote that version to its plan file (after its prefetch of it
        # ended): ranks started now read it.
        for node in nodes:
            f = c.plan_file(node)
            if not f or f.get("version") != str(plan["version"]):
                return None
        return plan
    plan = c.wait_for(ready, 60, "a plan of step %d with sources %s" % (step, sources), poll=0.2)
    print("plan %d: step %d, sources %s" % (plan["version"], plan["step"],
                                            {x["rank"]: x["sources"] for x in plan["ranks"]}))
    return plan


def arena(c, node, rank):
    return os.path.join(c.arena_dir(node), "ft-ckpt.%s.%d" % (c.job, rank))


def check_prefetched(c, node, moved, source_node):
    """Before the relaunch (the relaunched job's snapshots start new prefetches): `node`'s worker
    pulled exactly the ranks `moved`, each from its buddy copy on `source_node`."""
    def done():
        report = prefetch_report(c, node)
        return report if report and report["step"] == PLANNED and report["state"] == "done" else None
    report = c.wait_for(done, 30, "%s's prefetch of step %d" % (node, PLANNED), poll=0.2)
    print("%s's prefetch: %s" % (node, json.dumps(report)))
    pulled = {x["rank"]: x for x in report["ranks"] if x["outcome"] == "pulled"}
    check(sorted(pulled) == moved, "%s pulled ranks %s, expected %s" % (node, sorted(pulled), moved))
    for r, x in sorted(pulled.items()):
        check(x["source"] == source_node and x["source_rank"] == r and x["bytes"] > 0,
              "rank %d pulled from %s rank %s (%d bytes), expected its buddy copy on %s" %
              (r, x["source"], x["source_rank"], x["bytes"], source_node))
    return pulled


def check_restored(moved, c):
    restored = c.restored()
    check(restored == {r: PLANNED for r in range(WORLD)},
          "restored steps %s, expected step %d on every rank" % (restored, PLANNED))
    for r in moved:
        lines = [line for line in c.rank_log(r) if "restored" in line and "ft[" in line]
        print("rank %d: %s" % (r, lines))
        check(any("prefetched" in line for line in lines),
              "rank %d did not restore from the copy pulled from its buddy: %s" % (r, lines))


def wait_dead(c, rank):
    """Waits until the rank's worker reported its death (an exit or error event)."""
    c.wait_for(lambda: [e for e in c.events(rank=rank) if e["kind"] in ("exit", "error")], 60,
               "rank %d's crash reported" % rank, poll=0.2)


def first_run(c, fault_rank):
    c.start_master(TOPOLOGY, {**FAST, **SHARDED})
    start_worker(c, "node0", "0-1")
    start_worker(c, "node1", "2-3")
    c.start_ckpt_job(MODEL + RUN + ["--fault", "crash-kill", "--fault-rank", str(fault_rank),
                                    "--fault-step", str(FAULT_STEP)], env=SNAPSHOT)
    # Each node holds the other's ranks' step-30 copies before the fault can take anything.
    return wait_buddies(c, PLANNED, {0: "node1", 1: "node1", 2: "node0", 3: "node0"})


def case_kill(args):
    with CkptCluster(args, job="ck-buddy-kill", nodes=2, ranks_per_node=2) as c:
        first_run(c, 1)
        wait_dead(c, 1)
        # Its memory went with it: only node1's buddy copy holds its shard now.
        os.unlink(arena(c, "node0", 1))
        rc = wait_job_exit(c, 90, "the job stopped after rank 1's crash")
        check(rc != 0, "the crashed job exited %d" % rc)
        # Rank 1's one source is node1's buddy copy (the others keep their own arenas: node0,
        # evicted for the crash, is listed after node1 while its worker serves).
        wait_plan(c, PLANNED, {1: [(1, "node1", "replica")], 2: [(2, "node1", "arena"), (2, "node0", "replica")]},
                  ["node0", "node1"])
        pulled = check_prefetched(c, "node0", [1], "node1")
        c.start_ckpt_job(MODEL + RUN, env=SNAPSHOT)
        rc = wait_job_exit(c, 120, "the relaunched job to finish")
        check(rc == 0, "the relaunched job exited %d" % rc)
        check_restored([1], c)
        check_reference(c, args, MODEL + ["--steps", str(STEPS)], WORLD)
        print("OK: rank 1 SIGKILLed at step %d, its arena gone -> plan step %d with node1's buddy copy as its source "
              "-> node0's worker pulled it (%d bytes) -> every rank restored step %d -> reference checksums"
              % (FAULT_STEP, PLANNED, pulled[1]["bytes"], PLANNED))


def case_node_lost(args):
    with CkptCluster(args, job="ck-buddy-node", nodes=2, ranks_per_node=2) as c:
        first_run(c, 3)
        wait_dead(c, 3)
        # node1 is gone: its worker, its other rank, its shared memory.
        c.stop_worker("node1", sig=signal.SIGKILL)
        pids = c.rank_pids()
        try:
            os.kill(pids[2], signal.SIGKILL)
        except (KeyError, ProcessLookupError):
            pass
        c.drop_node("node1")
        rc = wait_job_exit(c, 90, "the job stopped after node1 was lost")
        check(rc != 0, "the job exited %d" % rc)
        # Ranks 2 and 3: node0's buddy copies are a source (node1's own copies may still be
        # listed until the master drops them; the pull skips a node that does not answer).
        def node0_holds(plan):
            lines = {x["rank"]: x["sources"] for x in plan["ranks"]}
            return all(any(s["node"] == "node0" and s["tiers"] == ["replica"] for s in lines[r]) for r in (2, 3))
        plan = wait_plan(c, PLANNED, {}, ["node0"])
        check(node0_holds(plan), "the plan lists no buddy copy on node0 for ranks 2, 3: %s" % plan["ranks"])
        start_worker(c, "node2", "2-3")
        pulled = check_prefetched(c, "node2", [2, 3], "node0")
        # node2's arrival may make the master publish the plan again (a newer version, same
        # step): the plan files of both live workers must hold the version Redis holds now, not
        # the one read before node2 started.
        plan = wait_plan(c, PLANNED, {}, ["node0", "node2"])
        check(node0_holds(plan), "the plan lists no buddy copy on node0 for ranks 2, 3: %s" % plan["ranks"])
        c.start_ckpt_job(MODEL + RUN, env=SNAPSHOT, node_names=["node0", "node2"])
        rc = wait_job_exit(c, 120, "the relaunched job to finish")
        check(rc == 0, "the relaunched job exited %d" % rc)
        check_restored([2, 3], c)
        spaces = c.check_namespaces()
        check("node1" not in spaces, "node1's namespace came back: %s" % spaces)
        check_reference(c, args, MODEL + ["--steps", str(STEPS)], WORLD)
        print("OK: node1 lost at step %d (worker SIGKILLed, ranks dead, memory wiped) -> plan step %d -> node2 "
              "pulled ranks 2, 3 from node0's buddy copies (%d bytes) -> every rank restored step %d -> reference "
              "checksums" % (FAULT_STEP, PLANNED, sum(x["bytes"] for x in pulled.values()), PLANNED))


def main():
    args = parse_args()
    cases = {"kill": case_kill, "node-lost": case_node_lost}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
