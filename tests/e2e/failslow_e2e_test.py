#!/usr/bin/env python3
"""Fail-slow end to end: trainsim on gpusim under libft.so, two ftworkers, ftmaster, a real
redis-server; one rank (or every rank) computes slower from a step on.

  --case evict       dp=2 tp=4 on 2 nodes, rank 5 1.5x slower, FT_SLOW_ACTION=evict: a straggler
                     incident names rank 5 on node1 (with the cost arithmetic), then a second one
                     (decision stop) evicts node1; every rank saves as it is stopped, the relaunch
                     with node2 in node1's place restores one step on every rank, finishes with
                     trainsim_reference's checksums, and its steps are as fast as before the fault
  --case localize-x1.2
                     rank 5 1.2x slower, the default policy (report): named with its node
                     within 30 s of the fault, decision none, nothing evicted, the job finishes
  --case localize-x3 the same at 3x, data parallel only (dp=8) with the compute in the backward
                     pass, right before the gradient all-reduce (every rank's step looks equal)
  --case overlap     dp=8, rank 5 1.5x slower in the backward pass, each layer's gradient
                     all-reduced on a second stream while the backward pass goes on (DDP)
  --case pipeline    dp=2 tp=2 pp=2, rank 5 (stage 1) 1.5x slower: named with its node
  --case job-wide    every rank 1.5x slower, FT_SLOW_ACTION=evict: a job-slow incident, no
                     straggler named, nothing evicted, the job finishes
  --case job-wide-takeover
                     the same, the leader killed once it read the reports: the master that
                     takes over names it from the workers' verdicts in the summaries
  --case slow-link   the DP communicator of ranks 1 and 5 transfers 20 ms slower (gpusim): a
                     slow-link incident names both ends and nodes, no straggler, nothing evicted
  --case slow-p2p-link
                     dp=2 tp=2 pp=2: the pipeline link of ranks 1 (stage 0) and 5 (stage 1)
                     moves every message 20 ms slower: a slow-link incident names both ends
  --case slow-ends   rank 5 1.5x slower for about 10 s, then as before, FT_SLOW_ACTION=evict:
                     never evicted (FT_SLOW_CONFIRM), the job finishes
  --case jitter      every rank's compute +-20% at random per step, FT_SLOW_ACTION=evict, 60 s
                     (soak: --long, 5 minutes): no incident at all

Each prints `RESULT failslow case=... localize_s=... false_evictions=... step_time_after_ratio=...`
(the figures it measured; bench/ runs the cases for the record).
"""
import json
import os
import re
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import check  # noqa: E402
from ckpt_e2e_test import CkptCluster, check_reference, parse_args, suspects, wait_job_exit  # noqa: E402

FAST = {"FT_TIMEOUT_WARMUP": "2s", "FT_TIMEOUT_MIN_SAMPLES": "5"}
# Replicas of every shard on both nodes (tp-dp-pp: rank r and r+4 hold one shard), so the
# relaunch without node1 pulls node1's shards from node0's memory: no disk tier (the default).
MODEL = ["--dp", "2", "--tp", "4", "--param-bytes", "256kb", "--hidden", "4096", "--compute-ms", "40"]
TOPOLOGY = ["--topology", "dp=2,tp=4,pp=1", "--order", "tp-dp-pp"]
# Data parallel only, the step's compute in the backward pass: the DP all-reduce right after it
# makes every rank's step as long as the slow one's.
DDP_MODEL = ["--dp", "8", "--param-bytes", "256kb", "--hidden", "4096", "--compute-ms", "40", "--compute-at", "backward"]
DDP_TOPOLOGY = ["--topology", "dp=8,tp=1,pp=1", "--order", "tp-dp-pp"]
# Two pipeline stages (ranks 0-3 stage 0 on node0, 4-7 stage 1 on node1), TP and DP in each.
PP_MODEL = ["--dp", "2", "--tp", "2", "--pp", "2", "--param-bytes", "256kb", "--hidden", "4096", "--compute-ms", "40"]
PP_TOPOLOGY = ["--topology", "dp=2,tp=2,pp=2", "--order", "tp-dp-pp"]
SLOW_RANK = 5
JOB_WIDE_FACTOR = "1.5"  # every rank's compute in the job-wide cases
FAULT_STEP = 150  # a baseline of step times before it (the workers' and the comparison's)
LOCALIZE_LIMIT_S = 30
AFTER_RATIO_LIMIT = 1.15  # the slow phase is 1.5x


