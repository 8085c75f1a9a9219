#!/usr/bin/env python3
"""What a healthy job makes Redis take in, per rank per second (part of make bench-worker).

    python3 bench/redis_volume.py [BUILD_DIR]      (default: build)

One ftworker and RANKS trainsim ranks (default 8, dp=RANKS, 20 ms compute steps) on gpusim
under libft.so, a private redis-server on loopback, no master: after WARMUP_S (default 5) of
training, the server's INFO counters over WINDOW_S (default 10) seconds — total_net_input_bytes
(every byte the clients sent, protocol included) and total_commands_processed — divided by the
ranks and the seconds; WINDOWS (default 3) such windows back to back, the median reported. A MONITOR connection over the same window attributes the bytes to the
keys they were written to (the breakdown lines; MONITOR's own output is not input).

Ends with one line:
  RESULT redis_volume redis_bytes_per_rank_s=<bytes> redis_commands_per_rank_s=<commands> ranks=<n>
Target (issue "131,072 ranks"): redis_bytes_per_rank_s <= 200.

Environment: RANKS, WARMUP_S, WINDOW_S, WINDOWS, COMPUTE_MS; FT_* settings pass through to the worker
and the ranks. Standard library only.
"""

import os
import re
import statistics
import socket
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from cluster import Cluster  # noqa: E402  (the e2e tests' simulated cluster)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from worker_bench import env_num  # noqa: E402  (RANKS=... and the other knobs)


class Paths:
    def __init__(self, build):
        self.launch = os.path.join(ROOT, "tests", "workloads", "trainsim", "launch.py")
        self.trainsim = os.path.join(build, "tests", "workloads", "trainsim", "trainsim")
        self.libft = os.path.join(build, "preload", "libft.so")
        self.ftworker = os.path.join(build, "ftworker", "ftworker")


def info_counters(db):
    text = db.command("INFO", "stats")
    if isinstance(text, bytes):
        text = text.decode()
    out = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out[k] = v.strip()
    return int(out["total_net_input_bytes"]), int(out["total_commands_processed"])


# One MONITOR line: <time> [<db> <client>] "CMD" "arg" ...
MONITOR_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')


def key_kind(job, key):
    """ft:{J:g3}:progress -> progress; ft:{J:g5}:worker:n0 -> worker:*; ft:{J}:ckpt:12 -> ckpt:*
    (docs/redis-schema.md: the job-wide keys and the 16 groups' keys)."""
    m = re.match(r"^ft:\{%s(?::g\d+)?\}:" % re.escape(job), key)
    if not m:
        return key
    rest = key[m.end():]
    rest = re.sub(r"^(worker|ckpt|cmd|cursor):[^:]+", lambda m: m.group(1) + ":*", rest)
    return rest


