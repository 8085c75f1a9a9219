#!/usr/bin/env python3
"""The fault demo (`make demo`): an 8-rank trainsim job (dp=2, tp=2, pp=2) on two simulated
nodes of four ranks, on the CPU stand-ins for the CUDA runtime and NCCL, protected by ft:
libft.so in every rank, one ftworker per node, ftmaster with its embedded Redis (loopback, a
random port and password, handed to the workers through a 0600 env file). A kernel of rank 5
hangs mid-run. ftmaster names the rank and its node, decides (save-then-stop: every shard has a
healthy replica), stops the job and evicts the node. Ends with one line:

  RESULT demo detect_s=<first healthy rank blocked -> incident written> suspect_rank=<r> ok=<0|1>

Every program is the real one; the demo reads what happened with `ftmaster incidents/status/
evicted`, as an operator would.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from redis_fixture import RespClient  # noqa: E402  (RESP2 client, Python standard library only)
HUNG_RANK = 5
HANG_STEP = 40
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
        self.launch = os.path.join(ROOT, "tests", "workloads", "trainsim", "launch.py")
        for path in (self.ftmaster, self.ftworker, self.libft, self.trainsim):
            if not os.path.exists(path):
                sys.exit("demo: %s is missing; run `make build` first" % path)
        self.dir = tempfile.mkdtemp(prefix="ft-demo-")
        self.job = "demo-%d" % os.getpid()
        self.env_file = os.path.join(self.dir, "redis.env")
        self.env = dict(os.environ)
        self.env["FT_JOB"] = self.job
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

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError("no %s within %.0f s" % (what, timeout))


def main():
    args = parse_args()
    d = Demo(args.build)
    ok = 0
    detect_s = -1.0
    suspect = -1
    print("demo: job %s, 8 ranks (dp=2 tp=2 pp=2) on 2 simulated nodes, %d ms compute per step; "
          "rank %d's kernel hangs at step %d" % (d.job, args.compute_ms, HUNG_RANK, HANG_STEP), flush=True)
    try:
        master = d.start("ftmaster", [d.ftmaster, "run", "--job", d.job, "--topology", "dp=2,tp=2,pp=2",
                                      "--order", "tp-dp-pp", "--redis-env", d.env_file], d.env)
        wait_for(lambda: os.path.exists(d.env_file) or master.poll() is not None, 15, "embedded Redis")
        if master.poll() is not None:
            raise RuntimeError("ftmaster exited with %d; see %s/ftmaster.log" % (master.returncode, d.dir))
        worker_env = dict(d.env, **d.redis_env())
        for node in ("node0", "node1"):
            d.start("ftworker-" + node, [d.ftworker, "--job", d.job, "--node", node], worker_env)
        job_env = dict(d.env, LD_PRELOAD=d.libft)
        job = d.start("job", [sys.executable, d.launch, "--nodes", "2", "--ranks-per-node", "4",
                              "--keep-going", "--timeout", "300", "--", d.trainsim] + MODEL +
                      ["--steps", "100000", "--compute-ms", str(args.compute_ms), "--fault", "hang-kernel",
                       "--fault-rank", str(HUNG_RANK), "--fault-step", str(HANG_STEP)], job_env)

        def incident():
            for line in d.master_cli("incidents", "--json").splitlines():
                inc = json.loads(line)
                if inc["kind"] in ("hang", "crash", "transport-hang"):
                    return inc
            return None
        inc = wait_for(incident, 120, "incident")
        print("\n$ ftmaster incidents\n" + d.master_cli("incidents"), end="")
        suspect = inc["suspects"][0]["rank"] if inc["suspects"] else -1

        wait_for(lambda: job.poll() is not None, 60, "the job stopped by ftmaster")
        print("\n$ ftmaster status\n" + d.master_cli("status"), end="")
        evicted = d.master_cli("evicted", "--json").strip()
        print("\n$ ftmaster evicted\n" + d.master_cli("evicted"), end="")
        # How fast: from the moment the first healthy rank blocked on the hung one (a timeout
        # event's time minus the age of the op it waits in) to the incident being decided.
        redis = d.redis_env()
        host, port = redis["FT_REDIS"].removeprefix("redis://").split(":")
        db = RespClient(host, int(port), password=redis.get("FT_REDIS_PASSWORD"))
        timeouts = [json.loads(dict(zip(f[0::2], f[1::2]))["json"])
                    for _, f in db.command("XRANGE", "ft:{%s}:events" % d.job, "-", "+")]
        blocked_ms = min(e["unix_ms"] - e["age_ms"] for e in timeouts if e["kind"] == "timeout")
        detect_s = (inc["decided_unix_ms"] - blocked_ms) / 1000.0
        print("\ndemo: incident %s: %s, suspect rank %d on %s, decision %s; decided %.2f s after the "
              "first healthy rank blocked (collection window and attribution %.0f ms)"
              % (inc["id"], inc["kind"], suspect, inc["suspects"][0]["node"] if inc["suspects"] else "?",
                 inc["decision"], detect_s, inc["decide_ms"]))
        ok = int(suspect == HUNG_RANK and inc["kind"] == "hang" and inc["decision"] == "save-then-stop"
                 and job.returncode != 0 and "node1" in evicted)
        if not ok:
            print("demo: expected a hang naming rank %d (node1), save-then-stop, the job stopped and "
                  "node1 evicted; logs in %s" % (HUNG_RANK, d.dir), file=sys.stderr)
    except (TimeoutError, RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        print("demo: %s; logs in %s" % (e, d.dir), file=sys.stderr)
    finally:
        d.stop_all()
    print("RESULT demo detect_s=%.2f suspect_rank=%d ok=%d" % (detect_s, suspect, ok))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
