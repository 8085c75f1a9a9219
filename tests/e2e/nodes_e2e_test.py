#!/usr/bin/env python3
"""Nodes across jobs end to end (docs/nodes.md): two jobs one after the other on one real
redis-server, each with its own ftmaster and ftworkers (trainsim on gpusim under libft.so, dp=2
tp=4 on 2 nodes; rank 5 is node1's GPU 1), evict the same node for different reasons:

  job A   rank 5's kernel hangs: a hang incident names rank 5 on node1, node1 evicted
          ("a hang suspect")
  job B   Xid 79 on rank 5's GPU (gpusim's NVML), then rank 5 SIGKILLed: a crash incident with
          the Xid as evidence, node1 evicted for it

Then, with job B's master still running and no job given:
  - `ftmaster nodes --json` shows node1's history of both jobs: job A's suspect and eviction,
    job B's crash, hardware signal and eviction, each eviction with its reason;
  - `ftmaster nodes --lemons --json` lists node1 first, a lemon;
  - `ftmaster nodes --cordon node0 --reason R --for 1h` runs FT_CORDON_COMMAND with the reason as
    one argument (never through a shell: R holds `$(...)` and quotes), job B's master adds node0
    to its eviction list with the reason, `--cordon-commands slurm|k8s` print the drain lines,
    and `--uncordon node0` takes it back out (node1 stays: evicted by the job itself).

  --case two-jobs   the above
"""

import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import check  # noqa: E402
from ckpt_e2e_test import parse_args  # noqa: E402
from health_e2e_test import MODEL, RANK, HealthCluster  # noqa: E402


def nodes_cli(c, *args, env=None, ok=True):
    """`ftmaster nodes ...` with no job at all (FT_JOB unset): the nodes are every job's."""
    e = c.base_env(env)
    e.pop("FT_JOB", None)
    out = subprocess.run([c.paths.ftmaster, "nodes", "--redis", c.redis_url()] + list(args), env=e,
                         capture_output=True, text=True, timeout=30)
    if ok:
        check(out.returncode == 0, "ftmaster nodes %s exited %d: %s" % (" ".join(args), out.returncode, out.stderr))
    return out


def history(c, node):
    """node's history as Redis holds it: (kind, record), oldest first."""
    raw = c.db.command("XRANGE", "ft:node:{%s}:history" % node, "-", "+") or []
    return [(dict(zip(f[0::2], f[1::2]))["kind"], json.loads(dict(zip(f[0::2], f[1::2]))["json"])) for _, f in raw]


def of_job(c, node, job, kind):
    return [r for k, r in history(c, node) if k == kind and r.get("job") == job]


def taint_value(reason):
    """What a Kubernetes taint value may hold, as ftmaster makes it of a reason (ftmaster/cli/nodes.h)."""
    ok = re.compile(r"[A-Za-z0-9]")
    v = ""
    for ch in reason:
        m = ch if ok.match(ch) or ch in "-._" else "_"
        if m == "_" and v.endswith("_"):
            continue
        v += m
    trim = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")
    v = trim.sub("", trim.sub("", v)[:63])
    return v or "cordoned"


def end_job(c):
    """The job, its workers and its master gone; its segments removed: the next job starts afresh
    on the same Redis and nodes."""
    c.stop_job()
    for node in list(c.workers):
        c.stop_worker(node)
    for proc in c.masters.values():
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=15)
    c.masters = {}
    c.master = None
    c.cleanup_segments()