def fault_unix_ms(c, rank):
    m = re.search(r"trainsim rank=%d: injecting fault \w+ at step \d+ unix_ms=(\d+)" % rank, c.job_output())
    return int(m.group(1)) if m else None


def step_ms(output, rank, first, last):
    """Rank `rank`'s wall time per step over steps [first, last) from trainsim --verbose lines."""
    times = [float(ms) for step, ms in re.findall(r"^\[rank %d\] trainsim rank=%d step=(\d+) ms=([0-9.]+) unix_ms=\d+$"
                                                   % (rank, rank), output, re.M)
             if first <= int(step) < last]
    return times


def steps_at(output, rank):
    """Rank `rank`'s steps from trainsim --verbose lines: [(unix_ms, ms), ...]."""
    return [(int(at), float(ms)) for ms, at in
            re.findall(r"^\[rank %d\] trainsim rank=%d step=\d+ ms=([0-9.]+) unix_ms=(\d+)$" % (rank, rank),
                       output, re.M)]


def borne_out(c, inc, baseline, ranks=range(8), seconds=5, ratio=1.1):
    """Whether a job-slow incident is what the job's own steps show: in the `seconds` before it
    was decided, the median rank's median step was at least `ratio` times its median in
    `baseline` (rank -> step times). ftmaster names one only while most ranks are still at least
    half way from their baseline to the slowdown they reported, and a report is 25% at least
    (FT_SLOWDOWN_PCT)."""
    decided = inc["decided_unix_ms"]
    ratios = []
    for rank in ranks:
        recent = [ms for at, ms in steps_at(c.job_output(), rank) if decided - seconds * 1000 <= at <= decided]
        if recent and baseline.get(rank):
            ratios.append(statistics.median(recent) / statistics.median(baseline[rank]))
    print("job-slow %s: the ranks' steps in the %d s before it, against their baseline: %s"
          % (inc["id"], seconds, ["%.2f" % r for r in ratios]))
    return bool(ratios) and statistics.median(ratios) >= ratio


def start_workers(c, nodes=("node0", "node1"), env=None):
    """Workers with no disk tier (the default): a copy lives in the nodes' memory only."""
    for node in nodes:
        c.start_worker(node, c.ckpt_env({**FAST, **(env or {})}))


def evicted(c):
    return sorted(c.db.command("SMEMBERS", c.key("evicted")) or [])


def localized(c, rank, node, since_ms):
    """Waits for the straggler incident naming `rank`; checks it names `node`, decides nothing
    and carries the cost arithmetic; returns (incident, seconds from the fault to it)."""
    inc = c.wait_for(lambda: [i for i in c.incidents("straggler") if i["decision"] == "none"], 90,
                     "a straggler incident")[0]
    print("incident %s: %s\n  %s\n  evidence: %s" % (inc["id"], suspects(inc), inc["message"], inc["evidence"]))
    check(suspects(inc) == [(rank, node)], "straggler %s, expected rank %d on %s" % (suspects(inc), rank, node))
    check(any("horizon" in e and "keep" in e for e in inc["evidence"]),
          "the incident carries no cost arithmetic: %s" % inc["evidence"])
    took = (inc["decided_unix_ms"] - since_ms) / 1000.0
    print("localized %.1f s after the fault" % took)
    check(took <= LOCALIZE_LIMIT_S, "named %.1f s after the fault, more than %d s" % (took, LOCALIZE_LIMIT_S))
    return inc, took


