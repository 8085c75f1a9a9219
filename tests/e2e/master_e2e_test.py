#!/usr/bin/env python3
"""ftmaster end to end: trainsim on gpusim under libft.so, one ftworker per simulated node, a
real redis-server, ftmaster deciding.

  --case compute-hang  dp=2 tp=2 pp=2, rank 5's kernel hangs: a hang incident names rank 5
                       (node1); decision save-then-stop, the seven healthy ranks save, the job
                       is stopped, node1 evicted
  --case host-hang     dp=8, rank 3 stops issuing work: a hang incident names rank 3
  --case crash         dp=2 tp=2 pp=2, rank 6 SIGKILLed: a crash incident names rank 6
  --case transport     rank 5's tp communicator stalls: a transport-hang incident on it
  --case one-second    a 1 s step, hang on rank 2: the incident is written <= 2 s after the
                       first healthy rank blocked (prints the figure)
  --case straggler     rank 5 computes 1.5x slower: a straggler incident names it
  --case pause         rank 0 works on the host for 20 s while peers wait, normal jitter
                       (soak: --long, 5 minutes): no hang/crash/straggler incident
  --case takeover      two masters; the leader is killed in the collection window: the
                       standby leads within two lease periods; the incident exactly once
  --case finished      a clean run to the end, no --topology: job_state "finished", no
                       incident, `ftmaster status` keeps the topology inferred while the ranks
                       ran; a stop sent afterwards is acknowledged "done: nothing to stop"
  --case relaunch-after-finish  the job finishes cleanly and is launched again at once under
                       the same FT_JOB; rank 6 of the new run is SIGKILLed and the rest torn
                       down 0.1 s later: a crash incident (not "after a clean exit of the
                       job"), save-then-stop, a restore plan
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, check, fail  # noqa: E402

MODEL = ["--dp", "2", "--tp", "2", "--pp", "2"]
TOPOLOGY = ["--topology", "dp=2,tp=2,pp=2", "--order", "tp-dp-pp"]
# Short warm-up so the adaptive timeouts are published within seconds.
FAST = {"FT_TIMEOUT_WARMUP": "2s", "FT_TIMEOUT_MIN_SAMPLES": "5"}


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--case", required=True)
    p.add_argument("--long", action="store_true")
    return p.parse_args()


def suspects(incident):
    return sorted((s["rank"], s["node"]) for s in incident["suspects"])


def wait_incident(c, kind, timeout):
    return c.wait_for(lambda: c.incidents(kind), timeout, "%s incident" % kind)[0]


def show(inc):
    print("incident %s: kind=%s suspects=%s decision=%s decide_ms=%.0f confidence=%.2f"
          % (inc["id"], inc["kind"], suspects(inc), inc["decision"], inc["decide_ms"], inc["confidence"]))
    for line in inc.get("evidence", [])[:5]:
        print("  evidence: " + line)


def case_compute_hang(args):
    with Cluster(args, job="ms-hang") as c:
        c.start_master(TOPOLOGY, FAST)
        c.start_workers(FAST)
        c.start_job(MODEL + ["--steps", "100000", "--compute-ms", "20", "--fault", "hang-kernel",
                             "--fault-rank", "5", "--fault-step", "30"])
        inc = wait_incident(c, "hang", 60)
        show(inc)
        check(suspects(inc) == [(5, "node1")], "suspects %s, expected rank 5 on node1" % suspects(inc))
        check(inc["decision"] == "save-then-stop", "decision %s" % inc["decision"])
        c.wait_for(lambda: c.job_proc.poll() is not None, 60, "the job stopped by the master")
        evicted = c.db.command("SMEMBERS", c.key("evicted"))
        check(evicted == ["node1"], "evicted %s" % evicted)
        acks = [json.loads(f["json"]) for _, f in c.stream("acks")]
        saved = sorted(a["rank"] for a in acks if a["result"] == "done" and a["message"].startswith("saved step="))
        check(saved == [0, 1, 2, 3, 4, 6, 7], "save acknowledged by ranks %s, expected every healthy rank" % saved)
        check(any(a["result"] == "done" and "SIGTERM" in a["message"] for a in acks), "no stop acknowledgement")
        status = subprocess.run([args.ftmaster, "status", "--job", c.job, "--redis", c.redis_url(), "--json"],
                                env=c.base_env(), capture_output=True, text=True, timeout=20)
        topology = json.loads(status.stdout)["topology"]
        check(topology["known"] and not topology["inferred"] and topology["tp"] == 2,
              "status shows the topology %s, not the master's explicit dp=2,tp=2,pp=2" % topology)
        print("OK: rank 5 named, the healthy ranks saved, job stopped, node1 evicted")


def case_host_hang(args):
    with Cluster(args, job="ms-hosthang") as c:
        c.start_master(["--topology", "dp=8,tp=1,pp=1"], FAST)
        c.start_workers(FAST)
        c.start_job(["--dp", "8", "--steps", "100000", "--compute-ms", "20", "--fault", "hang-host",
                     "--fault-rank", "3", "--fault-step", "30"])
        inc = wait_incident(c, "hang", 60)
        show(inc)
        check(suspects(inc) == [(3, "node0")], "suspects %s, expected rank 3 on node0" % suspects(inc))


def case_crash(args):
    with Cluster(args, job="ms-crash") as c:
        c.start_master(TOPOLOGY, FAST)
        c.start_workers(FAST)
        c.start_job(MODEL + ["--steps", "100000", "--compute-ms", "20", "--fault", "crash-kill",
                             "--fault-rank", "6", "--fault-step", "20"])
        inc = wait_incident(c, "crash", 60)
        show(inc)
        check(suspects(inc) == [(6, "node1")], "suspects %s, expected rank 6 on node1" % suspects(inc))


def case_transport(args):
    with Cluster(args, job="ms-transport") as c:
        c.start_master(TOPOLOGY, FAST)
        c.start_workers(FAST)
        c.start_job(MODEL + ["--steps", "100000", "--compute-ms", "20"],
                    rank_env={5: {"GPUSIM_NCCL_STALL": "tp:60"}})
        inc = wait_incident(c, "transport-hang", 60)
        show(inc)
        p5 = c.progress(5)
        stalled = [r["comm"] for r in p5["comms"] if not r["p2p"] and r["started"] > r["completed"]]
        check(inc["comm"] in stalled, "incident comm %s is not rank 5's stalled comm %s" % (inc["comm"], stalled))
        check(sorted(r for r, _ in suspects(inc)) == [4, 5], "suspects %s, expected the tp pair 4, 5" % suspects(inc))


def case_one_second(args):
    with Cluster(args, job="ms-1s") as c:
        c.start_master(TOPOLOGY, FAST)
        c.start_workers(FAST)
        c.start_job(MODEL + ["--steps", "100000", "--compute-ms", "1000", "--fault", "hang-kernel",
                             "--fault-rank", "2", "--fault-step", "12"])
        inc = wait_incident(c, "hang", 60)
        show(inc)
        check(suspects(inc)[0][0] == 2, "suspects %s, expected rank 2" % suspects(inc))
        timeouts = c.events(kind="timeout")
        check(timeouts, "no timeout events")
        blocked_ms = min(e["unix_ms"] - e["age_ms"] for e in timeouts)
        detect_ms = inc["decided_unix_ms"] - blocked_ms
        table = c.db.command("GET", c.key("timeouts"))
        print("published timeouts: %s" % table)
        print("first healthy rank blocked at %d, incident decided at %d: %.0f ms; first timeout "
              "fired at %.0f ms (timeout %.0f ms)" % (blocked_ms, inc["decided_unix_ms"], detect_ms,
                                                      timeouts[0]["age_ms"], timeouts[0]["timeout_ms"]))
        print("RESULT master_detect step_ms=1000 detect_ms=%.0f decide_ms=%.0f" % (detect_ms, inc["decide_ms"]))
        check(detect_ms <= 2000, "incident %.0f ms after the first healthy rank blocked (limit 2000)" % detect_ms)


def case_straggler(args):
    with Cluster(args, job="ms-straggler") as c:
        c.start_master(TOPOLOGY, {**FAST, "FT_SUMMARY_INTERVAL": "500ms"})
        c.start_workers({**FAST, "FT_SUMMARY_INTERVAL": "500ms"})
        c.start_job(MODEL + ["--steps", "400", "--compute-ms", "50", "--fault", "slow",
                             "--slow-factor", "1.5", "--fault-rank", "5", "--fault-step", "10"])
        inc = wait_incident(c, "straggler", 90)
        show(inc)
        check(suspects(inc)[0][0] == 5, "straggler %s, expected rank 5" % suspects(inc))


def case_pause(args):
    seconds = 300 if args.long else 40
    with Cluster(args, job="ms-pause") as c:
        c.start_master(TOPOLOGY, FAST)
        c.start_workers(FAST)
        steps = int(seconds * 1000 / 120)
        c.start_job(MODEL + ["--steps", str(steps), "--compute-ms", "100", "--fault", "pause",
                             "--pause-s", "20", "--fault-rank", "0", "--fault-step", str(steps // 3)],
                    timeout=seconds + 120)
        check(c.job_proc.wait(timeout=seconds + 150) == 0, "the job failed:\n" + c.job_output()[-3000:])
        # Every event of the run is in and the master has read them all, its window closed.
        c.wait_exits(range(8))
        c.wait_for(c.master_caught_up, 30, "the master to read every event and close its window")
        # Not even a busy one: the pause holds its peers for 20 s, less than FT_BUSY_REPORT_AFTER.
        bad = c.incidents()
        print("incidents: %s" % [(i["kind"], suspects(i)) for i in c.incidents()])
        print("timeout events during the pause: %d" % len(c.events(kind="timeout")))
        check(not bad, "a healthy run with a pause produced incidents: %s" % [(i["kind"], suspects(i)) for i in bad])
        print("OK: %d s run with a 20 s host pause on rank 0: no incident" % seconds)


def case_takeover(args):
    lease = {"FT_LEASE": "1s", "FT_HANG_WINDOW": "1500ms"}
    with Cluster(args, job="ms-takeover") as c:
        m0 = c.start_master(TOPOLOGY, {**FAST, **lease}, name="m0")
        c.wait_for(lambda: c.db.command("GET", c.key("leader")) == "m0", 10, "m0 leading")
        c.start_master(TOPOLOGY, {**FAST, **lease}, name="m1")
        c.start_workers(FAST)
        c.start_job(MODEL + ["--steps", "100000", "--compute-ms", "20", "--fault", "hang-kernel",
                             "--fault-rank", "5", "--fault-step", "30"])
        c.wait_for(lambda: c.events(kind="timeout"), 60, "first timeout event")
        m0.send_signal(signal.SIGKILL)
        t_kill = time.monotonic()
        print("killed the leader m0 in the collection window")
        c.wait_for(lambda: c.db.command("GET", c.key("leader")) == "m1", 5, "m1 leading")
        took = time.monotonic() - t_kill
        print("m1 leads %.2f s after the kill (lease 1 s)" % took)
        check(took <= 2.0 + 0.3, "takeover took %.2f s (two lease periods: 2 s)" % took)
        inc = wait_incident(c, "hang", 30)
        show(inc)
        # A second write of the window would come from m1 going over the same events again:
        # wait until it has read every event and holds no window open.
        c.wait_for(c.master_caught_up, 30, "m1 to read every event and close its window")
        same = [i for i in c.incidents() if i["id"] == inc["id"]]
        check(len(same) == 1, "incident %s written %d times" % (inc["id"], len(same)))
        check(suspects(inc) == [(5, "node1")], "suspects %s" % suspects(inc))
        print("OK: decided exactly once, by the standby")


def case_finished(args):
    with Cluster(args, job="ms-finished") as c:
        c.start_master([], FAST)  # no --topology: inferred, and kept once the ranks are gone
        c.start_workers(FAST)
        c.start_job(MODEL + ["--steps", "60", "--compute-ms", "20"])
        check(c.job_proc.wait(timeout=150) == 0, "the job failed:\n" + c.job_output()[-3000:])
        c.wait_for(lambda: c.db.command("HGET", c.key("master"), "job_state") == "finished", 30,
                   "job_state finished")
        status = subprocess.run([args.ftmaster, "status", "--job", c.job, "--redis", c.redis_url()],
                                env=c.base_env(), capture_output=True, text=True, timeout=30)
        print(status.stdout)
        check(status.returncode == 0, "ftmaster status failed: %s" % status.stderr[-2000:])
        first = status.stdout.splitlines()[0] if status.stdout else ""
        check(": finished;" in first, "status does not say finished: %r" % first)
        check("no clean grid" not in status.stdout, "status lost the topology:\n" + status.stdout)
        check("tp=2 dp=2 pp=2" in status.stdout, "status shows no tp=2 dp=2 pp=2:\n" + status.stdout)
        check(not c.incidents(), "a clean run produced incidents: %s" % [(i["kind"], suspects(i)) for i in c.incidents()])
        # A stop for a node whose ranks have all exited: done, and it says what happened.
        cmd = {"v": 1, "id": "e2e-stop-node0", "kind": "stop", "rank": -1, "text": "test",
               "grace_s": 1, "unix_ms": 0}
        c.db.command("XADD", c.key("cmd:node0"), "*", "kind", "stop", "rank", "-1", "json", json.dumps(cmd))
        ack = c.wait_for(lambda: [f for _, f in c.stream("acks") if f["id"] == "e2e-stop-node0"], 30,
                         "the stop's acknowledgement")[0]
        a = json.loads(ack["json"])
        print("ack: %s: %s" % (a["result"], a["message"]))
        check(a["result"] == "done" and a["message"].startswith("nothing to stop: all 4 ranks of node node0"),
              "ack %s: %s" % (a["result"], a["message"]))
        print("OK: finished, topology kept, the late stop answered")


def case_relaunch_after_finish(args):
    with Cluster(args, job="ms-relaunch") as c:
        c.start_master(TOPOLOGY, FAST)
        c.start_workers(FAST)
        c.start_job(MODEL + ["--steps", "30", "--compute-ms", "20"])
        check(c.job_proc.wait(timeout=150) == 0, "the first run failed:\n" + c.job_output()[-3000:])
        c.wait_for(lambda: c.db.command("HGET", c.key("master"), "job_state") == "finished", 30,
                   "job_state finished")
        t_relaunch = time.time()
        # Launched again at once (a user's rerun, a scheduler's retry), within the master's
        # teardown horizon of the first run's clean exits (60 s).
        # Its launcher tears the rest down 0.1 s after the crash, as torchrun's agent does: no
        # rank is left waiting, so only the crash itself can make the incident.
        c.start_job(MODEL + ["--steps", "100000", "--compute-ms", "20", "--fault", "crash-kill",
                             "--fault-rank", "6", "--fault-step", "20"], launch_args=("--grace", "0.1"))
        inc = c.poll_until(lambda: c.incidents("crash"), 60)
        if not inc:
            closed = [line for line in c.master_log().splitlines() if "no incident" in line or "closed" in line]
            fail("no crash incident for the relaunched job's crash; the master said:\n" + "\n".join(closed[-5:]))
        inc = inc[0]
        show(inc)
        print("crash incident %.1f s after the relaunch" % (inc["decided_unix_ms"] / 1000.0 - t_relaunch))
        check(suspects(inc) == [(6, "node1")], "suspects %s, expected rank 6 on node1" % suspects(inc))
        check(inc["decision"] == "save-then-stop", "decision %s" % inc["decision"])

        def saved():
            acks = [json.loads(f["json"]) for _, f in c.stream("acks")]
            return sorted(a["rank"] for a in acks if a["result"] == "done" and a["message"].startswith("saved step="))
        def final_plan():  # the crash's: not one settling while the save's copies come in
            plan = json.loads(c.db.command("GET", c.key("restore")) or "null")
            return plan if plan and plan.get("state", "final") == "final" and plan.get("step", -1) >= 0 else None
        plan = c.wait_for(final_plan, 60, "a final restore plan")
        print("restore plan of step %s; saves acknowledged by ranks %s (the rest saved on "
              "their launcher's SIGTERM)" % (plan.get("step"), saved()))
        check(isinstance(plan.get("step"), int) and plan["step"] >= 1, "plan without a step: %s" % plan)
        print("OK: the relaunch's crash was an incident; saved and planned")


def main():
    args = parse_args()
    cases = {
        "compute-hang": case_compute_hang, "host-hang": case_host_hang, "crash": case_crash,
        "transport": case_transport, "one-second": case_one_second, "straggler": case_straggler,
        "pause": case_pause, "takeover": case_takeover, "finished": case_finished,
        "relaunch-after-finish": case_relaunch_after_finish,
    }
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
