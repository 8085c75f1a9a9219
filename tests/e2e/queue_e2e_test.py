#!/usr/bin/env python3
"""A benchmark-like job that queues many collectives before it synchronizes, one rank stopped.

queue_bench (4 ranks on 2 simulated nodes, one ftworker each, ftmaster, a real redis-server)
enqueues --queue all-reduces per round before cudaStreamSynchronize: far more ops in flight
than libft.so has events for. Rank 3 is stopped with SIGSTOP mid-run; its peers' GPUs wait in
the collective it never entered. No op past the event pool may read as completed, so the
peers' progress tables show the wait, and the incident names rank 3 alone as a frozen host
(its process state is "stopped" and its heartbeat silent), not a transport hang with every
member suspect.
"""

import argparse
import os
import signal
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, check  # noqa: E402

# Adaptive timeouts within seconds, but not below 10 s: on a loaded machine a simulated GPU
# can fall a second or two behind its peers in a 10,000-op round, which is not the hang here.
TIMEOUTS = {"FT_TIMEOUT_WARMUP": "10s", "FT_TIMEOUT_MIN_SAMPLES": "5", "FT_TIMEOUT_FLOOR": "10s"}
QUEUE = 10000
STOPPED = 3


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "queue-bench", "libft", "ftworker", "ftmaster"):
        p.add_argument("--" + name, required=True)
    return p.parse_args()


def completed(c, rank):
    progress = c.progress(rank)
    if not progress:
        return 0
    return max([r["completed"] for r in progress["comms"] if not r["p2p"]] or [0])


def main():
    args = parse_args()
    paths = types.SimpleNamespace(launch=args.launch, trainsim=args.queue_bench, libft=args.libft,
                                  ftworker=args.ftworker, ftmaster=args.ftmaster)
    with Cluster(paths, job="qb-stop", nodes=2, ranks_per_node=2) as c:
        c.start_master(["--topology", "dp=4,tp=1,pp=1"], TIMEOUTS)
        c.start_workers(TIMEOUTS)
        c.start_job(["--queue", str(QUEUE), "--rounds", "100000"], timeout=300)
        # Past the first round: the peers have had more ops in flight than the event pool holds.
        c.wait_for(lambda: completed(c, STOPPED) > QUEUE, 90, "rank %d past its first round" % STOPPED,
                   poll=0.2)
        pid = c.wait_for(lambda: c.rank_pids().get(STOPPED), 10, "rank %d's pid" % STOPPED)
        early = [(i["kind"], i["suspects"]) for i in c.incidents()]
        check(not early, "incidents before any rank was stopped: %s" % early)
        os.kill(pid, signal.SIGSTOP)
        print("stopped rank %d (pid %d) after %d collectives" % (STOPPED, pid, completed(c, STOPPED)))
        try:
            inc = c.wait_for(lambda: c.incidents(), 90, "incident", poll=0.2)[0]
            named = sorted(s["rank"] for s in inc["suspects"])
            print("incident %s: kind=%s suspects=%s" % (inc["id"], inc["kind"], named))
            for line in inc.get("evidence", [])[:5]:
                print("  evidence: " + line)
            check(named == [STOPPED], "the incident does not name the stopped rank %d alone: %s" % (STOPPED, named))
            check(inc["kind"] == "host-frozen", "a stopped process is a frozen host, not %s" % inc["kind"])
            for rank in range(4):
                if rank == STOPPED:
                    continue
                rows = [r for r in c.progress(rank)["comms"] if not r["p2p"]]
                check(any(r["entered"] > r["completed"] for r in rows),
                      "rank %d's table reads as finished: %s" % (rank, rows))
        finally:
            os.kill(pid, signal.SIGCONT)
        print("OK: %d collectives queued per round, rank %d stopped: named alone, host-frozen" % (QUEUE, STOPPED))


if __name__ == "__main__":
    main()
