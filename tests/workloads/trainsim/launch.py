#!/usr/bin/env python3
"""Start a multi-node job on one host, the way torchrun starts one on each node.

    launch.py --nodes N --ranks-per-node R [options] -- PROGRAM [ARGS...]

starts N*R processes of PROGRAM grouped into N simulated nodes. Each gets the environment
torchrun gives its workers (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, MASTER_ADDR, MASTER_PORT,
TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS) plus
FT_NODE_ID=<node name>, on top of the launcher's own environment (so LD_LIBRARY_PATH and
LD_PRELOAD reach every rank). Output lines are prefixed with "[rank r]", or written to
<log-dir>/rank<r>.log.

The nodes are named node0, node1, ... unless --node-names names them (a relaunch that puts
node2 in node1's place: --node-names node0,node2). --node-env KEY=VALUE (repeatable) gives
every rank of a node KEY=VALUE with {node} replaced by its node's name: each simulated node
its own namespace, e.g. --node-env FT_CKPT_ARENA_DIR=/dev/shm/job/{node}.

Exit status: 0 when every rank exits 0; otherwise the first failure's code (a rank killed by
signal S counts as 128+S); 124 when --timeout expired; 128+S when the launcher itself got
SIGINT/SIGTERM (it then SIGTERMs every rank, SIGKILL --kill-after later, as srun and torchrun
forward a scheduler's SIGTERM). When a rank fails, the others get SIGTERM after --grace seconds
and SIGKILL --kill-after seconds later, unless --keep-going (fault tests: an outer harness
decides). --teardown torchrun|slurm|kubernetes|mpirun sets both as that launcher does;
--preempt-after S SIGTERMs every rank after S seconds (a preemption, scancel, a pod eviction).
Ranks die with the launcher (PR_SET_PDEATHSIG), even if it is SIGKILLed.

Restarts in place, as torchrun's elastic agent does with --max_restarts: --max-restarts N
starts the whole group again, on the same nodes with the same ranks, once every rank of a
failed group is gone (after the teardown above), up to N times, --restart-delay seconds after
the last rank went; TORCHELASTIC_RESTART_COUNT counts the restarts, and "{restart}" in a
--node-env value is replaced by it. A group that ends cleanly, or a launcher that got a signal,
is not restarted. The exit status is the last group's.

TORCHELASTIC_RUN_ID is what torchrun gives: "none" under its static rendezvous (the default
here), a fresh random UUID per launch under --standalone, or --run-id (torchrun's --rdzv_id).

Python 3 standard library only.
"""

import argparse
import ctypes
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
import uuid

PR_SET_PDEATHSIG = 1


def log(msg):
    sys.stderr.write("[launch] %s\n" % msg)
    sys.stderr.flush()


def describe_status(code):
    """subprocess returncode -> (exit code the launcher reports, words)."""
    if code < 0:
        sig = -code
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "signal %d" % sig
        return 128 + sig, "killed by signal %s (%d)" % (name, sig)
    return code, "exited with code %d" % code


def free_port(addr):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


# How launchers tear a job down (FACTS.md, "How jobs are torn down"): seconds from the first
# failed rank to SIGTERM to the others, seconds from SIGTERM to SIGKILL, and what it models.
TEARDOWNS = {
    "default": (5.0, 3.0, "SIGTERM 5 s after a failure, SIGKILL 3 s later"),
    "torchrun": (0.1, 30.0, "torchrun's agent: SIGTERM to the rest 0.1 s after a failure (its monitor "
                 "interval), SIGKILL 30 s later"),
    "slurm": (0.0, 30.0, "srun --kill-on-bad-exit: SIGTERM to every task at once, SIGKILL after KillWait (30 s)"),
    "kubernetes": (0.0, 30.0, "a pod deleted or evicted: SIGTERM, SIGKILL after "
                   "terminationGracePeriodSeconds (30 s)"),
    "mpirun": (1.0, 3.0, "Open MPI's mpirun: the other ranks killed about 1 s after one dies"),
}


