#!/usr/bin/env python3
"""Serving checkpoint copies to peers, end to end: trainsim on gpusim under libft.so saves,
one ftworker per simulated node serves its node's committed copies over TCP, and
`ftworker pull` — a peer — fetches them with the job's secret. Real processes and a real
redis-server; nothing but loopback.

  --case pull   dp=2 on two nodes, one rank each, FT_CKPT_EVERY=10, 10 steps: each rank saves
                step 10 and exits. node0's worker (FT_LISTEN=127.0.0.1) publishes its endpoint
                and listens on 127.0.0.1 only; `ftworker pull --from node0` gets rank 0's arena
                copy and its local-tier copy, every chunk verified, bytes equal to the copy the
                worker persisted; a wrong secret gets nothing and the worker logs the refusal;
                another node's rank and a step never saved are refused; a new secret in Redis
                is taken up on the same port; a clean stop removes the endpoint; the worker restarted after its rank exited serves the arena again.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import check, fail  # noqa: E402
from ckpt_e2e_test import CkptCluster, SMALL, wait_job_exit  # noqa: E402

STEP = 10


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--case", required=True)
    return p.parse_args()


def endpoint(c, node):
    value = c.db.command("HGET", c.key("endpoints"), node)
    return json.loads(value) if value else None


def listeners(port):
    """Local addresses (hex, as /proc/net/tcp{,6} write them) listening on `port`."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:  # TCP_LISTEN
                out.append(address)
    return out


def pull(c, region, out, node="node0", secret_file=None):
    cmd = [c.paths.ftworker, "pull", "--job", c.job, "--redis", c.redis_url(), "--from", node,
           "--region", region, "--out", out]
    if secret_file:
        cmd += ["--secret-file", secret_file]
    return subprocess.run(cmd, env=c.base_env(), capture_output=True, text=True, timeout=60)


def tier_data(c, node, step, rank):
    path = os.path.join(c.local_dir(node), c.job, "step-%012d" % step, "rank-%06d.data" % rank)
    with open(path, "rb") as f:
        return f.read()