def case_evict(args):
    steps = 1200
    with CkptCluster(args, job="fs-evict") as c:
        env = {**FAST, "FT_SLOW_ACTION": "evict", "FT_SLOW_CONFIRM": "10s"}
        c.start_master(TOPOLOGY, env)
        start_workers(c)
        c.start_ckpt_job(MODEL + ["--steps", str(steps), "--verbose", "--fault", "slow", "--slow-factor", "1.5",
                                  "--fault-rank", str(SLOW_RANK), "--fault-step", str(FAULT_STEP)])
        c.wait_for(lambda: fault_unix_ms(c, SLOW_RANK), 60, "the slowdown to begin")
        named, took = localized(c, SLOW_RANK, "node1", fault_unix_ms(c, SLOW_RANK))
        check("evict node1 if" in named["message"], "the incident does not say it evicts later: %s" % named["message"])
        inc = c.wait_for(lambda: [i for i in c.incidents("straggler") if i["decision"] == "stop"], 90,
                         "the eviction")[0]
        print("incident %s: %s decision=%s\n  %s\n  evidence: %s" % (inc["id"], suspects(inc), inc["decision"],
                                                                    inc["message"], inc["evidence"]))
        check(suspects(inc) == [(SLOW_RANK, "node1")], "evicting incident names %s" % suspects(inc))
        check(evicted(c) == ["node1"], "evicted %s, expected node1" % evicted(c))
        rc = wait_job_exit(c, 60, "the job stopped by the master")
        check(rc != 0, "the stopped job exited %d" % rc)
        before = step_ms(c.job_output(), 0, 50, FAULT_STEP)
        slow = step_ms(c.job_output(), 0, FAULT_STEP + 20, FAULT_STEP + 120)
        reached = max(int(s) for s in re.findall(r"trainsim rank=\d+ step=(\d+) ms=", c.job_output()))
        saved = c.wait_for(lambda: (c.plan() or {}).get("step"), 60, "a restore plan")
        print("plan: step %s (the job reached step %d)" % (saved, reached))
        check(saved >= reached - 1, "the plan restores step %s, the job reached %d: more than a step lost"
              % (saved, reached))

        baseline = {r: step_ms(c.job_output(), r, 50, FAULT_STEP) for r in range(8)}  # the first run's

        # node1 is gone; node2 takes its place with nothing in its memory.
        relaunched_ms = int(time.time() * 1000)
        c.drop_node("node1")
        start_workers(c, ["node2"], {"FT_NODE_RANKS": "4-7"})
        # The relaunch runs the steps its pace is measured on (saved + 20 to saved + 220) and a
        # few more, not on to the first run's end: a step's state does not depend on how many
        # follow it, so its checksums are the reference's at that step all the same.
        end = saved + 240
        c.start_ckpt_job(MODEL + ["--steps", str(end), "--verbose"], node_names=["node0", "node2"])
        rc = wait_job_exit(c, 240, "the relaunched job to finish")
        check(rc == 0, "the relaunched job exited %d:\n%s" % (rc, c.job_output()[-3000:]))
        restored = c.restored()
        check(restored == {r: saved for r in range(8)}, "restored %s, expected step %s on every rank" % (restored, saved))
        check_reference(c, args, MODEL + ["--steps", str(end)], 8)
        after = step_ms(c.job_output(), 0, saved + 20, saved + 220)
        # The lower quartile: load from elsewhere on the machine only ever adds time to a step,
        # so it moves a median between two phases of a run far more than the quartile.
        q = {name: statistics.quantiles(v, n=4)[0] for name, v in (("before", before), ("slow", slow),
                                                                   ("after", after))}
        ratio = q["after"] / q["before"]
        print("rank 0's step (lower quartile; median): %.1f ms (%.1f) before the fault, %.1f ms (%.1f) while "
              "rank 5 was slow, %.1f ms (%.1f) after the replacement: %.3fx" %
              (q["before"], statistics.median(before), q["slow"], statistics.median(slow), q["after"],
               statistics.median(after), ratio))
        # The slow node is gone: its 1.5x is not in the steps after the replacement. How close to
        # the steps before they come (target 1.03) is make bench-failslow's measure, median of
        # runs; one run's phases move a few % with whatever else the machine does (1.038 once).
        check(ratio <= AFTER_RATIO_LIMIT, "steps after the replacement take %.3fx those before the fault (limit %.2f)"
              % (ratio, AFTER_RATIO_LIMIT))
        # The straggler's slowdown is its own, never the job's. The relaunched run may slow as
        # a whole (load from the tests beside it), which ftmaster names, rightly, only while the
        # run's own steps show it: once it named a burst that had passed (steps at 0.95x).
        jobwide = [i for i in c.incidents("job-slow") if i["decided_unix_ms"] < relaunched_ms]
        check(not jobwide, "the straggler's slowdown was called job-wide: %s" % [i["message"] for i in jobwide])
        for inc in c.incidents("job-slow"):
            print("the relaunched run slowed as a whole: %s" % inc["message"])
            check(borne_out(c, inc, baseline), "a job-slow incident the relaunched run's steps do not show: %s"
                  % inc["evidence"])
        false = [n for n in evicted(c) if n != "node1"]
        print("RESULT failslow case=evict localize_s=%.1f false_evictions=%d step_time_after_ratio=%.3f"
              % (took, len(false), ratio))


