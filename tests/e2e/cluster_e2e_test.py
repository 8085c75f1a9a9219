#!/usr/bin/env python3
"""A job on a Redis Cluster: trainsim on gpusim under libft.so, one ftworker per simulated node
and ftmaster, all given --redis redis+cluster://<the six nodes> (3 masters with one replica
each, tests/redis_cluster_fixture.py, formed by redis-cli --cluster create).

  --case detect    dp=2 tp=2 pp=2, rank 5's kernel hangs: the hang incident names rank 5
                   (node1), the decision is save-then-stop, the healthy ranks' saves are
                   acknowledged, the job stops; the job's keys are on the cluster: the job-wide
                   ones in the slot of ft:{J}, the per-rank and per-node ones in their groups' slots
                   (docs/redis-schema.md, "Slots"); `ftmaster status` reads the cluster
  --case failover  the same job; once the master published the timeouts it learnt from the
                   running job, the master of the shard holding the job-wide slot is
                   SIGKILLed: its replica takes over, the hang (after the failover) is still
                   detected and decided, and no event is lost: every event each worker
                   reported (its own count, logged when it stops) is in the stream, and none
                   was dropped
  --case failover-at-start
                   the shard holding the job-wide slot fails over while the job starts: node1's
                   worker has written its node's restore plan, node0's starts during the
                   failover and cannot read its own until the replica took over, so node0's
                   ranks wait in ft_restore while node1's reach their first collectives. With
                   a warm-up (2 s) shorter than that wait, no incident may come of it (CI: a
                   transport hang of the healthy start, the job stopped); the job runs on and
                   the later hang is decided as in `detect`
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cluster import Cluster, check, fail  # noqa: E402
from redis_cluster_fixture import RedisCluster, key_slot  # noqa: E402

MODEL = ["--dp", "2", "--tp", "2", "--pp", "2"]
TOPOLOGY = ["--topology", "dp=2,tp=2,pp=2", "--order", "tp-dp-pp"]
FAST = {"FT_TIMEOUT_WARMUP": "2s", "FT_TIMEOUT_MIN_SAMPLES": "5"}


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--case", required=True)
    return p.parse_args()


def suspects(incident):
    return sorted((s["rank"], s["node"]) for s in incident["suspects"])


def check_decided(c, inc):
    print("incident %s: kind=%s suspects=%s decision=%s decide_ms=%.0f"
          % (inc["id"], inc["kind"], suspects(inc), inc["decision"], inc["decide_ms"]), flush=True)
    check(suspects(inc) == [(5, "node1")], "suspects %s, expected rank 5 on node1" % suspects(inc))
    check(inc["decision"] == "save-then-stop", "decision %s" % inc["decision"])
    c.wait_for(lambda: c.job_proc.poll() is not None, 60, "the job stopped by the master")
    acks = [json.loads(f["json"]) for _, f in c.stream("acks")]
    saved = sorted({a["rank"] for a in acks if a["result"] == "done" and a["message"].startswith("saved step=")})
    check(saved == [0, 1, 2, 3, 4, 6, 7], "save acknowledged by ranks %s, expected every healthy rank" % saved)
    evicted = c.db.command("SMEMBERS", c.key("evicted"))
    check(evicted == ["node1"], "evicted %s" % evicted)


def job_slot_keys(c, rc):
    """{slot: number of keys} of the job's slots on the masters, and the job-wide slot."""
    slot = key_slot(c.key("leader"))
    out = {}
    for s in rc.servers:
        if not s.running():
            continue
        with s.client() as db:
            if "role:master" not in db.command("INFO", "replication"):
                continue
            cursor = "0"
            while True:
                cursor, keys = db.command("SCAN", cursor, "MATCH", "ft:{%s*" % c.job, "COUNT", "1000")
                for k in keys:
                    out.setdefault(key_slot(k), []).append(k)
                if cursor == "0":
                    break
    return slot, out


def case_detect(args):
    with Cluster(args, job="cl-hang", redis=RedisCluster()) as c:
        rc = c.redis
        c.start_master(TOPOLOGY, FAST)
        c.start_workers(FAST)
        c.start_job(MODEL + ["--steps", "100000", "--compute-ms", "20", "--fault", "hang-kernel",
                             "--fault-rank", "5", "--fault-step", "30"])
        inc = c.wait_for(lambda: c.incidents("hang"), 90, "hang incident")[0]
        check_decided(c, inc)
        slot, keys = job_slot_keys(c, rc)
        check(c.key("incidents") in keys.get(slot, []) and c.key("events") in keys.get(slot, []),
              "the job-wide keys are not in the slot %d of ft:{%s}: %s" % (slot, c.job, keys.get(slot)))
        spread = sorted(s for s in keys if s != slot)
        print("job-wide slot %d holds %d keys; the group keys are in slots %s" % (slot, len(keys[slot]), spread))
        check(len(spread) >= 2, "the per-rank and per-node keys did not leave the job's slot: %s" % keys)
        status = subprocess.run([args.ftmaster, "status", "--job", c.job, "--redis", c.redis_url(), "--json"],
                                env=c.base_env(), capture_output=True, text=True, timeout=30)
        check(status.returncode == 0, "ftmaster status on the cluster failed: %s" % status.stderr[-500:])
        ranks = json.loads(status.stdout).get("ranks", [])
        check(len(ranks) == 8, "ftmaster status lists %d ranks, expected 8: %s" % (len(ranks), status.stdout[:300]))
        # The suspect's history across jobs, in its own slot (ft:node:{node1}:history).
        history = c.wait_for(lambda: c.db.command("XRANGE", "ft:node:{node1}:history", "-", "+"), 15,
                             "node1's history written on the cluster")
        check(any(dict(zip(f[0::2], f[1::2])).get("kind") == "suspect" for _, f in history),
              "node1's history on the cluster: %s" % history)
        print("OK: the hang decided on a Redis Cluster; status reads all 8 ranks; node1's history written")