def parse_args(argv):
    if "--" in argv:
        cut = argv.index("--")
        mine, program = argv[:cut], argv[cut + 1:]
    else:
        mine, program = argv, []
    p = argparse.ArgumentParser(
        prog="launch.py",
        usage="%(prog)s --nodes N --ranks-per-node R [options] -- PROGRAM [ARGS...]",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, required=True, help="simulated nodes")
    p.add_argument("--ranks-per-node", type=int, required=True, help="processes per node")
    p.add_argument("--master-addr", default="127.0.0.1", help="MASTER_ADDR (default 127.0.0.1)")
    p.add_argument("--master-port", type=int, default=0,
                   help="MASTER_PORT (default: a free port)")
    p.add_argument("--log-dir", help="write each rank's output to LOG_DIR/rank<r>.log")
    p.add_argument("--keep-going", action="store_true",
                   help="when a rank fails, leave the others running")
    p.add_argument("--timeout", type=float, default=0,
                   help="kill everything after this many seconds and exit 124")
    p.add_argument("--grace", type=float, default=None,
                   help="seconds between the first failure and SIGTERM to the others (default 5)")
    p.add_argument("--kill-after", type=float, default=None,
                   help="seconds between SIGTERM and SIGKILL (default 3)")
    p.add_argument("--teardown", choices=sorted(TEARDOWNS), default=None,
                   help="tear down as this launcher does (--grace and --kill-after override): " +
                        "; ".join("%s: %s" % (k, v[2]) for k, v in sorted(TEARDOWNS.items())))
    p.add_argument("--preempt-after", type=float, default=0,
                   help="after this many seconds, SIGTERM every rank as a scheduler's preemption, "
                        "scancel or a pod eviction does (SIGKILL --kill-after later); exit 143")
    p.add_argument("--run-id", default=None,
                   help="TORCHELASTIC_RUN_ID, as torchrun's --rdzv_id (default: 'none', as torchrun's "
                        "static rendezvous gives)")
    p.add_argument("--standalone", action="store_true",
                   help="as torchrun --standalone: TORCHELASTIC_RUN_ID is a fresh random UUID per launch")
    p.add_argument("--max-restarts", type=int, default=0,
                   help="restart a failed group in place up to N times, as torchrun --max_restarts "
                        "(default 0)")
    p.add_argument("--restart-delay", type=float, default=0.0,
                   help="seconds between the last rank of a failed group gone and the restart "
                        "(default 0: at once, as torchrun)")
    p.add_argument("--node-names", default=None,
                   help="comma-separated names of the nodes, in rank order (default node0,node1,...)")
    p.add_argument("--node-env", action="append", default=[], metavar="KEY=VALUE",
                   help="set KEY=VALUE for every rank, {node} in VALUE replaced by its node's name "
                        "(repeatable)")
    args = p.parse_args(mine)
    grace, kill_after, _ = TEARDOWNS[args.teardown or "default"]
    if args.grace is None:
        args.grace = grace
    if args.kill_after is None:
        args.kill_after = kill_after
    if not program:
        p.error("no program given (put it after --)")
    if args.nodes < 1 or args.ranks_per_node < 1:
        p.error("--nodes and --ranks-per-node must be positive")
    if args.max_restarts < 0 or args.restart_delay < 0:
        p.error("--max-restarts and --restart-delay must not be negative")
    if args.standalone and args.run_id is not None:
        p.error("--standalone makes its own run id: give --run-id or --standalone, not both")
    if args.node_names is None:
        args.node_names = ["node%d" % k for k in range(args.nodes)]
    else:
        args.node_names = args.node_names.split(",")
        if len(args.node_names) != args.nodes:
            p.error("--node-names names %d nodes, --nodes is %d" % (len(args.node_names), args.nodes))
        if len(set(args.node_names)) != len(args.node_names) or not all(
                n and "/" not in n and "{" not in n and not any(c.isspace() for c in n)
                for n in args.node_names):
            p.error("--node-names: names must be distinct, non-empty, without '/', '{' or spaces: %s" %
                    ",".join(args.node_names))
    node_env = []
    for item in args.node_env:
        key, eq, value = item.partition("=")
        if not eq or not key or not key.replace("_", "").isalnum():
            p.error("--node-env wants KEY=VALUE, got '%s'" % item)
        node_env.append((key, value))
    args.node_env = node_env
    args.program = program
    return args


class Rank:
    def __init__(self, rank, node, local):
        self.rank = rank
        self.node = node
        self.local = local
        self.proc = None
        self.code = None  # launcher exit code of this rank once it exited
        self.partial = {}  # fd -> bytes of an unfinished line
        self.log = None


