#!/usr/bin/env python3
"""The fault demo (`make demo`): an 8-rank trainsim job (dp=2, tp=2, pp=2) on two simulated
nodes of four ranks, on the CPU stand-ins for the CUDA runtime and NCCL, protected by ft:
libft.so in every rank, one ftworker per node, ftmaster with its embedded Redis (loopback, a
random port and password, handed to the workers through a 0600 env file). trainsim registers
its parameters with ft. A kernel of rank 5 hangs at step 40 of 80. ftmaster names the rank and
its node, decides save-then-stop (every shard has a healthy replica), the seven healthy ranks
save their state just in time into their host arenas, the master checks that the replicas of
each shard hold identical bytes, publishes the restore plan, stops the job and evicts the node.
The demo then relaunches the 8 ranks on the same nodes: every rank restores the saved step
(rank 5 from its data-parallel peer rank 7's arena on node1), training runs to step 80, and
every rank's final checksum must equal trainsim_reference's. Ends with one line:

  RESULT demo detect_s=<first healthy rank blocked -> incident written>
              save_s=<save command -> last save acknowledged> restore_s=<slowest rank's restore>
              resumed_step=<step> ok=<0|1>

Every program is the real one; the demo reads what happened with `ftmaster incidents/
checkpoints/status/evicted`, as an operator would. Its logs stay in a temporary directory it
names, with the local and remote checkpoint tiers when the demo failed (removed when it
succeeded); the arenas are in a private directory under /dev/shm, removed at the end.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from redis_fixture import RespClient  # noqa: E402  (RESP2 client, Python standard library only)
HUNG_RANK = 5
DP_PEER = 7  # rank 5's data-parallel replica (tp-dp-pp order), also on node1
HANG_STEP = 40
STEPS = 80
MODEL = ["--dp", "2", "--tp", "2", "--pp", "2"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build", help="the CMake build directory")
    p.add_argument("--compute-ms", type=int, default=100, help="compute per training step")
    return p.parse_args()


class Demo:
    def __init__(self, build):
        b = os.path.join(ROOT, build)
        self.ftmaster = os.path.join(b, "ftmaster", "ftmaster")
        self.ftworker = os.path.join(b, "ftworker", "ftworker")
        self.libft = os.path.join(b, "preload", "libft.so")
        self.trainsim = os.path.join(b, "tests", "workloads", "trainsim", "trainsim")
        self.reference = os.path.join(b, "tests", "workloads", "trainsim", "trainsim_reference")
        self.launch = os.path.join(ROOT, "tests", "workloads", "trainsim", "launch.py")
        for path in (self.ftmaster, self.ftworker, self.libft, self.trainsim, self.reference):
            if not os.path.exists(path):
                sys.exit("demo: %s is missing; run `make build` first" % path)
        self.dir = tempfile.mkdtemp(prefix="ft-demo-")
        # The host arenas: shared memory, like the default /dev/shm, but a directory of our own.
        self.arena_dir = tempfile.mkdtemp(prefix="ft-demo-arenas-", dir="/dev/shm")
        self.job = "demo-%d" % os.getpid()
        self.env_file = os.path.join(self.dir, "redis.env")
        self.env = dict(os.environ)
        self.env["FT_JOB"] = self.job
        self.env["FT_CKPT_ARENA_DIR"] = self.arena_dir
        self.env["LD_LIBRARY_PATH"] = os.path.join(b, "gpusim") + (
            ":" + self.env["LD_LIBRARY_PATH"] if self.env.get("LD_LIBRARY_PATH") else "")
        self.env["GPUSIM_KERNEL_LIBS"] = os.path.join(b, "tests", "workloads", "trainsim",
                                                      "libtrainsim_kernels.so")
        self.procs = []

    def log(self, name):
        return open(os.path.join(self.dir, name + ".log"), "w")

    def start(self, name, cmd, env):
        p = subprocess.Popen(cmd, env=env, stdout=self.log(name), stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def start_job(self, name, flags):
        return self.start(name, [sys.executable, self.launch, "--nodes", "2", "--ranks-per-node", "4",
                                 "--keep-going", "--timeout", "300", "--", self.trainsim] + MODEL + flags,
                          dict(self.env, LD_PRELOAD=self.libft))

    def job_log(self, name):
        with open(os.path.join(self.dir, name + ".log"), errors="replace") as f:
            return f.read()

    def master_cli(self, *args):
        out = subprocess.run([self.ftmaster] + list(args) + ["--job", self.job, "--redis-env", self.env_file],
                             env=self.env, capture_output=True, text=True, timeout=20)
        return out.stdout

    def redis_env(self):
        """FT_REDIS and FT_REDIS_PASSWORD from the master's env file (a worker would `. FILE`)."""
        values = {}
        with open(self.env_file) as f:
            for line in f:
                key, _, value = line.strip().removeprefix("export ").partition("=")
                if key.startswith("FT_REDIS"):
                    values[key] = value.strip("'\"")
        return values

    def redis(self):
        values = self.redis_env()
        host, port = values["FT_REDIS"].removeprefix("redis://").split(":")
        return RespClient(host, int(port), password=values.get("FT_REDIS_PASSWORD"))

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.arena_dir, ignore_errors=True)


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError("no %s within %.0f s" % (what, timeout))