def case_two_jobs(args):
    t0 = time.monotonic()
    with HealthCluster(args, job="nodes") as c:
        base = c.job
        # ---- job A: a hang on node1 ----------------------------------------------------------
        c.job = job_a = base + "-a"
        c.start()
        c.start_ckpt_job(MODEL + ["--fault", "hang-kernel", "--fault-rank", str(RANK), "--fault-step", "30"])
        hang = c.wait_for(lambda: c.incidents("hang"), 60, "job A's hang incident")[0]
        check(sorted((s["rank"], s["node"]) for s in hang["suspects"]) == [(RANK, "node1")],
              "job A's hang names %s" % hang["suspects"])
        check(hang.get("evicted") == [{"node": "node1", "why": "a hang suspect"}],
              "job A's incident carries its eviction: %s" % hang.get("evicted"))
        evicted_a = c.wait_for(lambda: of_job(c, "node1", job_a, "evicted"), 15, "job A's eviction in node1's history")
        check(evicted_a[0]["detail"] == "a hang suspect" and evicted_a[0]["incident"] == hang["id"],
              "job A's eviction record: %s" % evicted_a[0])
        check(of_job(c, "node1", job_a, "suspect"), "job A's suspect record missing: %s" % history(c, "node1"))
        check(not history(c, "node0"), "node0 has a history after job A: %s" % history(c, "node0"))
        print("job A: node1 evicted for a hang (%.1f s)" % (time.monotonic() - t0), flush=True)
        end_job(c)

        # ---- job B: a crash with an Xid on node1 --------------------------------------------
        c.job = job_b = base + "-b"
        c.start()
        c.start_ckpt_job(MODEL)
        c.wait_running()
        c.sig["node1"].nvml_line("xid 1 79")
        c.wait_for(lambda: c.hardware_events("xid"), 30, "the Xid reported")
        c.kill_rank(RANK)
        crash = c.wait_for(lambda: c.incidents("crash"), 60, "job B's crash incident")[0]
        c.wait_for(lambda: c.evicted() == ["node1"], 30, "job B's eviction of node1")
        evicted_b = c.wait_for(lambda: of_job(c, "node1", job_b, "evicted"), 15, "job B's eviction in node1's history")
        check("Xid 79" in evicted_b[0]["detail"], "job B's eviction reason: %s" % evicted_b[0])
        check(evicted_b[0]["incident"] == crash["id"], "job B's eviction names %s" % evicted_b[0]["incident"])
        print("job B: node1 evicted for a crash with Xid 79 (%.1f s)" % (time.monotonic() - t0), flush=True)

        # ---- ftmaster nodes -----------------------------------------------------------------
        listing = json.loads(nodes_cli(c, "--json").stdout)
        by_node = {n["node"]: n for n in listing["nodes"]}
        check("node1" in by_node, "nodes lists %s" % sorted(by_node))
        n1 = by_node["node1"]
        # Job B's Xid twice: its `hardware` incident (before the crash) and the crash's evidence.
        kinds = sorted(set((r["job"], r["kind"]) for r in n1["records"]))
        want = sorted([(job_a, "suspect"), (job_a, "evicted"), (job_b, "crash"), (job_b, "hardware"), (job_b, "evicted")])
        check(kinds == want, "node1's records %s, expected %s" % (kinds, want))
        reasons = {r["job"]: r["detail"] for r in n1["records"] if r["kind"] == "evicted"}
        check(reasons[job_a] == "a hang suspect" and "Xid 79" in reasons[job_b],
              "node1's eviction reasons: %s" % reasons)
        check(n1["jobs"] == [job_b, job_a], "node1's jobs %s" % n1["jobs"])
        check(n1["counts"]["evicted"] == 2 and listing["garbled"] == 0, "node1: %s" % n1)
        print("node1: score %.2f, lemon %s, %d records of 2 jobs" % (n1["score"], n1["lemon"], len(n1["records"])))
        lemons = json.loads(nodes_cli(c, "--lemons", "--json").stdout)["nodes"]
        check(lemons and lemons[0]["node"] == "node1" and lemons[0]["lemon"], "--lemons lists %s first" %
              [n["node"] for n in lemons])
        text = nodes_cli(c).stdout
        print(text, end="")
        check(text.splitlines()[1].startswith("node1 "), "the table does not start with node1:\n" + text)

        # ---- cordon round trip --------------------------------------------------------------
        tmp = tempfile.mkdtemp(prefix="ft-e2e-cordon-")
        script, record, pwned = (os.path.join(tmp, n) for n in ("drain", "args", "pwned"))
        with open(script, "w") as f:
            f.write('#!/bin/sh\nprintf "%%s\\n" "$@" > %s\nprintf "%%s\\n" "$FT_CORDON_REASON" >> %s\n' % (record, record))
        os.chmod(script, stat.S_IRWXU)
        reason = "lemon: $(touch %s) `touch %s` it's \"flaky\"" % (pwned, pwned)
        nodes_cli(c, "--cordon", "node0", "--reason", reason, "--for", "1h", env={"FT_CORDON_COMMAND": script})
        with open(record) as f:
            got = f.read().splitlines()
        check(got == ["cordon", "node0", reason, reason], "FT_CORDON_COMMAND got %s" % got)
        check(not os.path.exists(pwned), "the reason ran in a shell")
        c.wait_for(lambda: c.evicted() == ["node0", "node1"], 15, "job B's master to add the cordoned node0")
        why = c.db.command("HGET", c.key("master"), "evicted_why:node0")
        check(why == "cordoned: " + reason, "node0's eviction reason %r" % why)
        slurm = nodes_cli(c, "--cordon-commands", "slurm").stdout
        quoted = reason.replace("'", "'\\''")
        check(slurm == "scontrol update NodeName=node0 State=DRAIN Reason='%s'\n" % quoted, "slurm: %r" % slurm)
        # The line is one shell word per argument: a shell hands scontrol the reason unchanged.
        echoed = subprocess.run(["sh", "-c", "printf '%s\\n' " + slurm.split("State=DRAIN ", 1)[1]],
                                capture_output=True, text=True).stdout
        check(echoed == "Reason=%s\n" % reason and not os.path.exists(pwned), "the slurm line quotes badly: %r" % echoed)
        k8s = nodes_cli(c, "--cordon-commands", "k8s").stdout
        check(k8s == "kubectl taint nodes node0 ft.io/lemon=%s:NoSchedule --overwrite\n" % taint_value(reason),
              "k8s: %r" % k8s)
        listing = json.loads(nodes_cli(c, "--json").stdout)
        by_node = {n["node"]: n for n in listing["nodes"]}
        check(by_node["node0"]["cordon"]["active"] and by_node["node0"]["cordon"]["reason"] == reason,
              "node0's cordon: %s" % by_node["node0"]["cordon"])
        check([n["node"] for n in listing["nodes"]][0] == "node1", "a cordon outweighed node1's history")
        lemons = [n["node"] for n in json.loads(nodes_cli(c, "--lemons", "--json").stdout)["nodes"]]
        check(lemons == ["node1"], "lemons after the cordon: %s" % lemons)
        nodes_cli(c, "--uncordon", "node0", env={"FT_CORDON_COMMAND": script})
        with open(record) as f:
            check(f.read().splitlines()[:2] == ["uncordon", "node0"], "FT_CORDON_COMMAND not told of the uncordon")
        c.wait_for(lambda: c.evicted() == ["node1"], 15, "job B's master to take node0 back out")
        kinds0 = [k for k, _ in history(c, "node0")]
        check(kinds0 == ["cordon", "uncordon"], "node0's history %s" % kinds0)
        gone = nodes_cli(c, "--uncordon", "node0", ok=False)
        check(gone.returncode == 1 and "not cordoned" in gone.stderr, "a second uncordon: %s" % gone.stderr)
        for name in (script, record):
            os.unlink(name)
        os.rmdir(tmp)
        took = time.monotonic() - t0
        print("RESULT nodes case=two-jobs seconds=%.1f score_node1=%.2f" % (took, n1["score"]))
        print("OK: node1's history holds both jobs' evictions, it leads the lemons; node0 cordoned and "
              "uncordoned through job B's eviction list")


def main():
    args = parse_args()
    {"two-jobs": case_two_jobs}[args.case](args)


if __name__ == "__main__":
    main()