class Monitor(threading.Thread):
    """Sums the size of each command the server receives, by command and key kind."""

    def __init__(self, port, password, job):
        super().__init__(daemon=True)
        self.job = job
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n*1\r\n$7\r\nMONITOR\r\n"
                          % (len(password), password.encode()))
        self.totals = {}
        self.counting = False
        self.stopped = False

    def run(self):
        buf = b""
        while not self.stopped:
            try:
                chunk = self.sock.recv(1 << 16)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            *lines, buf = buf.split(b"\r\n")
            if not self.counting:
                continue
            for raw in lines:
                line = raw.decode(errors="replace")
                args = MONITOR_ARG.findall(line)
                if not args:
                    continue
                cmd = args[0].upper()
                if cmd in ("INFO", "MONITOR", "AUTH"):
                    continue
                key = key_kind(self.job, args[1]) if len(args) > 1 else ""
                if cmd == "EVAL" and len(args) > 3:
                    key = key_kind(self.job, args[3])
                # The RESP size of the command as sent: *n, then $len and the bytes per argument.
                size = len("*%d\r\n" % len(args))
                for a in args:
                    n = len(a.encode().decode("unicode_escape").encode("latin-1", errors="replace"))
                    size += len("$%d\r\n" % n) + n + 2
                entry = self.totals.setdefault((cmd, key), [0, 0])
                entry[0] += 1
                entry[1] += size

    def close(self):
        self.stopped = True
        try:
            self.sock.close()
        except OSError:
            pass


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    if not os.path.isabs(build):
        build = os.path.join(ROOT, build)
    paths = Paths(build)
    for exe in (paths.trainsim, paths.libft, paths.ftworker):
        if not os.path.exists(exe):
            sys.exit("redis_volume: %s is missing: build first (make build)" % exe)
    os.environ.setdefault("LD_LIBRARY_PATH", os.path.join(build, "gpusim"))
    os.environ.setdefault("GPUSIM_KERNEL_LIBS",
                          os.path.join(build, "tests", "workloads", "trainsim", "libtrainsim_kernels.so"))
    ranks = env_num("RANKS", 8, int)
    warmup_s = env_num("WARMUP_S", 5.0)
    window_s = env_num("WINDOW_S", 10.0)
    windows = env_num("WINDOWS", 3, int)
    compute_ms = env_num("COMPUTE_MS", 20.0)
    steps = int((warmup_s + windows * window_s + 30) * 1000 / compute_ms)

    with Cluster(paths, job="redis-volume", nodes=1, ranks_per_node=ranks) as c:
        c.start_workers()
        c.start_job(["--dp", str(ranks), "--steps", str(steps), "--compute-ms", str(compute_ms)],
                    timeout=int(warmup_s + windows * window_s + 120))
        db = c.redis.client(timeout=10.0)
        c.wait_for(lambda: db.command("HLEN", c.key("ranks")) >= ranks, timeout=60,
                   what="all %d ranks adopted by the worker" % ranks)
        time.sleep(warmup_s)
        monitor = Monitor(c.redis.port, c.redis.password, c.job)
        monitor.start()
        time.sleep(0.2)
        # WINDOWS back-to-back windows of the same job; the figure is their median (a window
        # in which something else loaded the machine shows as an outlier, not as the result).
        figures = []
        monitor.counting = True
        t_all = time.monotonic()
        for _ in range(windows):
            b0, n0 = info_counters(db)
            t0 = time.monotonic()
            time.sleep(window_s)
            b1, n1 = info_counters(db)
            elapsed = time.monotonic() - t0
            # The two INFO calls are this script's own input; MONITOR's AUTH and MONITOR came before.
            own = 2 * len(b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n")
            figures.append(((b1 - b0 - own) / ranks / elapsed, (n1 - n0 - 2) / ranks / elapsed))
            print("redis_volume: %d ranks, %.1f s window: %d bytes in, %d commands: %.0f B/rank/s" %
                  (ranks, elapsed, b1 - b0 - own, n1 - n0 - 2, figures[-1][0]), flush=True)
        total_s = time.monotonic() - t_all
        monitor.counting = False
        monitor.close()
        if c.job_proc.poll() is not None:
            sys.exit("redis_volume: the job ended inside the window (status %s): the figure would "
                     "not be a healthy job's" % c.job_proc.returncode)
        print("redis_volume: by command and key over all windows (MONITOR, per rank per second):")
        for (cmd, key), (count, size) in sorted(monitor.totals.items(), key=lambda kv: -kv[1][1]):
            print("  %-6s %-24s %8.1f B/rank/s %7.2f cmd/rank/s" %
                  (cmd, key, size / ranks / total_s, count / ranks / total_s))
        c.stop_job()
    per_rank_s = statistics.median(f[0] for f in figures)
    commands_per_rank_s = statistics.median(f[1] for f in figures)
    print("RESULT redis_volume redis_bytes_per_rank_s=%.0f redis_commands_per_rank_s=%.2f ranks=%d"
          % (per_rank_s, commands_per_rank_s, ranks), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
