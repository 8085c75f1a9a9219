#!/usr/bin/env python3
"""A benchmark-like job that queues many collectives before it synchronizes, one rank stopped.

queue_bench (4 ranks on 2 simulated nodes, one ftworker each, ftmaster, a real redis-server)
enqueues --queue all-reduces per round before cudaStreamSynchronize: far more ops in flight
than libft.so has events for. Rank 3 is stopped with SIGSTOP mid-run; its peers' GPUs wait in
the collective it never entered. No op past the event pool may read as completed, so the
peers' progress tables show the wait, and the incident names rank 3 alone as a frozen host
(its process state is "stopped" and its heartbeat silent), not a transport hang with every
member suspect.

  --case stop        (the default) as above, 10,000 all-reduces per round
  --case deep-kill   100,000 per round; rank 3 SIGKILLed once its GPU is 20,000 ops into a round
                     (far past the event pool, where timed ops and gaps of untimed ones
                     alternate): a crash incident names it alone, and every survivor's table
                     shows an op in flight (started > completed), not a finished rank
  --case deep-stop   the same with SIGSTOP: a host-frozen incident names it alone
"""

import argparse
import os
import signal
import sys
import time
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
    p.add_argument("--case", default="stop")
    return p.parse_args()


def completed(c, rank):
    progress = c.progress(rank)
    if not progress:
        return 0
    return max([r["completed"] for r in progress["comms"] if not r["p2p"]] or [0])


def rows(c, rank):
    progress = c.progress(rank)
    return [r for r in (progress or {}).get("comms", []) if not r["p2p"]]


DEEP_QUEUE = 100000
DEEP = 20000
# A 100,000-op round: at make test's start, in the low-share group beside a timed test, one
# simulated GPU once fell 10 s behind its peers before any rank was stopped (a hang incident,
# the job stopped). The floor leaves it 30 s; the incident then comes up to 30 s after the fault.
DEEP_TIMEOUTS = {**TIMEOUTS, "FT_TIMEOUT_FLOOR": "30s"}


def case_deep(paths, sig):
    kill = sig == signal.SIGKILL
    with Cluster(paths, job="qb-deep-%s" % ("kill" if kill else "stop"), nodes=2, ranks_per_node=2) as c:
        c.start_master(["--topology", "dp=4,tp=1,pp=1"], DEEP_TIMEOUTS)
        c.start_workers(DEEP_TIMEOUTS)
        c.start_job(["--queue", str(DEEP_QUEUE), "--rounds", "100000"], timeout=300)
        # Deep in the first round: every rank enqueued it all, the GPUs are DEEP ops into it.
        c.wait_for(lambda: all((rows(c, r) or [{}])[0].get("entered", 0) >= DEEP_QUEUE for r in range(4))
                   and completed(c, STOPPED) >= DEEP, 150, "rank %d's GPU %d ops deep" % (STOPPED, DEEP), poll=0.2)
        pid = c.wait_for(lambda: c.rank_pids().get(STOPPED), 10, "rank %d's pid" % STOPPED)
        early = [(i["kind"], i["suspects"]) for i in c.fault_incidents()]
        check(not early, "incidents before any rank was stopped: %s" % early)
        os.kill(pid, sig)
        t_fault = time.time()
        print("%s rank %d (pid %d) with %d collectives completed of %d entered" % (
            "killed" if kill else "stopped", STOPPED, pid, completed(c, STOPPED), rows(c, STOPPED)[0]["entered"]))
        try:
            inc = c.wait_for(lambda: c.fault_incidents(), 60, "incident", poll=0.2)[0]
            named = sorted(s["rank"] for s in inc["suspects"])
            print("incident %s: kind=%s suspects=%s, %.0f ms after the %s" % (
                inc["id"], inc["kind"], named, inc["decided_unix_ms"] - t_fault * 1000, "kill" if kill else "stop"))
            for line in inc.get("evidence", [])[:5]:
                print("  evidence: " + line)
            check(named == [STOPPED], "the incident does not name rank %d alone: %s" % (STOPPED, named))
            want = "crash" if kill else "host-frozen"
            check(inc["kind"] == want, "kind %s, expected %s" % (inc["kind"], want))
            # Each survivor's GPU waits in the collective rank 3 never joined, however deep: its
            # table must show that op started and not completed (the wait the master reads).
            def stuck():
                return all(any(r["started"] > r["completed"] for r in rows(c, rank))
                           for rank in range(4) if rank != STOPPED)
            shown = c.poll_until(stuck, 10, poll=0.2)
            for rank in range(4):
                print("rank %d: %s" % (rank, [(r["entered"], r["started"], r["completed"]) for r in rows(c, rank)]))
            check(shown, "a survivor's table reads as finished (started == completed) while its GPU waits")
            print("RESULT queue_deep_%s fault_to_decided_ms=%.0f" % ("kill" if kill else "stop",
                                                                   inc["decided_unix_ms"] - t_fault * 1000))
        finally:
            if not kill:
                os.kill(pid, signal.SIGCONT)
        print("OK: %d collectives queued per round, rank %d %s %d deep: named alone, survivors show the wait" % (
            DEEP_QUEUE, STOPPED, "killed" if kill else "stopped", DEEP))


def main():
    args = parse_args()
    paths = types.SimpleNamespace(launch=args.launch, trainsim=args.queue_bench, libft=args.libft,
                                  ftworker=args.ftworker, ftmaster=args.ftmaster)
    if args.case in ("deep-kill", "deep-stop"):
        case_deep(paths, signal.SIGKILL if args.case == "deep-kill" else signal.SIGSTOP)
        return
    check(args.case == "stop", "unknown case %s" % args.case)
    with Cluster(paths, job="qb-stop", nodes=2, ranks_per_node=2) as c:
        c.start_master(["--topology", "dp=4,tp=1,pp=1"], TIMEOUTS)
        c.start_workers(TIMEOUTS)
        c.start_job(["--queue", str(QUEUE), "--rounds", "100000"], timeout=300)
        # Past the first round: the peers have had more ops in flight than the event pool holds.
        c.wait_for(lambda: completed(c, STOPPED) > QUEUE, 90, "rank %d past its first round" % STOPPED,
                   poll=0.2)
        pid = c.wait_for(lambda: c.rank_pids().get(STOPPED), 10, "rank %d's pid" % STOPPED)
        early = [(i["kind"], i["suspects"]) for i in c.fault_incidents()]
        check(not early, "incidents before any rank was stopped: %s" % early)
        os.kill(pid, signal.SIGSTOP)
        print("stopped rank %d (pid %d) after %d collectives" % (STOPPED, pid, completed(c, STOPPED)))
        try:
            inc = c.wait_for(lambda: c.fault_incidents(), 90, "incident", poll=0.2)[0]
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
