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
  --case transfer-secret
                      the leading master creates ft:{J}:transfer:secret (64 lowercase hex
                      characters) in the embedded Redis and in a given one; a standby, a
                      successor and a restarted master keep it; no master log line, no
                      `ftmaster status|checkpoints|evicted` output (text or --json) and no
                      process's argv carries it
"""

import argparse
import json
import os
import re
import socket
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, check, fail  # noqa: E402
from redis_fixture import RedisError, RedisServer, RespClient  # noqa: E402

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


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    fail("timed out after %.0f s waiting for %s" % (timeout, what))


def read_env_file(path):
    values = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.strip().split("=", 1)
                values[k] = v.strip("'\"")
    return values


def argv_of(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def every_argv():
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            out.append(argv_of(int(name)))
    return "\n".join(out)


def start_master(args, env, job, log_path, extra=()):
    log = open(log_path, "w")
    proc = subprocess.Popen([args.ftmaster, "run", "--job", job] + list(extra), env=env,
                            stdout=log, stderr=subprocess.STDOUT, text=True)
    log.close()
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cli_outputs(args, env, job, extra):
    text = ""
    for command in ("status", "checkpoints", "evicted"):
        for json_flag in ([], ["--json"]):
            out = subprocess.run([args.ftmaster, command, "--job", job] + extra + json_flag, env=env,
                                 capture_output=True, text=True, timeout=60)
            check(out.returncode == 0, "ftmaster %s failed: %s" % (command, out.stdout + out.stderr))
            text += out.stdout + out.stderr
    return text


def case_transfer_secret(args):
    job = "tr-transfer-%d" % os.getpid()
    key = "ft:{%s}:transfer:secret" % job
    env = dict(os.environ)
    for k in ("FT_REDIS", "FT_REDIS_PASSWORD"):
        env.pop(k, None)
    env["FT_LOG_LEVEL"] = "debug"  # every line a master can write, for the check below
    with tempfile.TemporaryDirectory() as d:
        # 1. The embedded Redis: the master that starts it creates the secret there.
        env_file = os.path.join(d, "job.redis.env")
        logs = [os.path.join(d, "embedded.log")]
        proc = start_master(args, env, job, logs[0], ["--redis-env", env_file])
        try:
            wait_until(lambda: os.path.exists(env_file) or proc.poll() is not None, 30, "the env file")
            conf = read_env_file(env_file)
            port = int(conf["FT_REDIS"].rsplit(":", 1)[1].split("/")[0])
            def secret_there():
                try:
                    with RespClient("127.0.0.1", port, conf["FT_REDIS_PASSWORD"], timeout=2) as c:
                        return c.command("GET", key)
                except (OSError, RedisError):
                    return None
            embedded = wait_until(secret_there, 30, "the transfer secret in the embedded Redis")
            check(re.fullmatch(r"[0-9a-f]{64}", embedded) is not None, "secret is not 64 hex chars")
            seen = every_argv()
            text = cli_outputs(args, env, job, ["--redis-env", env_file])
        finally:
            stop(proc)
        check(embedded not in seen, "a process's argv carries the secret")
        check(embedded not in text, "the CLI printed the secret")
        print("embedded Redis: secret created (64 hex chars), not in argv or CLI output")

        # 2. A given Redis: a standby, a successor and a restarted master keep the secret.
        with RedisServer() as redis:
            env2 = dict(env, FT_REDIS=redis.url, FT_REDIS_PASSWORD=redis.password)
            with redis.client() as db:
                logs += [os.path.join(d, n + ".log") for n in ("m1", "m2", "m3")]
                m1 = start_master(args, env2, job, logs[1], ["--id", "m1"])
                m2 = None
                try:
                    secret = wait_until(lambda: db.command("GET", key), 30, "the transfer secret")
                    check(re.fullmatch(r"[0-9a-f]{64}", secret) is not None, "secret is not 64 hex chars")
                    check(secret != embedded, "two jobs' Redis got the same secret")
                    m2 = start_master(args, env2, job, logs[2], ["--id", "m2"])
                    time.sleep(1.0)  # the standby runs a while: it must not touch the secret
                    check(db.command("GET", key) == secret, "a standby replaced the secret")
                    stop(m1)  # clean exit: the lease is released and m2 takes over
                    wait_until(lambda: db.command("GET", "ft:{%s}:leader" % job) == "m2", 30,
                               "m2 leading")
                    wait_until(lambda: "state loaded" in open(logs[2]).read(), 30, "m2's term loaded")
                    check(db.command("GET", key) == secret, "the successor replaced the secret")
                    stop(m2)
                    m1 = start_master(args, env2, job, logs[3], ["--id", "m1"])
                    wait_until(lambda: "state loaded" in open(logs[3]).read(), 30,
                               "the restarted master's term loaded")
                    check(db.command("GET", key) == secret, "the restarted master replaced the secret")
                    seen = every_argv()
                    text = cli_outputs(args, env2, job, [])
                finally:
                    stop(m1)
                    if m2 is not None:
                        stop(m2)
            check(secret not in seen, "a process's argv carries the secret")
            check(secret not in text, "the CLI printed the secret")
        for path in logs:
            with open(path) as f:
                log = f.read()
            check(embedded not in log and secret not in log, "%s carries the secret" % path)
        check("transfer secret" in open(logs[0]).read(), "the embedded master did not say where the secret is")
    print("OK: secret created once per job, kept by standby, successor and restarted master; "
          "never in a log, the CLI or argv")


def main():
    args = parse_args()
    cases = {"redis-flush": case_redis_flush, "secrets": case_secrets, "transfer-secret": case_transfer_secret}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
