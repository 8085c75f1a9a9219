#!/usr/bin/env python3
"""End to end checks of what ft trusts and what it tells people.

  --case redis-flush  Redis loses its data mid-run (FLUSHALL): the workers write their ranks'
                      membership again; a later hang (rank 5's kernel) is named, the save
                      reaches every healthy rank (no "no node is known", none unreachable),
                      and the master records how many shards were saved and verified
  --case secrets      ft-print-config shows FT_REDIS_PASSWORD as <redacted>; a password in a
                      --redis URL is warned about (visible in ps) without being printed; the
                      embedded Redis's env file is created, never opened as found: a symlink
                      planted at its temporary name makes ftmaster fail and writes nothing
                      through it; the file it writes is mode 0600
"""

import argparse
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, check, fail  # noqa: E402

MODEL = ["--dp", "2", "--tp", "2", "--pp", "2"]
TOPOLOGY = ["--topology", "dp=2,tp=2,pp=2", "--order", "tp-dp-pp"]
FAST = {"FT_TIMEOUT_WARMUP": "2s", "FT_TIMEOUT_MIN_SAMPLES": "5"}


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster", "print_config"):
        p.add_argument("--" + name.replace("_", "-"), dest=name, required=True)
    p.add_argument("--case", required=True)
    return p.parse_args()


def case_redis_flush(args):
    with Cluster(args, job="tr-flush") as c:
        c.start_master(TOPOLOGY, FAST)
        c.start_workers(FAST)
        c.start_job(MODEL + ["--steps", "100000", "--compute-ms", "20", "--fault", "hang-kernel",
                             "--fault-rank", "5", "--fault-step", "400"])
        ranks = lambda: c.db.command("HLEN", c.key("ranks")) == 8  # noqa: E731
        c.wait_for(ranks, 60, "the membership of all 8 ranks")
        c.wait_for(lambda: c.db.command("GET", c.key("timeouts:version")), 60, "published timeouts")
        # Flush once membership settled (every communicator made): what comes back after it is
        # the workers re-asserting it, not a change they would have written anyway.
        def settled():
            before = c.db.command("HGETALL", c.key("ranks"))
            time.sleep(1.5)
            return before == c.db.command("HGETALL", c.key("ranks"))
        c.wait_for(settled, 60, "a settled membership")
        check(not c.incidents(), "an incident before the flush: %s" % c.incidents())
        flushed_ms = int(time.time() * 1000)
        check(c.db.command("FLUSHALL") == "OK", "FLUSHALL failed")
        print("FLUSHALL at %d" % flushed_ms)
        c.wait_for(ranks, 15, "the membership written again after the flush")
        print("membership of 8 ranks back after %.1f s" % (time.time() - flushed_ms / 1000))
        inc = c.wait_for(lambda: c.incidents("hang"), 90, "hang incident")[0]
        suspects = sorted((s["rank"], s["node"]) for s in inc["suspects"])
        print("incident %s: suspects=%s decision=%s" % (inc["id"], suspects, inc["decision"]))
        check(suspects == [(5, "node1")], "suspects %s, expected rank 5 on node1" % suspects)
        check(inc["first_event_unix_ms"] >= flushed_ms, "the hang began before the flush")
        check(inc["decision"] == "save-then-stop", "decision %s" % inc["decision"])
        outcome = c.wait_for(lambda: c.hash_json("master", "checkpoint"), 60, "the checkpoint outcome")
        print("checkpoint: %s" % outcome)
        check(outcome["incident"] == inc["id"], "outcome of incident %s" % outcome["incident"])
        check(outcome["shards"] >= 4, "%d shards, expected one per (tp, pp) at least" % outcome["shards"])
        check(outcome["unreachable"] == 0, "%d save targets had no node: membership was not "
              "re-asserted" % outcome["unreachable"])
        check(outcome["done"] == outcome["ranks"] == 7, "%d of %d save targets answered done, expected "
              "all 7 healthy ranks" % (outcome["done"], outcome["ranks"]))
        check(outcome["saved"] == outcome["verified"] == outcome["shards"],
              "saved %d and verified %d of %d shards" % (outcome["saved"], outcome["verified"], outcome["shards"]))
        c.wait_for(lambda: c.job_proc.poll() is not None, 60, "the job stopped by the master")
        log = c.master_log()
        check("no node is known" not in log, "the master found no node for a save target")
        check("saved %d of %d shards" % (outcome["shards"], outcome["shards"]) in log,
              "the master did not say what was saved")
        check(all("writing it again" in c.worker_log(n) for n in ("node0", "node1")),
              "a worker did not say it re-asserted its membership")
        print("OK: membership re-asserted, rank 5 named, %d of %d shards saved and verified" % (outcome["saved"], outcome["shards"]))


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def case_secrets(args):
    env = dict(os.environ)
    env.pop("FT_REDIS", None)
    env["FT_REDIS_PASSWORD"] = "hunter2-e2e"
    out = subprocess.run([args.print_config], env=env, capture_output=True, text=True, timeout=20)
    check(out.returncode == 0, "ft-print-config failed: %s" % out.stderr)
    check("hunter2" not in out.stdout + out.stderr, "ft-print-config printed the password")
    line = [l for l in out.stdout.splitlines() if l.startswith("FT_REDIS_PASSWORD")]
    check(line and line[0].endswith("value=<redacted>"), "FT_REDIS_PASSWORD line: %s" % line)

    env.pop("FT_REDIS_PASSWORD")
    url = "redis://alice:pw-in-url-123@127.0.0.1:%d" % closed_port()
    out = subprocess.run([args.ftmaster, "status", "--job", "tr-secrets", "--redis", url], env=env,
                         capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    check(out.returncode != 0, "ftmaster status reached a closed port?")
    check("visible to every user" in text and "FT_REDIS_PASSWORD" in text,
          "no warning about the password in --redis:\n" + text)
    check("pw-in-url-123" not in text, "the password was printed:\n" + text)

    with tempfile.TemporaryDirectory() as d:
        victim = os.path.join(d, "victim")
        with open(victim, "w") as f:
            f.write("untouched\n")
        env_file = os.path.join(d, "job.redis.env")
        os.symlink(victim, env_file + ".tmp")
        out = subprocess.run([args.ftmaster, "run", "--job", "tr-secrets", "--redis-env", env_file],
                             env=env, capture_output=True, text=True, timeout=60)
        text = out.stdout + out.stderr
        check(out.returncode != 0, "ftmaster run wrote its env file through a planted symlink")
        check("exists already" in text, "no clear error about the planted file:\n" + text)
        with open(victim) as f:
            check(f.read() == "untouched\n", "the password was written through the symlink")
        check(not os.path.exists(env_file), "an env file was written anyway")

        os.unlink(env_file + ".tmp")
        proc = subprocess.Popen([args.ftmaster, "run", "--job", "tr-secrets", "--redis-env", env_file],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 30
            while not os.path.exists(env_file) and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            check(os.path.exists(env_file), "ftmaster run wrote no env file")
            mode = stat.S_IMODE(os.lstat(env_file).st_mode)
            check(mode == 0o600, "env file mode %o, expected 600" % mode)
            with open(env_file) as f:
                check("FT_REDIS_PASSWORD=" in f.read(), "env file without the password")
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    print("OK: password redacted, URL password warned about, env file created safely")


def main():
    args = parse_args()
    cases = {"redis-flush": case_redis_flush, "secrets": case_secrets}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
