#!/usr/bin/env python3
"""Detection end to end: trainsim on gpusim under libft.so, one ftworker per simulated node, a
real redis-server, ftmaster deciding.

  --case frozen           dp=2 tp=2 pp=2 at full speed; rank 5 is stopped with SIGSTOP once
                          the master has learned its timeouts: a host-frozen incident names
                          rank 5 (node1) alone; no transport-hang, no hang incident
  --case early-hang       rank 3 stops issuing work at step 1, before any op has a history
                          (FT_TIMEOUT_WARMUP 8 s, the other settings at their defaults): a hang
                          incident names it at most warm-up + 4 s after the peers blocked
  --case busy-first-step  rank 3 works on the host for 25 s at step 1 (3x the warm-up) while
                          its peers wait: the job finishes and no hang, host-frozen, crash or
                          transport-hang incident is written (a "busy" one may be)
"""

import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, check  # noqa: E402

MODEL = ["--dp", "2", "--tp", "2", "--pp", "2"]
TOPOLOGY = ["--topology", "dp=2,tp=2,pp=2", "--order", "tp-dp-pp"]
FAST = {"FT_TIMEOUT_WARMUP": "2s", "FT_TIMEOUT_MIN_SAMPLES": "5"}
WARMUP_S = 8
EARLY = {"FT_TIMEOUT_WARMUP": "%ds" % WARMUP_S}  # min samples, floor, ceiling: the defaults
ACTED = ("hang", "host-frozen", "crash", "transport-hang")


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--case", required=True)
    return p.parse_args()


def suspects(incident):
    return sorted((s["rank"], s["node"]) for s in incident["suspects"])


def show(inc):
    print("incident %s: kind=%s suspects=%s decision=%s decide_ms=%.0f confidence=%.2f"
          % (inc["id"], inc["kind"], suspects(inc), inc["decision"], inc["decide_ms"], inc["confidence"]))
    print("  message: " + inc["message"])
    for s in inc["suspects"]:
        print("  why %d: %s" % (s["rank"], s["why"]))
    for line in inc.get("evidence", [])[:6]:
        print("  evidence: " + line)


def published_timeouts(c):
    value = c.db.command("GET", c.key("timeouts"))
    return json.loads(value) if value else None


def case_frozen(args):
    with Cluster(args, job="dt-frozen") as c:
        c.start_master(TOPOLOGY, FAST)
        c.start_workers(FAST)
        c.start_job(MODEL + ["--steps", "100000", "--compute-ms", "20"])
        # Stop it once the job runs on learned timeouts (as in production, mid-run).
        # (version 1 is the warm-up default; the next one follows the step time)
        c.wait_for(lambda: (published_timeouts(c) or {}).get("version", 0) >= 2, 90, "learned timeouts")
        time.sleep(2)
        pid = c.wait_for(lambda: c.rank_pids().get(5), 10, "rank 5's pid")
        os.kill(pid, signal.SIGSTOP)
        t_stop = time.time()
        print("rank 5 (pid %d) stopped with SIGSTOP" % pid)
        try:
            inc = c.wait_for(lambda: [i for i in c.incidents() if i["kind"] in ACTED], 60,
                             "incident")[0]
            show(inc)
            p5 = c.progress(5)
            print("rank 5's progress: frozen=%s proc_state=%s heartbeat_age_ms=%s"
                  % (p5.get("frozen"), p5.get("proc_state"), p5.get("heartbeat_age_ms")))
            check(inc["kind"] == "host-frozen", "incident kind %s, expected host-frozen" % inc["kind"])
            check(suspects(inc) == [(5, "node1")], "suspects %s, expected rank 5 on node1" % suspects(inc))
            check("stopped (state T" in inc["suspects"][0]["why"], "why: " + inc["suspects"][0]["why"])
            time.sleep(1)
            others = [(i["kind"], suspects(i)) for i in c.incidents() if i["id"] != inc["id"]]
            check(not [o for o in others if o[0] in ("transport-hang", "hang")],
                  "other incidents: %s" % others)
            print("RESULT detect_frozen stop_to_decided_ms=%.0f" % (inc["decided_unix_ms"] - t_stop * 1000))
        finally:
            try:
                os.kill(pid, signal.SIGCONT)  # so the stop reaches it
            except OSError:
                pass


def first_blocked_ms(c):
    timeouts = c.events(kind="timeout")
    check(timeouts, "no timeout events")
    return min(e["unix_ms"] - e["age_ms"] for e in timeouts), timeouts


def case_early_hang(args):
    with Cluster(args, job="dt-early") as c:
        c.start_master(TOPOLOGY, EARLY)
        c.start_workers(EARLY)
        c.start_job(MODEL + ["--steps", "100000", "--compute-ms", "20", "--fault", "hang-host",
                             "--fault-rank", "3", "--fault-step", "1"])
        inc = c.wait_for(lambda: [i for i in c.incidents() if i["kind"] in ACTED], 90,
                         "incident")[0]
        show(inc)
        check(inc["kind"] == "hang", "incident kind %s, expected hang" % inc["kind"])
        check(suspects(inc) == [(3, "node0")], "suspects %s, expected rank 3 on node0" % suspects(inc))
        blocked_ms, timeouts = first_blocked_ms(c)
        detect_ms = inc["decided_unix_ms"] - blocked_ms
        print("published timeouts: %s" % published_timeouts(c))
        print("first peer blocked at %d, incident decided at %d: %.0f ms (timeout %.0f ms)"
              % (blocked_ms, inc["decided_unix_ms"], detect_ms, timeouts[0]["timeout_ms"]))
        print("RESULT detect_early_hang warmup_ms=%d detect_ms=%.0f" % (WARMUP_S * 1000, detect_ms))
        check(detect_ms <= WARMUP_S * 1000 + 4000,
              "named %.0f ms after the peers blocked (limit: warm-up %d s + 4 s)" % (detect_ms, WARMUP_S))


def case_busy_first_step(args):
    with Cluster(args, job="dt-busy") as c:
        c.start_master(TOPOLOGY, EARLY)
        c.start_workers(EARLY)
        c.start_job(MODEL + ["--steps", "20", "--compute-ms", "20", "--fault", "pause",
                             "--pause-s", str(3 * WARMUP_S + 1), "--fault-rank", "3",
                             "--fault-step", "1"], timeout=180)
        check(c.job_proc.wait(timeout=200) == 0, "the job failed:\n" + c.job_output()[-3000:])
        time.sleep(2)  # the master's last round
        incidents = c.incidents()
        print("incidents: %s" % [(i["kind"], suspects(i)) for i in incidents])
        print("timeout events during the pause: %d" % len(c.events(kind="timeout")))
        bad = [(i["kind"], suspects(i)) for i in incidents if i["kind"] in ACTED]
        check(not bad, "a first step with %d s of host work gave incidents: %s" % (3 * WARMUP_S + 1, bad))
        print("OK: %d s of busy host work in step 1: no hang incident" % (3 * WARMUP_S + 1))


def main():
    args = parse_args()
    cases = {"frozen": case_frozen, "early-hang": case_early_hang,
             "busy-first-step": case_busy_first_step}
    cases[args.case](args)
    print("PASS")


if __name__ == "__main__":
    main()