def case_pull(args):
    with CkptCluster(args, job="serve", nodes=2, ranks_per_node=1) as c:
        scratch = tempfile.mkdtemp(prefix="ft-serve-e2e-", dir=c.root)
        secret = os.urandom(32).hex()
        c.db.command("SET", c.key("transfer:secret"), secret)  # what ftmaster does for a job
        listen = {"FT_LISTEN": "127.0.0.1"}
        c.start_ckpt_workers(listen)
        # Steps long enough for the workers to see the ranks (their arenas are served as this
        # node's once a rank was seen here or recorded here in Redis).
        c.start_ckpt_job(["--dp", "2"] + SMALL + ["--steps", str(STEP), "--compute-ms", "100"],
                         env={"FT_CKPT_EVERY": str(STEP)})
        rc = wait_job_exit(c, 90, "the job to finish")
        check(rc == 0, "the job exited %d" % rc)

        def persisted():
            copies = c.copies(STEP)
            ok = all("arena" in copies.get(r, {}).get("tiers", []) and "local" in copies[r]["tiers"] for r in (0, 1))
            return copies if ok else None
        copies = c.wait_for(persisted, 30, "step %d of both ranks in their arenas and local tiers" % STEP)
        e = c.wait_for(lambda: endpoint(c, "node0"), 30, "node0's transfer endpoint")
        print("endpoint of node0: %s" % e)
        check(e["address"] == "127.0.0.1" and "tcp" in e["transports"], "endpoint %s" % e)
        bound = listeners(e["port"])
        check(bound == ["0100007F"], "port %d listens on %s, expected 127.0.0.1 only" % (e["port"], bound))
        check(secret not in c.worker_log("node0"), "the worker logged the secret")
        # Verbs where the node has an RDMA device (named first), TCP alone otherwise — said once.
        log = c.worker_log("node0")
        with_verbs = "peers pull this node's copies over RDMA READ" in log
        check(with_verbs or "no RDMA verbs (" in log, "the worker does not say how it serves")
        check((e["transports"][0] == "verbs") == with_verbs, "endpoint transports %s" % e["transports"])
        check("serving this node's checkpoint copies to peers on 127.0.0.1:%d" % e["port"] in log,
              "the worker does not log where it serves")

        want = tier_data(c, "node0", STEP, 0)
        size = copies[0]["bytes"]
        for region in ("arena/%d/0" % STEP, "local/%d/0" % STEP):
            out = os.path.join(scratch, region.replace("/", "_"))
            r = pull(c, region, out)
            print("$ ftworker pull --from node0 --region %s\n%s%s" % (region, r.stdout, r.stderr), end="")
            check(r.returncode == 0, "pulling %s exited %d" % (region, r.returncode))
            with open(out, "rb") as f:
                got = f.read()
            check(len(got) == size, "%s: %d bytes, the copy has %d" % (region, len(got), size))
            check(got == want[:size], "%s: the bytes differ from node0's persisted copy" % region)
            check(os.path.getsize(out + ".manifest") > 0, "%s: no manifest written" % region)

        # A peer without the job's secret gets nothing, and the worker says so.
        wrong = os.path.join(scratch, "wrong-secret")
        with open(wrong, "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        out = os.path.join(scratch, "refused")
        r = pull(c, "arena/%d/0" % STEP, out, secret_file=wrong)
        print("$ ftworker pull --secret-file <wrong> ...\n%s%s" % (r.stdout, r.stderr), end="")
        check(r.returncode != 0, "a wrong secret pulled the copy")
        check(not os.path.exists(out), "a refused pull wrote a file")
        c.wait_for(lambda: "refused transfer peer" in c.worker_log("node0"), 10,
                   "node0's worker logging the refused peer")

        # What node0 does not hold: node1's rank, a step never saved, a malformed name.
        for region in ("arena/%d/1" % STEP, "arena/%d/0" % (STEP - 1), "local/%d/1" % STEP):
            r = pull(c, region, out)
            check(r.returncode == 1 and not os.path.exists(out),
                  "pulling %s from node0 exited %d: %s%s" % (region, r.returncode, r.stdout, r.stderr))
        r = pull(c, "arena/%d/0/../1" % STEP, out)
        check(r.returncode == 2, "a malformed region name exited %d" % r.returncode)

        # Redis lost the secret and the master made a new one: the worker serves with it, on the
        # same port, within a few seconds.
        c.db.command("SET", c.key("transfer:secret"), os.urandom(32).hex())
        out = os.path.join(scratch, "new-secret")

        def pulled_with_new_secret():
            return pull(c, "arena/%d/0" % STEP, out).returncode == 0
        c.wait_for(pulled_with_new_secret, 20, "a pull with the job's new secret", poll=0.5)
        check(endpoint(c, "node0")["port"] == e["port"], "the port changed with the secret")
        check("changed: restarting the transfer server" in c.worker_log("node0"), "the restart is not logged")

        # A clean stop removes the endpoint; a worker started after its rank exited serves the
        # arena again (Redis records the rank on node0).
        check(c.stop_worker("node0") == 0, "node0's worker did not stop cleanly")
        check(endpoint(c, "node0") is None, "the endpoint outlived a clean stop")
        c.start_worker("node0", {**c.ckpt_env(listen), "FT_CKPT_DIR": c.local_dir("node0"),
                                 "FT_CKPT_REMOTE_DIR": c.remote_dir})
        c.wait_for(lambda: endpoint(c, "node0"), 30, "the restarted worker's endpoint")
        out = os.path.join(scratch, "after-restart")

        def pulled():
            return pull(c, "arena/%d/0" % STEP, out).returncode == 0
        c.wait_for(pulled, 20, "rank 0's arena from the restarted worker", poll=0.5)
        with open(out, "rb") as f:
            check(f.read() == want[:size], "the restarted worker served other bytes")
        check("Redis records 1 rank(s) on this node (0)" in c.worker_log("node0"),
              "the restarted worker does not say it serves the rank Redis records on its node")
        print("OK: arena and local copies pulled and equal to the persisted copy; wrong secret refused "
              "(logged); foreign, unknown and malformed regions refused; bound to 127.0.0.1 only; "
              "endpoint removed at stop; a restarted worker serves the exited rank's arena")


def main():
    args = parse_args()
    cases = {"pull": case_pull}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