class Launcher:
    def __init__(self, args):
        self.args = args
        self.world = args.nodes * args.ranks_per_node
        self.ranks = []
        self.sel = selectors.DefaultSelector()
        self.got_signal = None
        self.first_failure = None
        self.terminate_at = None  # when to send SIGTERM to the survivors
        self.kill_at = None  # when to send SIGKILL
        self.out = sys.stdout.buffer
        self.err = sys.stderr.buffer
        self.libc = None
        try:
            self.libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            pass
        self.pid = os.getpid()
        self.restart = 0  # TORCHELASTIC_RESTART_COUNT of the group running
        self.run_id = args.run_id or (str(uuid.uuid4()) if args.standalone else "none")

    def child_setup(self):
        # Runs in the child between fork and exec: die with the launcher.
        if self.libc is not None:
            self.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != self.pid:
            os._exit(1)

    def environment(self, r, port):
        env = dict(os.environ)
        env.update({
            "RANK": str(r.rank),
            "LOCAL_RANK": str(r.local),
            "WORLD_SIZE": str(self.world),
            "LOCAL_WORLD_SIZE": str(self.args.ranks_per_node),
            "GROUP_RANK": str(r.node),
            "GROUP_WORLD_SIZE": str(self.args.nodes),
            "ROLE_RANK": str(r.rank),
            "ROLE_WORLD_SIZE": str(self.world),
            "ROLE_NAME": "default",
            "MASTER_ADDR": self.args.master_addr,
            "MASTER_PORT": str(port),
            "TORCHELASTIC_RUN_ID": self.run_id,
            "TORCHELASTIC_RESTART_COUNT": str(self.restart),
            "TORCHELASTIC_MAX_RESTARTS": str(self.args.max_restarts),
            "FT_NODE_ID": self.args.node_names[r.node],
        })
        for key, value in self.args.node_env:
            env[key] = value.replace("{node}", self.args.node_names[r.node]).replace(
                "{restart}", str(self.restart))
        if "OMP_NUM_THREADS" not in os.environ and self.args.ranks_per_node > 1:
            env["OMP_NUM_THREADS"] = "1"  # as torchrun does
        return env

    def start(self):
        port = self.args.master_port or free_port(self.args.master_addr)
        if self.args.log_dir:
            os.makedirs(self.args.log_dir, exist_ok=True)
        log("world %d: %d nodes x %d ranks, MASTER_ADDR=%s MASTER_PORT=%d run %s%s" % (
            self.world, self.args.nodes, self.args.ranks_per_node, self.args.master_addr, port,
            self.run_id, " restart %d" % self.restart if self.restart else ""))
        for node in range(self.args.nodes):
            for local in range(self.args.ranks_per_node):
                r = Rank(node * self.args.ranks_per_node + local, node, local)
                if self.args.log_dir:
                    # A restarted group appends to the same file, as a rank's log under one job.
                    r.log = open(os.path.join(self.args.log_dir, "rank%d.log" % r.rank), "ab")
                    stdout, stderr = r.log, subprocess.STDOUT
                else:
                    stdout, stderr = subprocess.PIPE, subprocess.PIPE
                try:
                    r.proc = subprocess.Popen(
                        self.args.program, env=self.environment(r, port), stdin=subprocess.DEVNULL,
                        stdout=stdout, stderr=stderr, start_new_session=True,
                        preexec_fn=self.child_setup)
                except OSError as e:
                    log("cannot start %s: %s" % (self.args.program[0], e))
                    self.terminate_all(signal.SIGKILL)
                    return False
                if r.log is not None:
                    r.log.close()
                    r.log = None
                else:
                    self.sel.register(r.proc.stdout, selectors.EVENT_READ, (r, self.out))
                    self.sel.register(r.proc.stderr, selectors.EVENT_READ, (r, self.err))
                self.ranks.append(r)
                log("rank %d %s local %d pid %d" % (r.rank, self.args.node_names[r.node], r.local,
                                                    r.proc.pid))
        return True

    def emit(self, r, sink, data, final=False):
        fd = id(sink)
        buf = r.partial.get(fd, b"") + data
        lines = buf.split(b"\n")
        rest = lines.pop()
        if final and rest:
            lines.append(rest)
            rest = b""
        r.partial[fd] = rest
        if lines:
            prefix = b"[rank %d] " % r.rank
            sink.write(b"".join(prefix + line + b"\n" for line in lines))
            sink.flush()

    def pump(self, timeout):
        for key, _ in self.sel.select(timeout):
            r, sink = key.data
            try:
                data = os.read(key.fileobj.fileno(), 65536)
            except OSError:
                data = b""
            if data:
                self.emit(r, sink, data)
            else:
                self.emit(r, sink, b"", final=True)
                self.sel.unregister(key.fileobj)
                key.fileobj.close()

    def alive(self):
        return [r for r in self.ranks if r.code is None]

    def signal_group(self, r, sig):
        try:
            os.killpg(r.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                r.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    def terminate_all(self, sig):
        for r in self.ranks:
            if r.code is None:
                self.signal_group(r, sig)

    def reap(self):
        for r in self.alive():
            rc = r.proc.poll()
            if rc is None:
                continue
            r.code, words = describe_status(rc)
            if rc == 0:
                continue
            log("rank %d (%s, pid %d) %s" % (r.rank, self.args.node_names[r.node], r.proc.pid, words))
            if self.first_failure is None:
                self.first_failure = (r.rank, r.code)
                if not self.args.keep_going and self.got_signal is None:
                    self.terminate_at = time.monotonic() + self.args.grace
                    if len(self.alive()) > 0:
                        log("stopping the other ranks in %.1f s (--keep-going leaves them)" %
                            self.args.grace)

    def on_signal(self, signum, _frame):
        if self.got_signal is None:
            self.got_signal = signum
            self.terminate_at = time.monotonic()
        else:  # a second signal: no more patience
            self.kill_at = time.monotonic()

    def run_group(self, started, deadline, preempt_at):
        """Runs one group of ranks until every rank is gone: (timed_out, preempt_at left)."""
        timed_out = False
        while self.alive():
            self.pump(0.05)
            self.reap()
            now = time.monotonic()
            if preempt_at is not None and now >= preempt_at:
                preempt_at = None
                log("preemption after %.1f s: SIGTERM to every rank, SIGKILL %.1f s later" %
                    (self.args.preempt_after, self.args.kill_after))
                self.got_signal = signal.SIGTERM
                self.terminate_at = now
            if deadline is not None and now >= deadline and not timed_out:
                timed_out = True
                log("timeout after %.1f s: stopping %d ranks" % (self.args.timeout, len(self.alive())))
                self.terminate_at = now
            if self.terminate_at is not None and now >= self.terminate_at:
                self.terminate_at = None
                if self.got_signal is not None:
                    log("got %s: stopping all ranks" % signal.Signals(self.got_signal).name)
                self.terminate_all(signal.SIGTERM)
                self.kill_at = now + self.args.kill_after
            if self.kill_at is not None and now >= self.kill_at:
                self.kill_at = None
                if self.alive():
                    log("SIGKILL to %d ranks that outlived SIGTERM" % len(self.alive()))
                self.terminate_all(signal.SIGKILL)
        # Drain what the ranks wrote last (a rank's own children may hold a pipe: bounded).
        drain_until = time.monotonic() + 1.0
        while self.sel.get_map() and time.monotonic() < drain_until:
            self.pump(0.05)
        return timed_out, preempt_at

    def run(self):
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, self.on_signal)
        started = time.monotonic()
        deadline = started + self.args.timeout if self.args.timeout > 0 else None
        preempt_at = started + self.args.preempt_after if self.args.preempt_after > 0 else None
        while True:
            if not self.start():
                return 1
            timed_out, preempt_at = self.run_group(started, deadline, preempt_at)
            restart = (self.first_failure is not None and not timed_out and self.got_signal is None and
                       self.restart < self.args.max_restarts)
            if not restart:
                break
            rank, code = self.first_failure
            self.restart += 1
            log("group failed (rank %d first, exit %d): restart %d of %d in place%s" % (
                rank, code, self.restart, self.args.max_restarts,
                " in %.1f s" % self.args.restart_delay if self.args.restart_delay else ""))
            until = time.monotonic() + self.args.restart_delay
            while self.got_signal is None and time.monotonic() < until:
                time.sleep(min(0.05, max(0.0, until - time.monotonic())))
            if self.got_signal is not None:
                break
            self.ranks = []
            self.first_failure = None
            self.terminate_at = None
            self.kill_at = None
        elapsed = time.monotonic() - started
        if timed_out:
            return 124
        if self.got_signal is not None:
            return 128 + self.got_signal
        if self.first_failure is not None:
            rank, code = self.first_failure
            log("failed: rank %d first, exit %d (%.1f s)" % (rank, code, elapsed))
            return code
        log("all %d ranks exited 0 (%.1f s)%s" % (
            self.world, elapsed, " after %d restarts" % self.restart if self.restart else ""))
        return 0


def main(argv):
    args = parse_args(argv)
    return Launcher(args).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
