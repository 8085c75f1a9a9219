#!/usr/bin/env python3
"""The fault demo (`make demo`): an 8-rank trainsim job (dp=2, tp=4) on two simulated nodes of
four ranks, on the CPU stand-ins for the CUDA runtime and NCCL, protected by ft: libft.so in
every rank, one ftworker per node, ftmaster with its embedded Redis (loopback, a random port and
password, handed to the workers through a 0600 env file). Each simulated node has its own
namespace, as a host would: its host arenas (a directory under /dev/shm) and its local disk
tier; the remote tier is one shared directory. trainsim registers its parameters with ft; in
tp-dp-pp order rank r and rank r+4 hold one shard, so every shard has a replica on each node.

A kernel of rank 5 (node1) hangs at step 40 of 80. ftmaster names the rank and its node,
decides save-then-stop, the seven healthy ranks save their state just in time into their host
arenas, the master checks that the replicas of each shard hold identical bytes, publishes the
restore plan, stops the job and evicts node1. node1 is then gone: its worker stopped, its
memory and disk wiped. A replacement, node2, starts empty: its worker (FT_NODE_RANKS=4-7)
pulls ranks 4-7's shards from node0's arenas over TCP while the relaunched job (nodes node0,
node2) initialises; every rank restores step 40 (ranks 4-7 from the prefetched copies), trains
to step 80, and every final checksum must equal trainsim_reference's (an uninterrupted run).
Ends with one line:

  RESULT demo detect_s=<first healthy rank blocked -> incident written>
              save_s=<save command -> last save acknowledged>
              pull_s=<node2's prefetch of ranks 4-7>  restore_s=<slowest rank's restore>
              fault_to_resume_s=<hang injected -> first step after the restore completed,
                                  the relaunch included>
              ettr=<the job's productive share of its GPU time, `ftmaster goodput`>  ok=<0|1>

ok=1 only when every step above happened as described, the checksums match and
fault_to_resume_s <= 30. Every program is the real one; the demo reads what happened with
`ftmaster incidents/checkpoints/status/evicted` and ft:{J}:prefetch, as an operator would. Its
logs stay in a temporary directory it names, with the local and remote checkpoint tiers when
the demo failed (removed when it succeeded); the arenas are under /dev/shm, removed at the end.
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
MOVED = [4, 5, 6, 7]  # node1's ranks: node2's after the relaunch; rank r's replica is r-4 on node0
HANG_STEP = 40
STEPS = 80
MODEL = ["--dp", "2", "--tp", "4"]
BUDGET_S = 30.0  # hang injected -> training resumed, the relaunch included


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build", help="the CMake build directory")
    p.add_argument("--compute-ms", type=int, default=100, help="compute per training step")
    p.add_argument("--screenshot", metavar="PNG", help="once the job finished, a screenshot of ftmaster's live "
                   "page (headless Chromium) into PNG (docs/img/live-page.png is one)")
    return p.parse_args()


def page_screenshot(master_log, png):
    """ftmaster's live page (the address its log names) as Chromium renders it, into `png`."""
    with open(master_log) as f:
        m = re.search(r"page: serving (http://\S+/)", f.read())
    if not m:
        raise RuntimeError("ftmaster's log names no page address")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise RuntimeError("no chromium on PATH (scripts/install-deps.sh installs Debian's)")
    profile = tempfile.mkdtemp(prefix="ft-demo-chromium-")
    try:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--no-first-run", "--hide-scrollbars", "--user-data-dir=" + profile, "--window-size=1280,1500",
                        "--screenshot=" + os.path.abspath(png), m.group(1)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=True)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    print("demo: the live page %s as a screenshot: %s" % (m.group(1), png), flush=True)


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
        # The nodes' host memory: shared memory, like the default /dev/shm, one directory per
        # simulated node (its namespace) under one of our own.
        self.arena_root = tempfile.mkdtemp(prefix="ft-demo-arenas-", dir="/dev/shm")
        self.remote_dir = os.path.join(self.dir, "remote")
        self.job = "demo-%d" % os.getpid()
        self.env_file = os.path.join(self.dir, "redis.env")
        self.env = dict(os.environ)
        self.env["FT_JOB"] = self.job
        # The simulated nodes share this host: their workers serve each other on loopback only.
        self.env["FT_LISTEN"] = "127.0.0.1"
        # and each daemon's /metrics on a free loopback port (two workers on one host).
        self.env.setdefault("FT_METRICS_LISTEN", "127.0.0.1:0")
        for key in ("FT_CKPT_ARENA_DIR", "FT_CKPT_DIR"):  # per node, set below
            self.env.pop(key, None)
        self.env["LD_LIBRARY_PATH"] = os.path.join(b, "gpusim") + (
            ":" + self.env["LD_LIBRARY_PATH"] if self.env.get("LD_LIBRARY_PATH") else "")
        self.env["GPUSIM_KERNEL_LIBS"] = os.path.join(b, "tests", "workloads", "trainsim",
                                                      "libtrainsim_kernels.so")
        self.procs = []
        self.workers = {}

    def arena_dir(self, node):
        path = os.path.join(self.arena_root, node)
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    def local_dir(self, node):
        return os.path.join(self.dir, "local-" + node)

    def log(self, name):
        return open(os.path.join(self.dir, name + ".log"), "w")

    def start(self, name, cmd, env):
        p = subprocess.Popen(cmd, env=env, stdout=self.log(name), stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def start_worker(self, node, extra=None):
        env = dict(self.env, **self.redis_env(), FT_CKPT_ARENA_DIR=self.arena_dir(node),
                   FT_CKPT_DIR=self.local_dir(node), FT_CKPT_REMOTE_DIR=self.remote_dir, **(extra or {}))
        self.workers[node] = self.start("ftworker-" + node, [self.ftworker, "--job", self.job, "--node", node], env)

    def drop_node(self, node):
        """The node is gone: its worker stopped, its memory and its disk wiped."""
        p = self.workers.pop(node)
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        shutil.rmtree(os.path.join(self.arena_root, node), ignore_errors=True)
        shutil.rmtree(self.local_dir(node), ignore_errors=True)

    def start_job(self, name, nodes, flags):
        for node in nodes:
            self.arena_dir(node)
        return self.start(name, [sys.executable, self.launch, "--nodes", "2", "--ranks-per-node", "4",
                                 "--node-names", ",".join(nodes),
                                 "--node-env", "FT_CKPT_ARENA_DIR=" + os.path.join(self.arena_root, "{node}"),
                                 "--node-env", "FT_CKPT_DIR=" + os.path.join(self.dir, "local-{node}"),
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
        shutil.rmtree(self.arena_root, ignore_errors=True)


def wait_for(predicate, timeout, what, poll=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
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


def restore_line(log, rank):
    """libft.so's restore line of `rank` ("restored step 40 from prefetched copy (... bytes) in
    0.012 s"), or None."""
    for line in log.splitlines():
        if line.startswith("[rank %d] " % rank) and "restored step" in line and "ft[" in line:
            return line
    return None


def restore_seconds(line):
    m = re.search(r"\bin (\d+(?:\.\d+)?) s\b", line or "")
    return float(m.group(1)) if m else None


def checksum_lines(text):
    """{rank: checksum line} of trainsim's (or the reference's) output."""
    return {int(m.group(2)): m.group(1) for m in
            re.finditer(r"^(?:\[rank \d+\] )?(trainsim rank=(\d+) dp=.*checksum=[0-9a-f]+)$", text, re.M)}


def prefetch_report(db, job, node):
    value = db.command("HGET", "ft:{%s}:prefetch" % job, node)
    return json.loads(value) if value else None


def main():
    args = parse_args()
    d = Demo(args.build)
    ok = 0
    detect_s = save_s = pull_s = restore_s = fault_to_resume_s = ettr = -1.0
    print("demo: job %s, 8 ranks (dp=2 tp=4) on 2 simulated nodes, %d ms compute per step, %d steps; "
          "rank %d's kernel (node1) hangs at step %d" % (d.job, args.compute_ms, STEPS, HUNG_RANK, HANG_STEP),
          flush=True)
    try:
        master = d.start("ftmaster", [d.ftmaster, "run", "--job", d.job, "--topology", "dp=2,tp=4,pp=1",
                                      "--order", "tp-dp-pp", "--redis-env", d.env_file], d.env)
        wait_for(lambda: os.path.exists(d.env_file) or master.poll() is not None, 15, "embedded Redis")
        if master.poll() is not None:
            raise RuntimeError("ftmaster exited with %d; see %s/ftmaster.log" % (master.returncode, d.dir))
        for node in ("node0", "node1"):
            d.start_worker(node)
        flags = ["--steps", str(STEPS), "--compute-ms", str(args.compute_ms)]
        job = d.start_job("job-run1", ["node0", "node1"],
                          flags + ["--fault", "hang-kernel", "--fault-rank", str(HUNG_RANK),
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
        fault = re.search(r"\[rank %d\] trainsim rank=%d: injecting fault \S+ at step %d unix_ms=(\d+)"
                          % (HUNG_RANK, HUNG_RANK, HANG_STEP), d.job_log("job-run1"))
        if not fault:
            raise RuntimeError("rank %d's log does not say when its fault was injected" % HUNG_RANK)
        fault_ms = int(fault.group(1))

        def plan_step():
            # The plan names the saved step with node0's arenas for ranks 4-7 (what node2 pulls),
            # and node0's worker has handed it to its ranks.
            value = db.command("GET", "ft:{%s}:restore" % d.job)
            plan = json.loads(value) if value else {}
            step = plan.get("step", -1)
            node0 = {r["rank"] for r in plan.get("ranks", [])
                     if any(s["node"] == "node0" and "arena" in s["tiers"] for s in r["sources"])}
            f = os.path.join(d.arena_dir("node0"), "ft-plan.%s.node0" % d.job)
            written = os.path.exists(f) and ("\nstep %d\n" % step) in open(f).read()
            return step if step >= 0 and set(range(8)) <= node0 and written else None
        planned = wait_for(plan_step, 30, "a restore plan with node0's arenas for every shard")
        evicted = wait_for(lambda: db.command("SMEMBERS", "ft:{%s}:evicted" % d.job), 30, "an evicted node")
        print("\n$ ftmaster incidents\n" + d.master_cli("incidents"), end="")
        print("\n$ ftmaster checkpoints\n" + d.master_cli("checkpoints"), end="")
        print("\n$ ftmaster evicted\n" + d.master_cli("evicted"), end="")
        print("\ndemo: incident %s: %s, suspect rank %d on %s, decision %s; decided %.2f s after the "
              "first healthy rank blocked (collection window and attribution %.0f ms); the healthy "
              "ranks saved step %d in %.2f s (save command to last acknowledgement); evicted %s"
              % (inc["id"], inc["kind"], suspect, inc["suspects"][0]["node"] if inc["suspects"] else "?",
                 inc["decision"], detect_s, inc["decide_ms"], planned, save_s, sorted(evicted)), flush=True)

        # The scheduler's part: node1 leaves with everything on it; node2 takes its place.
        d.drop_node("node1")
        print("\ndemo: node1 is gone (worker stopped, memory and disk wiped); node2 starts empty: its "
              "worker pulls ranks 4-7's shards while the job is relaunched on node0,node2", flush=True)
        d.start_worker("node2", {"FT_NODE_RANKS": "4-7"})
        job2 = d.start_job("job-run2", ["node0", "node2"], flags)
        wait_for(lambda: job2.poll() is not None, 120, "the relaunched job to finish")
        log2 = d.job_log("job-run2")
        restored = dict(sorted((int(r), int(s)) for r, s in
                               re.findall(r"trainsim rank=(\d+) restored step=(\d+)", log2)))
        resumed = [int(ms) for ms in re.findall(r"trainsim rank=\d+ resumed step=%d unix_ms=(\d+)" % (HANG_STEP + 1),
                                                log2)]
        if len(resumed) == 8:  # the job resumed when its last rank completed its first step
            fault_to_resume_s = (max(resumed) - fault_ms) / 1000.0
        lines = {r: restore_line(log2, r) for r in range(8)}
        seconds = [restore_seconds(line) for line in lines.values() if restore_seconds(line) is not None]
        restore_s = max(seconds) if seconds else -1.0
        from_prefetch = all(lines[r] and "prefetched" in lines[r] for r in MOVED)
        report = prefetch_report(db, d.job, "node2") or {}
        pulled = {x["rank"]: x for x in report.get("ranks", [])}
        pull_s = float(report.get("pull_s", -1.0)) if report.get("state") == "done" else -1.0
        over_tcp = sorted(pulled) == MOVED and all(
            x["outcome"] == "pulled" and x["ok"] and x["bytes"] > 0 and x["source"] == "node0" and x["transport"] == "tcp"
            for x in pulled.values())
        print("\n$ redis-cli HGET ft:{%s}:prefetch node2\n%s" % (d.job, json.dumps(report)))
        for r in MOVED:
            x = pulled.get(r, {})
            print("  rank %d: %s %s bytes from %s rank %s over %s in %s s; %s" % (
                r, x.get("outcome", "?"), x.get("bytes", "?"), x.get("source", "?"), x.get("source_rank", "?"),
                x.get("transport", "?"), x.get("seconds", "?"),
                (lines[r] or "no restore line").split("] ", 1)[-1].split(": ", 1)[-1]))
        ref = subprocess.run([d.reference] + MODEL + ["--steps", str(STEPS)], capture_output=True, text=True,
                             timeout=120)
        want, got = checksum_lines(ref.stdout), checksum_lines(log2)
        same = len(want) == 8 and all(got.get(r) == want[r] for r in want)
        print("demo: run 2 exited %d; restored steps %s; ranks 4-7 pulled from node0 over tcp: %s, restored "
              "from the prefetched copies: %s; final checksums %s trainsim_reference's"
              % (job2.returncode, restored, "yes" if over_tcp else "no", "yes" if from_prefetch else "no",
                 "equal" if same else "DIFFER from"), flush=True)
        for r in range(8):
            print("  %-70s reference %s" % (got.get(r, "rank %d: no checksum" % r),
                                             "ok" if got.get(r) == want.get(r) else want.get(r)))
        print("demo: hang injected -> training resumed on node0,node2: %.2f s (budget %.0f s)"
              % (fault_to_resume_s, BUDGET_S))
        # Where the job's GPU time went (docs/goodput.md): the ledger once the job has finished.
        def ledger():
            g = json.loads(d.master_cli("goodput", "--json"))
            return g if g.get("ettr") is not None and g.get("phase") == "productive" else None
        try:
            g = wait_for(ledger, 10, "the goodput ledger")
            ettr = g["ettr"]
            print("\n$ ftmaster goodput\n" + d.master_cli("goodput"), end="")
        except (TimeoutError, RuntimeError, ValueError) as e:
            print("demo: no goodput ledger: %s" % e, flush=True)
        if args.screenshot:
            try:
                time.sleep(2.5)  # the page's reader: a read a second, the ranks' every few
                page_screenshot(os.path.join(d.dir, "ftmaster.log"), args.screenshot)
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                print("demo: no screenshot: %s" % e, flush=True)
        loop = (suspect == HUNG_RANK and inc["kind"] == "hang" and inc["decision"] == "save-then-stop"
                and job.returncode != 0 and sorted(evicted) == ["node1"] and planned == HANG_STEP
                and job2.returncode == 0 and restored == {r: HANG_STEP for r in range(8)}
                and over_tcp and from_prefetch)
        ok = int(loop and same and 0 <= fault_to_resume_s <= BUDGET_S)
        if not ok:
            print("demo: expected a hang naming rank %d (node1), save-then-stop, the job stopped, node1 "
                  "evicted, step %d saved and planned, node2 pulling ranks 4-7 from node0 over tcp, every "
                  "rank restoring step %d (4-7 from the prefetched copies), the reference checksums and "
                  "fault_to_resume_s <= %.0f; logs in %s" % (HUNG_RANK, HANG_STEP, HANG_STEP, BUDGET_S, d.dir),
                  file=sys.stderr)
    except (TimeoutError, RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        print("demo: %s; logs in %s" % (e, d.dir), file=sys.stderr)
    finally:
        d.stop_all()
    if ok:  # the copies served their purpose; the logs stay
        for name in os.listdir(d.dir):
            if name == "remote" or name.startswith("local-"):
                shutil.rmtree(os.path.join(d.dir, name), ignore_errors=True)
    print("demo: logs in %s" % d.dir)
    print("RESULT demo detect_s=%.2f save_s=%.2f pull_s=%.3f restore_s=%.3f fault_to_resume_s=%.2f ettr=%.3f ok=%d"
          % (detect_s, save_s, pull_s, restore_s, fault_to_resume_s, ettr, ok))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
