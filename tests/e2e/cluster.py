"""A simulated ft cluster on one host, for end-to-end tests: a real redis-server on loopback,
one ftworker per simulated node, an ftmaster when asked, and a trainsim job started by
launch.py under LD_PRELOAD=libft.so. Python 3 standard library only.

    with Cluster(paths, job="hang", nodes=2, ranks_per_node=4) as c:
        c.start_workers(env={"FT_TIMEOUT_WARMUP": "1s"})
        c.start_job(["--dp", "2", "--tp", "2", "--pp", "2", "--fault", "hang-kernel", ...])
        ev = c.wait_for(lambda: c.events(kind="timeout"), timeout=30, what="a timeout event")

Each simulated node is a namespace of its own, as separate hosts would be: the node's worker
and its ranks share a host-arena directory in shared memory (FT_CKPT_ARENA_DIR =
<arena root>/<node>: the ranks' checkpoint arenas, the worker's restore plan file, what a
worker prefetched) and, where a test gives the worker a local checkpoint tier, a local
directory (FT_CKPT_DIR = <root>/local-<node>); no node's worker or rank is told another
node's directories, and a node whose namespace was removed (drop_node) starts empty again.
The remote tier stays one shared directory, like a shared file system. The per-process
segments are the one thing that cannot be split this way (POSIX shm names are flat:
/dev/shm/ft.<job>.<rank>.<pid> for every node): a worker opens each of its job's segments
once to read the header, and adopts it only when the header's node is its own (ftworker's
SegmentDiscovery) — it never reads another node's ring, progress table or mailbox. Arenas
and plan files are found only by listing the node's own arena directory, and the local tier
only in the node's own local directory, so a worker never sees another node's copies;
check_namespaces() asserts it after a run (every arena in a node's directory belongs to a
rank launched on that node) and check_membership() that each rank was adopted by its own
node's worker (ft:{J}:ranks names the node it was launched on).

The ranks get their node's namespace through launch.py (--node-names, --node-env with
{node}); start_job(node_names=...) relaunches a job with a replacement node in an evicted
one's place.
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
    def __init__(self, paths, job, nodes=2, ranks_per_node=4, log_dir=None, redis=None):
        """paths: an object with attributes launch, trainsim, libft, ftworker (and ftmaster).
        redis: the job's Redis when not a private RedisServer, e.g. a RedisCluster
        (tests/redis_cluster_fixture.py): anything with start(), stop(), client() and password,
        and `url` for a URL other than redis://127.0.0.1:<port>."""
        self.paths = paths
        # The job name names the ranks' segments (/dev/shm/ft.<job>.*), which every ftworker of
        # that job on the host adopts, and the logs in /tmp: two runs of one case at once (two
        # checkouts on one machine) would watch, and stop, each other's ranks. One per run.
        self.job = "%s-%d" % (job, os.getpid())
        self.nodes = nodes
        self.ranks_per_node = ranks_per_node
        self.redis = redis if redis is not None else RedisServer()
        self.workers = {}
        self.master = None
        self.job_proc = None
        self.job_out = None
        self.t_job_start = None
        self.log_dir = log_dir or os.environ.get("FT_TEST_LOG_DIR") or "/tmp"
        self.worker_logs = {}
        self.node_names = ["node%d" % k for k in range(nodes)]  # of the current (or next) job
        # trainsim registers its state under libft.so, so every rank has a checkpoint arena
        # (and every worker a restore plan file): a private directory in shared memory per
        # run, like the default /dev/shm, with one subdirectory per simulated node (its
        # namespace), removed at the end — nothing left in /dev/shm. FT_TEST_ARENA_ROOT: another
        # tmpfs (one mounted with huge pages, docs/checkpoints.md "Arenas on huge pages").
        self.arena_root = tempfile.mkdtemp(prefix="ft-e2e-arenas-", dir=os.environ.get("FT_TEST_ARENA_ROOT", "/dev/shm"))
        # A local tier per node, when a test asks for one (local_dir): the node's "disk".
        self.disk_root = tempfile.mkdtemp(prefix="ft-e2e-disk-")

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self):
        self.redis.start()
        self.db = self.redis.client()
        return self

    def __exit__(self, exc_type, exc, tb):
        failed = exc_type is not None and not (exc_type is SystemExit and exc.code in (0, None))
        if failed:
            self.show_state()
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
        shutil.rmtree(self.arena_root, ignore_errors=True)
        if not failed:
            shutil.rmtree(self.disk_root, ignore_errors=True)
        # A failed run's logs stay for a closer look, and every run's with FT_TEST_KEEP_LOGS=1.
        if not failed and os.environ.get("FT_TEST_KEEP_LOGS") != "1":
            for path in self.log_paths():
                try:
                    os.unlink(path)
                except OSError:
                    pass
        return False

    def log_paths(self):
        paths = [self.job_out.name] if self.job_out else []
        return paths + list(self.worker_logs.values()) + list(getattr(self, "master_logs", {}).values())

    def show_state(self):
        """First, in a few lines (a CI log keeps a failure's head and tail): what the launcher
        said last, and the state of every rank process it started (alive, stopped, a zombie).
        Said once."""
        if getattr(self, "state_shown", False) or not self.job_out:
            return
        self.state_shown = True
        import re
        out = self.job_output()
        launch = [l for l in out.splitlines() if l.startswith("[launch]")]
        print("---- the launcher's last lines\n" + "\n".join(launch[-12:]), flush=True)
        states = []
        for pid in sorted(set(int(p) for p in re.findall(r"\[launch\] rank \d+ \S+ local \d+ pid (\d+)", out))):
            try:
                with open("/proc/%d/stat" % pid) as f:
                    states.append("%d %s" % (pid, f.read().rpartition(")")[2].split()[0]))
            except OSError:
                states.append("%d gone" % pid)
        print("---- rank processes (pid state): " + ", ".join(states), flush=True)

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
        prefixes = ("ft.%s." % self.job, "gpusim-nccl-%s-" % self.job)
        for name in os.listdir("/dev/shm"):
            if name.startswith(prefixes):
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass

    # -- per-node namespaces ------------------------------------------------------------------
    def arena_dir(self, node):
        """The node's host-arena directory (its "shared memory"), created on first use."""
        path = os.path.join(self.arena_root, node)
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    def local_dir(self, node):
        """The node's local checkpoint tier (its "disk"); a worker uses it when started with
        local_tier=True."""
        return os.path.join(self.disk_root, "local-" + node)

    def drop_node(self, node):
        """The node is gone (evicted, replaced): its worker stopped, its shared memory and its
        local disk wiped. A worker later started under the same name starts empty."""
        if node in self.workers:
            self.stop_worker(node)
        shutil.rmtree(os.path.join(self.arena_root, node), ignore_errors=True)
        shutil.rmtree(self.local_dir(node), ignore_errors=True)

    def node_of_rank(self, rank):
        return self.node_names[rank // self.ranks_per_node]

    def check_namespaces(self, job_nodes=None):
        """Every arena in a node's directory is of a rank launched on that node (by the job
        whose nodes are `job_nodes`, default the current one): no rank created or wrote
        another node's arena. Returns {node: [ranks with an arena there]}."""
        nodes = job_nodes or self.node_names
        seen = {}
        for node in sorted(os.listdir(self.arena_root)):
            ranks = []  # arenas and prefetched copies: both are of the node's ranks
            for prefix in ("ft-ckpt.%s." % self.job, "ft-prefetch.%s." % self.job):
                ranks += [int(n[len(prefix):]) for n in os.listdir(os.path.join(self.arena_root, node))
                          if n.startswith(prefix) and n[len(prefix):].isdigit()]
            ranks = sorted(set(ranks))
            want = [r for r in ranks if r // self.ranks_per_node < len(nodes)
                    and nodes[r // self.ranks_per_node] == node]
            check(ranks == want, "node %s's arena directory holds arenas of ranks %s launched on other nodes "
                  "(the job's nodes: %s)" % (node, sorted(set(ranks) - set(want)), nodes))
            seen[node] = ranks
        return seen

    def check_membership(self):
        """Every rank of the current job is reported (ft:{J}:ranks) by the worker of the node
        it was launched on: no worker adopted another node's segment. Waits for the
        relaunched incarnations (each rank's pid from launch.py's log)."""
        want = {r: (self.node_of_rank(r), p) for r, p in self.rank_pids().items()}

        def reported():
            raw = self.db.command("HGETALL", self.key("ranks")) or []
            got = {int(k): json.loads(v) for k, v in zip(raw[0::2], raw[1::2])}
            return got if all(r in got and got[r].get("pid") == p for r, (_, p) in want.items()) else None
        got = self.wait_for(reported, 30, "membership of every rank's current incarnation")
        wrong = {r: got[r]["node"] for r, (node, _) in want.items() if got[r]["node"] != node}
        check(not wrong, "ranks reported by another node's worker: %s (launched on %s)" %
              (wrong, {r: want[r][0] for r in wrong}))
        return {r: got[r]["node"] for r in want}

    def redis_url(self):
        url = getattr(self.redis, "url", "")
        return url if url.startswith("redis+cluster://") else "redis://127.0.0.1:%d" % self.redis.port

    def base_env(self, extra=None):
        env = dict(os.environ)
        env["FT_REDIS_PASSWORD"] = self.redis.password
        env["FT_JOB"] = self.job
        # Every simulated node is on this host: the workers' transfer servers listen on
        # loopback, never on the host's cluster address.
        env["FT_LISTEN"] = "127.0.0.1"
        # Several workers and masters on one host (and several tests at once): each serves its
        # metrics on a free loopback port, not the programs' fixed 9464/9465.
        env.setdefault("FT_METRICS_LISTEN", "127.0.0.1:0")
        # Nobody outside a node's namespace gets one: a tool run by the test (the ftmaster CLI)
        # needs none, the ranks and workers get their node's below.
        env.pop("FT_CKPT_ARENA_DIR", None)
        env.pop("FT_CKPT_DIR", None)
        # The workers read no host's kernel log (a real OOM kill elsewhere on the machine is not
        # the test's); tests of the hardware evidence point each at a file of their own.
        env["FT_KMSG_PATH"] = ""
        if extra:
            env.update(extra)
        return env

    def start_worker(self, node, env=None, local_tier=False):
        """The worker of `node`, in the node's namespace (its arena directory; its local
        directory as FT_CKPT_DIR when local_tier). A restarted worker of a node appends to the
        node's log."""
        mode = "a" if node in self.worker_logs else "w"
        log = open(os.path.join(self.log_dir, "ftworker-%s-%s.log" % (self.job, node)), mode)
        self.worker_logs[node] = log.name
        cmd = [self.paths.ftworker, "--job", self.job, "--node", node, "--redis", self.redis_url()]
        own = {"FT_CKPT_ARENA_DIR": self.arena_dir(node)}
        if local_tier:
            own["FT_CKPT_DIR"] = self.local_dir(node)
        self.workers[node] = subprocess.Popen(cmd, env=self.base_env({**(env or {}), **own}), stdout=log,
                                              stderr=subprocess.STDOUT)
        return self.workers[node]

    def start_workers(self, env=None, local_tier=False):
        for node in self.node_names:
            self.start_worker(node, env, local_tier=local_tier)

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

    # Slowness reports name a rank without stopping anything; on a loaded 2-core host a rank
    # of a CPU-bound job can really run 1.5x its peers. A test about faults waits on the rest.
    SLOWNESS_KINDS = ("straggler", "job-slow")

    def fault_incidents(self):
        return [i for i in self.incidents() if i["kind"] not in self.SLOWNESS_KINDS]

    def worker_log(self, node):
        with open(self.worker_logs[node]) as f:
            return f.read()

    def start_job(self, trainsim_flags, env=None, rank_env=None, timeout=120, node_names=None, program=None,
                  launch_args=("--keep-going",)):
        """rank_env: {rank: {VAR: value}} applied to single ranks through a shell wrapper.
        node_names: the nodes the job runs on, in rank order (default: the current ones;
        a relaunch names a replacement node in an evicted one's place). Every rank gets its
        node's arena directory, and its local directory as FT_CKPT_DIR (what its worker uses
        when it has a local tier). program: the command each rank runs instead of trainsim
        (trainsim_flags follow it), e.g. [python, train.py]. launch_args: launch.py's options
        for a failing rank (default --keep-going: the test decides; ["--grace", "0.1"]: the
        others SIGTERMed 0.1 s later, as torchrun's agent does)."""
        if node_names is not None:
            check(len(node_names) == self.nodes, "%d node names for %d nodes" % (len(node_names), self.nodes))
            self.node_names = list(node_names)
        for node in self.node_names:
            self.arena_dir(node)
        program = list(program or [self.paths.trainsim]) + list(trainsim_flags)
        if rank_env:
            script = ""
            for rank, vars_ in rank_env.items():
                exports = " ".join("%s=%s" % (k, v) for k, v in vars_.items())
                script += 'if [ "$RANK" = "%d" ]; then export %s; fi; ' % (rank, exports)
            program = ["/bin/sh", "-c", script + 'exec "$0" "$@"'] + program
        cmd = [sys.executable, self.paths.launch, "--nodes", str(self.nodes), "--ranks-per-node",
               str(self.ranks_per_node)] + list(launch_args) + ["--timeout", str(timeout),
               "--node-names", ",".join(self.node_names),
               "--node-env", "FT_CKPT_ARENA_DIR=" + os.path.join(self.arena_root, "{node}"),
               "--node-env", "FT_CKPT_DIR=" + os.path.join(self.disk_root, "local-{node}"), "--"] + program
        job_env = self.base_env(env)
        job_env["LD_PRELOAD"] = self.paths.libft
        # gpusim's NCCL segments named for the job, so that the ones a killed rank leaves are
        # removed with the job's own (cleanup_segments).
        job_env.setdefault("GPUSIM_NCCL_SHM_PREFIX", "/gpusim-nccl-%s-" % self.job)
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
                re.findall(r"\[launch\] rank (\d+) \S+ local \d+ pid (\d+)", self.job_output())}

    # -- reading Redis -----------------------------------------------------------------------
    def key(self, suffix):
        return "ft:{%s}:%s" % (self.job, suffix)

    GROUPS = 16  # proto::Keys::kGroups

    def rank_key(self, suffix, rank):
        """A per-rank hash of the rank's group (progress, summary): ft:{J:g<rank mod 16>}:<suffix>."""
        return "ft:{%s:g%d}:%s" % (self.job, int(rank) % self.GROUPS, suffix)

    def node_key(self, prefix, node):
        """A per-node key of the node's group (worker:<node>; cursor:<node>, where workers
        before the cursor moved beside its stream, cmd:<node>:cursor, kept it)."""
        h = 0xcbf29ce484222325
        for b in node.encode():
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        return "ft:{%s:g%d}:%s%s" % (self.job, h % self.GROUPS, prefix, node)

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
        key = self.rank_key(suffix, field) if suffix in ("progress", "summary") else self.key(suffix)
        value = self.db.command("HGET", key, str(field))
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