def localize_case(factor, name=None, model=MODEL, topology=TOPOLOGY):
    def run(args):
        # Named about 10 s after the fault at any factor (1.2x: 12 s); the job runs on about twice
        # that, for the report policy to show it does nothing.
        steps = FAULT_STEP + (400 if factor < 1.5 else 300 if factor < 2 else 180)
        job = "fs-%s" % (name or "x%d" % round(factor * 10))  # no dot: a job name keeps it as a key
        with CkptCluster(args, job=job) as c:
            c.start_master(topology, FAST)
            start_workers(c)
            # Kernels sampled: trainsim's slow rank spins longer in its compute kernel, which the
            # incident must put on its GPU.
            c.start_ckpt_job(model + ["--steps", str(steps), "--fault", "slow", "--slow-factor", str(factor),
                                      "--fault-rank", str(SLOW_RANK), "--fault-step", str(FAULT_STEP)],
                             env={"FT_KERNEL_SAMPLE": "1"}, timeout=300)
            c.wait_for(lambda: fault_unix_ms(c, SLOW_RANK), 60, "the slowdown to begin")
            inc, took = localized(c, SLOW_RANK, "node1", fault_unix_ms(c, SLOW_RANK))
            check("FT_SLOW_ACTION=report" in inc["message"], "the default policy is not report: %s" % inc["message"])
            check("its GPU: the same kernels run" in inc["message"],
                  "the incident does not put the time on the GPU: %s" % inc["message"])
            rc = wait_job_exit(c, 300, "the job to finish")
            check(rc == 0, "the job exited %d" % rc)
            stops = [i for i in c.incidents() if i["decision"] != "none"]
            print("RESULT failslow case=%s localize_s=%.1f false_evictions=%d"
                  % (name or "x%s" % factor, took, len(evicted(c))))
            check(not stops and not evicted(c), "the report policy acted: %s, evicted %s" % (stops, evicted(c)))
    return run


def check_job_wide_ends(c, inc, case):
    """A job-wide slowdown's incident `inc` names no suspect; the job finishes, and nothing else
    was blamed or evicted. Prints the case's RESULT line."""
    check(not inc["suspects"], "a job-wide slowdown names suspects: %s" % inc["suspects"])
    rc = wait_job_exit(c, 300, "the job to finish")
    check(rc == 0, "the job exited %d" % rc)
    others = [(i["kind"], suspects(i), i["decision"]) for i in c.incidents() if i["kind"] != "job-slow"]
    print("RESULT failslow case=%s false_evictions=%d incidents=%s"
          % (case, len(evicted(c)), json.dumps([i["kind"] for i in c.incidents()])))
    check(not others and not evicted(c), "a job-wide slowdown was blamed: %s, evicted %s" % (others, evicted(c)))


def case_job_wide(args):
    # The slow phase outlasts the 20 s settle with room: on a loaded host (CI) a rank or two
    # may take 30 s to see the slowdown through its own noise, or never see it, and the share
    # (6 of 8) may be reached only seconds after the fault. 700 steps: about 45 s here.
    # JOB_WIDE_FACTOR: 1.5x, above what the load of `make test` moves a baseline by. At 1.3x
    # (+12 ms of a 62 ms step) the workers of 4 of 8 ranks once found their steps back at
    # their baselines for the last 13 s of the slow phase, as the other tests' load fell.
    steps = FAULT_STEP + 700
    with CkptCluster(args, job="fs-jobwide") as c:
        c.start_master(TOPOLOGY, {**FAST, "FT_SLOW_ACTION": "evict", "FT_SLOW_CONFIRM": "10s"})
        start_workers(c)
        c.start_ckpt_job(MODEL + ["--steps", str(steps), "--fault", "slow", "--slow-factor", JOB_WIDE_FACTOR,
                                  "--fault-rank", "all", "--fault-step", str(FAULT_STEP)], timeout=300)
        inc = c.wait_for(lambda: c.incidents("job-slow"), 120, "a job-slow incident")[0]
        print("incident %s: %s\n  evidence: %s" % (inc["id"], inc["message"], inc["evidence"][:3]))
        check_job_wide_ends(c, inc, "job-wide")