def events_reported(c):
    """Per node: (events reported, dropped) from the worker's stop line."""
    import re
    out = {}
    for node in c.node_names:
        m = re.findall(r"ftworker stopped \((\d+) events reported, (\d+) dropped\)", c.worker_log(node))
        check(m, "ftworker %s did not log its counts at stop" % node)
        out[node] = (int(m[-1][0]), int(m[-1][1]))
    return out


def case_failover(args):
    with Cluster(args, job="cl-failover", redis=RedisCluster()) as c:
        rc = c.redis
        slot = key_slot(c.key("leader"))
        c.start_master(TOPOLOGY, FAST)
        c.start_workers(FAST)
        c.start_job(MODEL + ["--steps", "100000", "--compute-ms", "20", "--fault", "hang-kernel",
                             "--fault-rank", "5", "--fault-step", "400"])
        # Mid-run: the master has learnt and published the timeouts (version 1 is the warm-up
        # default it publishes at its start, before the job runs).
        c.wait_for(lambda: int(c.db.command("GET", c.key("timeouts:version")) or 0) >= 2, 60,
                   "timeouts learnt from the running job")
        check(not c.incidents(), "an incident before the fault: %s" % c.incidents())
        old = rc.kill_master_of(slot)
        t_kill = time.monotonic()
        new = rc.wait_new_master(slot, old, 60)
        print("killed %s (master of slot %d); %s took over after %.1f s"
              % (old, slot, new, time.monotonic() - t_kill), flush=True)
        c.db = rc.client()  # the test's own connection follows the new map
        inc = c.wait_for(lambda: c.incidents("hang"), 120, "hang incident after the failover")[0]
        check_decided(c, inc)
        # No event lost: once every rank's exit is in (the last event of each rank), each
        # worker's count of reported events is in the stream (at least once: a write whose
        # reply the failover swallowed may be there twice; count distinct ones) and none was
        # dropped.
        c.wait_exits(range(8), timeout=60)
        for node in list(c.workers):
            c.stop_worker(node)
        counts = events_reported(c)
        stream = c.stream("events")
        distinct = {f["json"] for _, f in stream}
        reported = sum(n for n, _ in counts.values())
        print("events: reported %s, in the stream %d (%d distinct)" % (counts, len(stream), len(distinct)))
        check(all(d == 0 for _, d in counts.values()), "a worker dropped events: %s" % counts)
        check(len(distinct) == reported, "%d distinct events in the stream, the workers reported %d"
              % (len(distinct), reported))
        exits = [e["rank"] for e in c.events(kind="exit")]
        check(sorted(set(exits)) == list(range(8)), "exit events of ranks %s" % sorted(set(exits)))
        check(len(c.incidents("hang")) == 1, "the hang decided %d times" % len(c.incidents("hang")))
        print("OK: failover of the job-wide shard; hang decided, %d events, none lost" % reported)


def case_failover_at_start(args):
    with Cluster(args, job="cl-failstart", redis=RedisCluster()) as c:
        rc = c.redis
        slot = key_slot(c.key("leader"))
        c.start_master(TOPOLOGY, FAST)
        c.start_worker("node1", FAST)
        plan1 = os.path.join(c.arena_dir("node1"), "ft-plan.%s.node1" % c.job)
        c.wait_for(lambda: os.path.exists(plan1), 30, "node1's restore plan file")
        old = rc.kill_master_of(slot)
        t_kill = time.monotonic()
        c.start_worker("node0", FAST)
        c.start_job(MODEL + ["--steps", "100000", "--compute-ms", "20", "--fault", "hang-kernel",
                             "--fault-rank", "5", "--fault-step", "150"])
        new = rc.wait_new_master(slot, old, 60)
        print("killed %s (master of slot %d) as the job started; %s took over after %.1f s"
              % (old, slot, new, time.monotonic() - t_kill), flush=True)
        c.db = rc.client()
        # The case this builds: node0's worker met the failover before it had read its plan.
        c.wait_for(lambda: "restore plan:" in c.worker_log("node0"), 30, "node0's restore plan")
        check("answers, but reading this node's command cursor failed" in c.worker_log("node0"),
              "node0's worker read Redis before the failover reached it: the case did not happen")
        inc = c.wait_for(lambda: c.fault_incidents(), 120, "an incident")[0]
        check(inc["kind"] == "hang", "the first incident is %s (suspects %s), expected the hang of step 150: %s"
              % (inc["kind"], suspects(inc), inc.get("message", "")[:300]))
        check_decided(c, inc)
        print("OK: a failover at start-up held node0's ranks in ft_restore; no incident of it; the hang decided")


def main():
    args = parse_args()
    cases = {"detect": case_detect, "failover": case_failover, "failover-at-start": case_failover_at_start}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