def stream(db, key):
    return [(entry_id, dict(zip(f[0::2], f[1::2]))) for entry_id, f in db.command("XRANGE", key, "-", "+") or []]


def save_seconds(db, job):
    """From the master's first save command (its stream id is Redis's clock) to the last
    acknowledgement of a save (the worker's clock; one host here)."""
    sent, ids = None, set()
    for node in db.command("SMEMBERS", "ft:{%s}:workers" % job) or []:
        for entry_id, f in stream(db, "ft:{%s}:cmd:%s" % (job, node)):
            if f.get("kind") == "save":
                ids.add(json.loads(f["json"])["id"])
                ms = int(entry_id.split("-")[0])
                sent = ms if sent is None else min(sent, ms)
    acked = [json.loads(f["json"])["unix_ms"] for _, f in stream(db, "ft:{%s}:acks" % job) if f.get("id") in ids]
    if sent is None or not acked:
        return -1.0
    return (max(acked) - sent) / 1000.0


def restore_seconds(log, rank):
    """The seconds libft.so's restore line of `rank` reports ("restored step 40 from arena of
    rank 7 (... bytes) in 0.012 s"), or None."""
    for line in log.splitlines():
        if line.startswith("[rank %d] " % rank) and "restored" in line and "ft[" in line:
            m = re.search(r"\bin (\d+(?:\.\d+)?) s\b", line)
            if m:
                return float(m.group(1))
    return None


def checksum_lines(text):
    """{rank: checksum line} of trainsim's (or the reference's) output."""
    return {int(m.group(2)): m.group(1) for m in
            re.finditer(r"^(?:\[rank \d+\] )?(trainsim rank=(\d+) dp=.*checksum=[0-9a-f]+)$", text, re.M)}


