"""A simulated ft cluster on one host, for end-to-end tests: a real redis-server on loopback,
one ftworker per simulated node, an ftmaster when asked, and a trainsim job started by
launch.py under LD_PRELOAD=libft.so. Python 3 standard library only.

    with Cluster(paths, job="hang", nodes=2, ranks_per_node=4) as c:
        c.start_workers(env={"FT_TIMEOUT_WARMUP": "1s"})
        c.start_job(["--dp", "2", "--tp", "2", "--pp", "2", "--fault", "hang-kernel", ...])
        ev = c.wait_for(lambda: c.events(kind="timeout"), timeout=30, what="a timeout event")
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from redis_fixture import RedisServer  # noqa: E402


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Cluster:
    def __init__(self, paths, job, nodes=2, ranks_per_node=4, log_dir=None):
        """paths: an object with attributes launch, trainsim, libft, ftworker (and ftmaster)."""
        self.paths = paths
        # The job name names the ranks' segments (/dev/shm/ft.<job>.*), which every ftworker of
        # that job on the host adopts, and the logs in /tmp: two runs of one case at once (two
        # checkouts on one machine) would watch, and stop, each other's ranks. One per run.
        self.job = "%s-%d" % (job, os.getpid())
        self.nodes = nodes
        self.ranks_per_node = ranks_per_node
        self.redis = RedisServer()
        self.workers = {}
        self.master = None
        self.job_proc = None
        self.job_out = None
        self.t_job_start = None
        self.log_dir = log_dir or os.environ.get("FT_TEST_LOG_DIR") or "/tmp"
        self.worker_logs = {}
        # trainsim registers its state under libft.so, so every rank has a checkpoint arena
        # (and every worker a restore plan file): a private directory in shared memory per
        # run, like the default /dev/shm, removed at the end — nothing left in /dev/shm.
        self.arena_dir = tempfile.mkdtemp(prefix="ft-e2e-arenas-", dir="/dev/shm")

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self):
        self.redis.start()
        self.db = self.redis.client()
        return self

    def __exit__(self, exc_type, exc, tb):
        failed = exc_type is not None and not (exc_type is SystemExit and exc.code in (0, None))
        if failed:
            self.show_logs()
        self.stop_job()
        for node in list(self.workers):
            self.stop_worker(node)
        for proc in getattr(self, "masters", {}).values():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.redis.stop()
        self.cleanup_segments()
        shutil.rmtree(self.arena_dir, ignore_errors=True)
        if not failed:  # a failed run's logs stay for a closer look
            for path in self.log_paths():
                try:
                    os.unlink(path)
                except OSError:
                    pass
        return False

    def log_paths(self):
        paths = [self.job_out.name] if self.job_out else []
        return paths + list(self.worker_logs.values()) + list(getattr(self, "master_logs", {}).values())

    def show_logs(self, lines=40):
        """The tails of the job's, the workers' and the masters' logs: a failed run says what
        they saw (the files are overwritten by the next run of the same case)."""
        logs = [("job", self.job_out.name if self.job_out else None)]
        logs += [("ftworker " + n, f) for n, f in sorted(self.worker_logs.items())]
        logs += [("ftmaster " + n, f) for n, f in sorted(getattr(self, "master_logs", {}).items())]
        for label, path in logs:
            try:
                with open(path, errors="replace") as f:
                    tail = f.readlines()[-lines:]
            except (OSError, TypeError):
                continue
            print("---- last %d lines of the %s log (%s)" % (len(tail), label, path))
            print("".join(line[:400] + ("\n" if len(line) > 400 else "") for line in tail), end="", flush=True)

    def cleanup_segments(self):
        prefix = "ft.%s." % self.job
        for name in os.listdir("/dev/shm"):
            if name.startswith(prefix):
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass

    def redis_url(self):
        return "redis://127.0.0.1:%d" % self.redis.port

    def base_env(self, extra=None):
        env = dict(os.environ)
        env["FT_REDIS_PASSWORD"] = self.redis.password
        env["FT_JOB"] = self.job
        env["FT_CKPT_ARENA_DIR"] = self.arena_dir
        if extra:
            env.update(extra)
        return env

    def start_worker(self, node, env=None):
        log = open(os.path.join(self.log_dir, "ftworker-%s-%s.log" % (self.job, node)), "w")
        self.worker_logs[node] = log.name
        cmd = [self.paths.ftworker, "--job", self.job, "--node", node, "--redis", self.redis_url()]
        self.workers[node] = subprocess.Popen(cmd, env=self.base_env(env), stdout=log,
                                              stderr=subprocess.STDOUT)
        return self.workers[node]

    def start_workers(self, env=None):
        for k in range(self.nodes):
            self.start_worker("node%d" % k, env)

    def stop_worker(self, node, sig=signal.SIGTERM):
        p = self.workers.pop(node)
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def start_master(self, args=(), env=None, name="m0"):
        log = open(os.path.join(self.log_dir, "ftmaster-%s-%s.log" % (self.job, name)), "w")
        self.master_logs = getattr(self, "master_logs", {})
        self.master_logs[name] = log.name
        cmd = [self.paths.ftmaster, "run", "--job", self.job, "--redis", self.redis_url(),
               "--id", name] + list(args)
        proc = subprocess.Popen(cmd, env=self.base_env(env), stdout=log, stderr=subprocess.STDOUT)
        self.masters = getattr(self, "masters", {})
        self.masters[name] = proc
        if self.master is None:
            self.master = proc
        return proc

    def master_log(self, name="m0"):
        with open(self.master_logs[name]) as f:
            return f.read()

    def incidents(self, kind=None):
        out = []
        for _, f in self.stream("incidents"):
            inc = json.loads(f["json"])
            if kind is None or inc["kind"] == kind:
                out.append(inc)
        return out

    def worker_log(self, node):
        with open(self.worker_logs[node]) as f:
            return f.read()

    def start_job(self, trainsim_flags, env=None, rank_env=None, timeout=120):
        """rank_env: {rank: {VAR: value}} applied to single ranks through a shell wrapper."""
        program = [self.paths.trainsim] + list(trainsim_flags)
        if rank_env:
            script = ""
            for rank, vars_ in rank_env.items():
                exports = " ".join("%s=%s" % (k, v) for k, v in vars_.items())
                script += 'if [ "$RANK" = "%d" ]; then export %s; fi; ' % (rank, exports)
            program = ["/bin/sh", "-c", script + 'exec "$0" "$@"'] + program
        cmd = [sys.executable, self.paths.launch, "--nodes", str(self.nodes), "--ranks-per-node",
               str(self.ranks_per_node), "--keep-going", "--timeout", str(timeout), "--"] + program
        job_env = self.base_env(env)
        job_env["LD_PRELOAD"] = self.paths.libft
        self.job_out = open(os.path.join(self.log_dir, "job-%s.log" % self.job), "w+")
        self.t_job_start = time.monotonic()
        self.job_proc = subprocess.Popen(cmd, env=job_env, stdout=self.job_out,
                                         stderr=subprocess.STDOUT)
        return self.job_proc

    def stop_job(self):
        if self.job_proc is not None and self.job_proc.poll() is None:
            self.job_proc.send_signal(signal.SIGTERM)
            try:
                self.job_proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.job_proc.kill()
                self.job_proc.wait()

    def job_output(self):
        self.job_out.flush()
        with open(self.job_out.name) as f:
            return f.read()

    def rank_pids(self):
        import re
        return {int(r): int(p) for r, p in
                re.findall(r"\[launch\] rank (\d+) node\d+ local \d+ pid (\d+)", self.job_output())}

    # -- reading Redis -----------------------------------------------------------------------
    def key(self, suffix):
        return "ft:{%s}:%s" % (self.job, suffix)

    def stream(self, suffix):
        """Entries of a stream as (id, {field: value}), oldest first."""
        try:
            raw = self.db.command("XRANGE", self.key(suffix), "-", "+")
        except (OSError, ConnectionError):
            return []
        out = []
        for entry_id, fields in raw or []:
            out.append((entry_id, dict(zip(fields[0::2], fields[1::2]))))
        return out

    def events(self, kind=None, rank=None):
        out = []
        for _, f in self.stream("events"):
            ev = json.loads(f["json"])
            if (kind is None or ev["kind"] == kind) and (rank is None or ev["rank"] == rank):
                out.append(ev)
        return out

    def hash_json(self, suffix, field):
        value = self.db.command("HGET", self.key(suffix), str(field))
        return json.loads(value) if value else None

    def progress(self, rank):
        return self.hash_json("progress", rank)

    def poll_until(self, predicate, timeout, poll=0.05):
        """The predicate's first truthy value within `timeout` s, else its last value: for a
        check that wants to say what it saw when the wait runs out."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = predicate()
            except (OSError, ConnectionError):
                value = None
            if value or time.monotonic() >= deadline:
                return value
            time.sleep(poll)

    def wait_for(self, predicate, timeout, what, poll=0.05):
        value = self.poll_until(predicate, timeout, poll)
        if not value:
            fail("no %s within %.0f s" % (what, timeout))
        return value

    def wait_exits(self, ranks, timeout=30):
        """Waits until the workers reported the exit of every rank in `ranks`. A worker writes
        a rank's events in order and the exit last, after draining its ring: once the exits
        are in, every event the job raised is."""
        want = set(ranks)
        return self.wait_for(lambda: want <= {e["rank"] for e in self.events(kind="exit")},
                             timeout, "exit events for ranks %s" % sorted(want))

    def master_caught_up(self):
        """The leading master has read every event written so far and has no incident window
        open: whatever it would decide from them is decided."""
        newest = self.db.command("XREVRANGE", self.key("events"), "+", "-", "COUNT", "1")
        state = self.db.command("HGETALL", self.key("master")) or []
        state = dict(zip(state[0::2], state[1::2]))
        if "open_incident" in state:
            return False
        return not newest or state.get("events_cursor") == newest[0][0]