def case_job_wide_takeover(args):
    """The job-wide slowdown of case job-wide, with a second master standing by: the leader is
    killed once its events cursor (in the master hash) is past the slowdown reports of 6 ranks
    (the share) raised since the fault, before its 20 s settle ends. The new leader reads the events after that cursor,
    without those reports: the workers' verdicts in the summaries stand for them, and it names
    the job-slow incident."""
    steps = FAULT_STEP + 700
    # The default lease (2 s): with 1 s, two busy loops once made m0 miss a renewal before the
    # reports came, m1 led early and read them itself, and the kill of m0 tested nothing.
    env = {**FAST, "FT_SLOW_ACTION": "evict", "FT_SLOW_CONFIRM": "10s"}
    with CkptCluster(args, job="fs-jobwide-takeover") as c:
        m0 = c.start_master(TOPOLOGY, env, name="m0")
        c.wait_for(lambda: c.db.command("GET", c.key("leader")) == "m0", 10, "m0 leading")
        c.start_master(TOPOLOGY, env, name="m1")
        start_workers(c)
        c.start_ckpt_job(MODEL + ["--steps", str(steps), "--fault", "slow", "--slow-factor", JOB_WIDE_FACTOR,
                                  "--fault-rank", "all", "--fault-step", str(FAULT_STEP)], timeout=300)

        def read_by_m0():
            """The ranks whose slowdown reports since the fault are at or before m0's persisted
            events cursor. (Not those of a load burst before it: once the four ranks of each
            node reported one and were cleared 0.4 s later, and m1 read the fault's own.)"""
            cursor = c.db.command("HGET", c.key("master"), "events_cursor")
            faults = [fault_unix_ms(c, r) for r in range(8)]
            if not cursor or None in faults:
                return set()
            events = [json.loads(dict(zip(f[0::2], f[1::2]))["json"])
                      for _, f in c.db.command("XRANGE", c.key("events"), "-", cursor) or []]
            return {e["rank"] for e in events if e["kind"] == "slowdown" and e["unix_ms"] >= min(faults)}
        # (Killed right after it logged a report but before it wrote its cursor, m0 leaves the
        # report to m1, which reads it again: the cursor, not the log, says what m1 cannot read.)
        c.wait_for(lambda: len(read_by_m0()) >= 6, 120, "m0's cursor past the slowdown reports of 6 ranks", poll=0.1)
        m1_before = c.master_log("m1")
        m0.send_signal(signal.SIGKILL)
        m0.wait()
        print("killed the leader m0 once its cursor was past the reports of ranks %s" % sorted(read_by_m0()))
        # The cursor is the leader's: it was m0's only if m0 led from its start to its kill.
        check("lost the leader lease" not in c.master_log("m0") and "leading as 'm1'" not in m1_before,
              "m0 did not lead until it was killed (m1 read the reports itself): m0's log:\n%s\nm1's log:\n%s"
              % (c.master_log("m0")[-3000:], m1_before[-3000:]))
        check("kind=job-slow" not in c.master_log("m0"), "m0 named the job-slow incident before it was killed")
        c.wait_for(lambda: c.db.command("GET", c.key("leader")) == "m1", 10, "m1 leading")
        inc = c.wait_for(lambda: c.incidents("job-slow"), 90, "a job-slow incident from m1")[0]
        print("incident %s: %s\n  evidence: %s" % (inc["id"], inc["message"], inc["evidence"]))
        check("kind=job-slow" in c.master_log("m1"), "the job-slow incident is not m1's")
        check(any("slow by its worker's detector" in e for e in inc["evidence"]),
              "no rank counted by its worker's verdict: %s; the reports m1 read itself: %s" %
              (inc["evidence"], re.findall(r"rank \d+ on \S+ is slow", c.master_log("m1"))))
        check_job_wide_ends(c, inc, "job-wide-takeover")


def slow_link_case(name, model, topology, rule):
    """A communicator of ranks 1 (node0) and 5 (node1) moves its data 20 ms slower on gpusim
    (GPUSIM_NCCL_SLOW: a collective once both arrived, a message once its receiver is there): a
    slow-link incident names both ends and their nodes; no straggler, nothing evicted
    (FT_SLOW_ACTION=evict), the job finishes."""
    return lambda args: check_slow_link(args, name, model, topology, rule)