def main():
    args = parse_args()
    d = Demo(args.build)
    ok = 0
    detect_s = save_s = restore_s = -1.0
    resumed = -1
    print("demo: job %s, 8 ranks (dp=2 tp=2 pp=2) on 2 simulated nodes, %d ms compute per step, "
          "%d steps; rank %d's kernel hangs at step %d" % (d.job, args.compute_ms, STEPS, HUNG_RANK, HANG_STEP),
          flush=True)
    try:
        master = d.start("ftmaster", [d.ftmaster, "run", "--job", d.job, "--topology", "dp=2,tp=2,pp=2",
                                      "--order", "tp-dp-pp", "--redis-env", d.env_file], d.env)
        wait_for(lambda: os.path.exists(d.env_file) or master.poll() is not None, 15, "embedded Redis")
        if master.poll() is not None:
            raise RuntimeError("ftmaster exited with %d; see %s/ftmaster.log" % (master.returncode, d.dir))
        for node in ("node0", "node1"):
            worker_env = dict(d.env, **d.redis_env(), FT_CKPT_DIR=os.path.join(d.dir, "local-" + node),
                              FT_CKPT_REMOTE_DIR=os.path.join(d.dir, "remote"))
            d.start("ftworker-" + node, [d.ftworker, "--job", d.job, "--node", node], worker_env)
        flags = ["--steps", str(STEPS), "--compute-ms", str(args.compute_ms)]
        job = d.start_job("job-run1", flags + ["--fault", "hang-kernel", "--fault-rank", str(HUNG_RANK),
                                               "--fault-step", str(HANG_STEP)])

        def incident():
            for line in d.master_cli("incidents", "--json").splitlines():
                inc = json.loads(line)
                if inc["kind"] in ("hang", "crash", "transport-hang"):
                    return inc
            return None
        inc = wait_for(incident, 120, "incident")
        suspect = inc["suspects"][0]["rank"] if inc["suspects"] else -1
        wait_for(lambda: job.poll() is not None, 60, "the job stopped by ftmaster")
        db = d.redis()
        # How fast: from the moment the first healthy rank blocked on the hung one (a timeout
        # event's time minus the age of the op it waits in) to the incident being decided.
        timeouts = [json.loads(f["json"]) for _, f in stream(db, "ft:{%s}:events" % d.job)]
        blocked_ms = min(e["unix_ms"] - e["age_ms"] for e in timeouts if e["kind"] == "timeout")
        detect_s = (inc["decided_unix_ms"] - blocked_ms) / 1000.0
        save_s = save_seconds(db, d.job)

        def plan_step():
            value = db.command("GET", "ft:{%s}:restore" % d.job)
            step = json.loads(value)["step"] if value else -1
            files = [os.path.join(d.arena_dir, "ft-plan.%s.%s" % (d.job, n)) for n in ("node0", "node1")]
            written = all(os.path.exists(f) and ("\nstep %d\n" % step) in open(f).read() for f in files)
            return step if step >= 0 and written else None
        planned = wait_for(plan_step, 30, "restore plan on both nodes")
        print("\n$ ftmaster incidents\n" + d.master_cli("incidents"), end="")
        print("\n$ ftmaster checkpoints\n" + d.master_cli("checkpoints"), end="")
        print("\n$ ftmaster status\n" + d.master_cli("status"), end="")
        evicted = d.master_cli("evicted", "--json").strip()
        print("\n$ ftmaster evicted\n" + d.master_cli("evicted"), end="")
        print("\ndemo: incident %s: %s, suspect rank %d on %s, decision %s; decided %.2f s after the "
              "first healthy rank blocked (collection window and attribution %.0f ms); the healthy "
              "ranks saved step %d in %.2f s (save command to last acknowledgement)"
              % (inc["id"], inc["kind"], suspect, inc["suspects"][0]["node"] if inc["suspects"] else "?",
                 inc["decision"], detect_s, inc["decide_ms"], planned, save_s), flush=True)

        print("\ndemo: relaunching the 8 ranks on the same nodes (same workers and master)", flush=True)
        job2 = d.start_job("job-run2", flags)
        wait_for(lambda: job2.poll() is not None, 120, "the relaunched job to finish")
        log2 = d.job_log("job-run2")
        restored = dict(sorted((int(r), int(s)) for r, s in
                               re.findall(r"trainsim rank=(\d+) restored step=(\d+)", log2)))
        resumed = min(restored.values()) if restored and len(set(restored.values())) == 1 else -1
        seconds = [restore_seconds(log2, r) for r in range(8)]
        restore_s = max(s for s in seconds if s is not None) if any(s is not None for s in seconds) else -1.0
        hung_lines = [line for line in log2.splitlines()
                      if line.startswith("[rank %d] " % HUNG_RANK) and "restored" in line]
        from_peer = any(re.search(r"rank %d\b" % DP_PEER, line) and "arena" in line for line in hung_lines)
        for line in hung_lines:
            print("  " + line)
        ref = subprocess.run([d.reference] + MODEL + ["--steps", str(STEPS)], capture_output=True, text=True,
                             timeout=120)
        want, got = checksum_lines(ref.stdout), checksum_lines(log2)
        same = len(want) == 8 and all(got.get(r) == want[r] for r in want)
        print("demo: run 2 exited %d; restored steps %s; rank %d restored from rank %d's arena: %s; "
              "final checksums %s trainsim_reference's"
              % (job2.returncode, restored, HUNG_RANK, DP_PEER, "yes" if from_peer else "no",
                 "equal" if same else "DIFFER from"), flush=True)
        for r in range(8):
            print("  %-70s reference %s" % (got.get(r, "rank %d: no checksum" % r),
                                             "ok" if got.get(r) == want.get(r) else want.get(r)))
        ok = int(suspect == HUNG_RANK and inc["kind"] == "hang" and inc["decision"] == "save-then-stop"
                 and job.returncode != 0 and "node1" in evicted and planned == HANG_STEP
                 and job2.returncode == 0 and restored == {r: HANG_STEP for r in range(8)} and from_peer
                 and same)
        if not ok:
            print("demo: expected a hang naming rank %d (node1), save-then-stop, the job stopped, node1 "
                  "evicted, step %d saved and planned, every rank restoring it (rank %d from rank %d's "
                  "arena) and the reference checksums; logs in %s" % (HUNG_RANK, HANG_STEP, HUNG_RANK, DP_PEER,
                                                                     d.dir), file=sys.stderr)
    except (TimeoutError, RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        print("demo: %s; logs in %s" % (e, d.dir), file=sys.stderr)
    finally:
        d.stop_all()
    if ok:  # the copies served their purpose; the logs stay
        for name in os.listdir(d.dir):
            if name == "remote" or name.startswith("local-"):
                shutil.rmtree(os.path.join(d.dir, name), ignore_errors=True)
    print("demo: logs in %s" % d.dir)
    print("RESULT demo detect_s=%.2f save_s=%.2f restore_s=%.3f resumed_step=%d ok=%d"
          % (detect_s, save_s, restore_s, resumed, ok))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