def check_slow_link(args, name, model, topology, rule):
    steps = 450  # named about 11 s after the job started, which is 450 steps' half
    with CkptCluster(args, job="fs-%s" % name) as c:
        c.start_master(topology, {**FAST, "FT_SLOW_ACTION": "evict"})
        start_workers(c)
        started_ms = int(time.time() * 1000)
        c.start_ckpt_job(model + ["--steps", str(steps)], env={"GPUSIM_NCCL_SLOW": rule}, timeout=300)
        inc = c.wait_for(lambda: c.incidents("slow-link"), 90, "a slow-link incident")[0]
        took = (inc["decided_unix_ms"] - started_ms) / 1000.0
        print("incident %s: %s\n  %s\n  evidence: %s" % (inc["id"], suspects(inc), inc["message"], inc["evidence"]))
        check(suspects(inc) == [(1, "node0"), (5, "node1")], "slow link named %s, expected ranks 1 and 5" % suspects(inc))
        rc = wait_job_exit(c, 300, "the job to finish")
        check(rc == 0, "the job exited %d" % rc)
        others = [(i["kind"], suspects(i), i["decision"]) for i in c.incidents() if i["kind"] != "slow-link"]
        print("RESULT failslow case=%s localize_s=%.1f false_evictions=%d" % (name, took, len(evicted(c))))
        check(not others and not evicted(c), "a slow link was blamed on a rank: %s, evicted %s" % (others, evicted(c)))


def case_slow_ends(args):
    """Rank 5 1.5x slower for about 10 s, then as fast as before, FT_SLOW_ACTION=evict with the
    default FT_SLOW_CONFIRM (30 s): reported at most, never evicted; the job finishes."""
    steps = FAULT_STEP + 450
    with CkptCluster(args, job="fs-ends") as c:
        c.start_master(TOPOLOGY, {**FAST, "FT_SLOW_ACTION": "evict"})
        start_workers(c)
        c.start_ckpt_job(MODEL + ["--steps", str(steps), "--fault", "slow", "--slow-factor", "1.5",
                                  "--slow-steps", "150", "--fault-rank", str(SLOW_RANK),
                                  "--fault-step", str(FAULT_STEP)], timeout=300)
        rc = wait_job_exit(c, 300, "the job to finish")
        check(rc == 0, "the job exited %d" % rc)
        named = [(i["kind"], suspects(i), i["decision"]) for i in c.incidents()]
        print("incidents: %s" % named)
        stops = [i for i in c.incidents() if i["decision"] != "none"]
        print("RESULT failslow case=slow-ends false_evictions=%d named=%d" %
              (len(evicted(c)), len(c.incidents("straggler"))))
        check(not stops and not evicted(c), "a slowdown that ended was acted on: %s, evicted %s" % (named, evicted(c)))


def case_jitter(args):
    """Every rank's compute jitters +-20% per step for 5 minutes (--long; 60 s otherwise),
    FT_SLOW_ACTION=evict: no incident of any kind, nothing evicted."""
    seconds = 300 if args.long else 60
    steps = int(seconds * 1000 / 55)
    with CkptCluster(args, job="fs-jitter") as c:
        c.start_master(TOPOLOGY, {**FAST, "FT_SLOW_ACTION": "evict"})
        start_workers(c)
        c.start_ckpt_job(MODEL + ["--steps", str(steps), "--jitter", "0.2"], timeout=seconds + 120)
        rc = wait_job_exit(c, seconds + 240, "the job to finish")
        check(rc == 0, "the job exited %d" % rc)
        c.wait_exits(range(8))
        c.wait_for(c.master_caught_up, 30, "the master to read every event")
        named = [(i["kind"], suspects(i), i["decision"]) for i in c.incidents()]
        print("RESULT failslow case=jitter seconds=%d false_evictions=%d incidents=%d" %
              (seconds, len(evicted(c)), len(named)))
        check(not named and not evicted(c), "a healthy job with jitter raised %s, evicted %s" % (named, evicted(c)))


CASES = {"evict": case_evict, "localize-x1.2": localize_case(1.2),
         "localize-x3": localize_case(3, "x3-backward", DDP_MODEL, DDP_TOPOLOGY),
         "overlap": localize_case(1.5, "overlap", DDP_MODEL + ["--overlap-grad-reduce"], DDP_TOPOLOGY),
         "pipeline": localize_case(1.5, "pipeline", PP_MODEL, PP_TOPOLOGY),
         "job-wide": case_job_wide, "job-wide-takeover": case_job_wide_takeover, "slow-ends": case_slow_ends, "jitter": case_jitter,
         "slow-link": slow_link_case("link", MODEL, TOPOLOGY, "dp:20@1+5"),
         "slow-p2p-link": slow_link_case("p2p-link", PP_MODEL, PP_TOPOLOGY, "pp:20@1+5")}

if __name__ == "__main__":
    long_run = "--long" in sys.argv
    if long_run:
        sys.argv.remove("--long")
    a = parse_args()
    a.long = long_run
    CASES[a.case](a)
    print("OK")
