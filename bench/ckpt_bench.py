#!/usr/bin/env python3
"""make bench-ckpt: what a checkpoint costs, on the gpusim stand-ins, each figure against a
baseline taken in the same run (see bench/README.md, "make bench-ckpt").

  save_ratio       JIT save throughput (kSave posted on the rank's segment as ftworker does,
                   to its ack) / a plain memcpy of the same bytes            target >= 0.9
  block_s          what a periodic save (FT_CKPT_EVERY=1) blocks inside ft_step_done when the
                   app never calls ft_update_begin (the blocking save); median of STEPS saves
  step_done_ms     host time in ft_step_done with FT_CKPT_EVERY=1 for an app that gives
                   ft_update_begin its stream (every step a snapshot that never blocks)
                                                                             target <= 1 ms
  every_step_ratio step time with a snapshot every step / with none (FT_CKPT_EVERY=0), same
                   training loop (TRAIN_COMPUTE_MS of CPU compute per step, an optimizer that
                   writes every registered byte), median of RUNS interleaved pairs; the
                   spread is the pairs' min..max. On a GPU the target is <= 1.01; here the
                   agent's copy and checksums compete with the compute for the cores
  persist_ratio    local-tier PersistCopy throughput / `dd if=<arena> of=<file> bs=4M
                   oflag=direct` of the same bytes, same file system          target >= 0.8
  restore_ratio    a memcpy of the arena's committed copy in a new process (mapped fresh there, into
                   a pre-faulted buffer: the floor of any restore by a new process) / ft_restore
                   from the rank's own arena (every chunk verified, copied to the device buffers
                   as it verifies), alternating, medians of CKPT_RATIO_RUNS   target >= 0.9
  restore_ratio_hot  the same against a memcpy between buffers mapped before (what a process
                   that had touched the arena would pay; on this VM the first touch of each page
                   by a process costs ~1.4 s per GiB, see README)
  restore_floor_ratio  the same restores against a verified copy without ft, in the same series
                   (ckpt_bench_tool verify-copy: each chunk checked on one thread and copied on a
                   second once checked, into a pre-faulted buffer; what ft_restore's pipeline is
                   on gpusim, whose copy engine is a CPU thread): ft's own cost, target ~1.
                   floor_vs_memcpy: that floor against the fresh memcpy, the best restore_ratio
                   a verified restore can reach on this machine
  register_s_per_gib  ft_register_end of a fresh two-slot arena (create, check the room, map: the
                   app's start-up path) per GiB registered; _1slot with FT_CKPT_ARENA_SLOTS=1,
                   median of RUNS                                             target <= 0.1
  prepare_s_per_gib  what libft.so's checkpoint thread does after it, beside the app (reserve,
                   populate, pin; its "prepared in" line), the same arenas; _1slot likewise
  restore_*_s      ft_restore from one source alone (own arena; local dir; remote dir), the
                   node plan file naming only that source, the directories' pages dropped from
                   the page cache first (cold reads), the restored bytes checked
  term_save_s      the termination save: SIGTERM to a rank (no periodic save) until its copy
                   is committed, as libft.so measures it                     target <= 1 s/GiB
  term_exit_s      SIGTERM until the process is gone (the save, then the signal's default action)
  replicate_gbps   buddy copies (FT_CKPT_REPLICATE_EVERY=1): a second ftworker ("node1", its own
                   arena directory) pulls the rank's committed copy from node0's ftworker over
                   loopback TCP (one connection, every chunk verified, into its two-slot replica
                   arena) as its log reports it; median of RUNS pulls (node1's worker restarted
                   with an empty directory each time). Against pull_bench's socket_gbps (a plain
                   single-stream socket copy of the same bytes) in the same run: replicate_ratio

Arenas on huge pages (docs/checkpoints.md, "Arenas on huge pages": the deployment we advise):
as root the bench mounts a tmpfs with huge=within_size for them and unmounts it at the end;
otherwise, or with CKPT_ARENA_ROOT=DIR (/dev/shm: the default a new user starts with), they go
where that says. The RESULT line's arena_pages says which (huge or 4k).
1 GiB registered per rank (CKPT_BYTES), one rank for the RESULT line, then a 4-rank run
(CKPT_RANKS4=0 skips it). Medians of RUNS (5) alternating runs; the save and restore ratios
medians of CKPT_RATIO_RUNS (11) pairs. Disk tiers in CKPT_DISK_DIR
(default /var/tmp: a real disk, not tmpfs). Ends with one line:
RESULT ckpt arena_pages=... save_ratio=... restore_ratio=... restore_ratio_hot=... restore_floor_ratio=... floor_vs_memcpy=... register_s_per_gib=... register_s_per_gib_1slot=... prepare_s_per_gib=... prepare_s_per_gib_1slot=... block_s=... step_done_ms=... every_step_ratio=... persist_ratio=... restore_arena_s=... restore_dir_s=... restore_remote_s=... term_save_s=... term_exit_s=... replicate_gbps=... socket_gbps=... replicate_ratio=...

usage: ckpt_bench.py BUILD_DIR
"""

import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BYTES = int(os.environ.get("CKPT_BYTES", str(1 << 30)))
RUNS = int(os.environ.get("RUNS", "5"))
# The two ratios against memcpy (save_ratio, restore_ratio) take more pairs: on a shared 2-vCPU
# VM one run in four is 20-40 % off for reasons outside the process (another vCPU's work, the
# hypervisor), which moved a median of 5 by 0.2 between runs. Each pair costs a second or less.
RATIO_RUNS = int(os.environ.get("CKPT_RATIO_RUNS", str(max(RUNS, 11))))
RANKS4 = int(os.environ.get("CKPT_RANKS4", "4"))
DISK_DIR = os.environ.get("CKPT_DISK_DIR", "/var/tmp")
ARENA_ROOT = os.environ.get("CKPT_ARENA_ROOT")


def huge_page_root():
    """A tmpfs mounted huge=within_size in a new directory (root only), as big as /dev/shm may
    grow; None where it cannot be mounted."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return None
    root = tempfile.mkdtemp(prefix="ft-bench-huge-")
    shm = os.statvfs("/dev/shm")
    size = shm.f_blocks * shm.f_frsize
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777,huge=within_size,size=%d" % size, "tmpfs", root],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print("bench: no huge-page tmpfs (%s): arenas in /dev/shm" % (p.stderr.strip() or p.returncode), flush=True)
        os.rmdir(root)
        return None
    return root


def unmount(root):
    subprocess.run(["umount", root], capture_output=True)
    try:
        os.rmdir(root)
    except OSError:
        pass
STEPS = 4
TRAIN_STEPS = int(os.environ.get("TRAIN_STEPS", "10"))
TRAIN_COMPUTE_MS = float(os.environ.get("TRAIN_COMPUTE_MS", "500"))


def die(msg):
    print("bench-ckpt: FAIL: " + msg, flush=True)
    sys.exit(1)


class CpuShare:
    """What the machine's CPUs did while a series ran (/proc/stat), for telling a slow run on a busy
    or stolen machine from a slow product: a verified copy runs on two threads where memcpy runs on
    one, so anything else that takes a CPU meanwhile costs the copy more than its baseline."""

    FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")

    def __init__(self):
        self.start = self.read()

    @staticmethod
    def read():
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:9]]

    def summary(self):
        d = [b - a for a, b in zip(self.start, self.read())]
        total = sum(d) or 1
        share = dict(zip(self.FIELDS, d))
        return "cpu meanwhile: idle %.0f%% iowait %.0f%% steal %.0f%% (of %d CPUs)" % (
            100.0 * share["idle"] / total, 100.0 * share["iowait"] / total, 100.0 * share["steal"] / total,
            os.cpu_count() or 1)


def median(xs):
    return statistics.median(xs)


def values(text, key):
    return [float(v) for v in re.findall(r"\b%s=([0-9.]+)" % key, text)]


class Bench:
    def __init__(self, build):
        b = os.path.abspath(build)
        self.libft = os.path.join(b, "preload", "libft.so")
        self.gpusim = os.path.join(b, "gpusim")
        self.rank_bin = os.path.join(b, "bench", "ckpt_bench_rank")
        self.tool = os.path.join(b, "bench", "ckpt_bench_tool")
        self.plan_tool = os.path.join(b, "python", "node_plan_tool")
        for p in (self.libft, self.rank_bin, self.tool, self.plan_tool, os.path.join(self.gpusim, "libcudart.so.13")):
            if not os.path.exists(p):
                die("%s is missing: build first (make bench-ckpt builds it)" % p)
        self.job = "bench-ckpt-%d" % os.getpid()
        self.node = "node0"
        self.mounted = None if ARENA_ROOT else huge_page_root()
        self.arena_root = ARENA_ROOT or self.mounted or "/dev/shm"
        self.arena_dir = tempfile.mkdtemp(prefix="ft-bench-ckpt-", dir=self.arena_root)
        self.arena_pages = "unknown"  # as libft.so's preparation line says (register_per_gib)
        self.disk = tempfile.mkdtemp(prefix="ft-bench-ckpt-", dir=DISK_DIR)
        self.local_dir = os.path.join(self.disk, "local")
        self.remote_dir = os.path.join(self.disk, "remote")

    def cleanup(self):
        shutil.rmtree(self.arena_dir, ignore_errors=True)
        shutil.rmtree(self.disk, ignore_errors=True)
        if self.mounted:
            unmount(self.mounted)
        # The segments of ranks that ended by a signal (the termination runs): libft.so leaves
        # them for a worker to read the death from, and no worker runs here.
        for name in os.listdir("/dev/shm"):
            if name.startswith("ft.%s." % self.job):
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass

    def env(self, rank, world):
        e = dict(os.environ)
        e.update({"LD_PRELOAD": self.libft, "LD_LIBRARY_PATH": self.gpusim, "FT_JOB": self.job,
                  "FT_NODE_ID": self.node, "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                  "FT_CKPT_ARENA_DIR": self.arena_dir, "FT_CKPT_EVERY": "1", "FT_RESTORE_WAIT": "30s",
                  "FT_LOG_LEVEL": os.environ.get("FT_LOG_LEVEL", "warn")})
        return e

    def tool_run(self, *args):
        p = subprocess.run([self.tool] + [str(a) for a in args], capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            die("ckpt_bench_tool %s: %s%s" % (" ".join(map(str, args)), p.stdout, p.stderr))
        return p.stdout

    def start_savers(self, world):
        """world ranks in save mode; returns (procs, {rank: pid}, text of their output so far).
        Returns once every rank's periodic saves are committed and its arena is prepared and
        warmed (libft.so's "prepared in" and "touched in" lines): a just-in-time save comes long
        after start-up (a hang minutes into training), as the termination save's figure does.
        Saves posted while the arena was still being populated beside them could pay for it
        (register_s and prepare_s's cost, reported on their own). A series' first saves were
        still slow in one run of three after this wait (bench/RESULTS.md, fourteenth session):
        that cause is not known yet."""
        procs = []
        for r in range(world):
            env = self.env(r, world)
            env["FT_LOG_LEVEL"] = "info"
            procs.append(subprocess.Popen([self.rank_bin, "--mode", "save", "--bytes", str(BYTES), "--steps",
                                           str(STEPS)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        pids, text = {}, ""
        for r, p in enumerate(procs):
            for line in p.stdout:
                text += line
                m = re.match(r"ready pid=(\d+)", line)
                if m:
                    pids[r] = int(m.group(1))
                    break
            else:
                die("rank %d exited %s before it was ready:\n%s" % (r, p.wait(), text))
        self.tool_run("wait", "--arena-dir", self.arena_dir, "--job", self.job, "--ranks",
                      ",".join(map(str, range(world))), "--step", STEPS)
        for r, p in enumerate(procs):
            for pattern in (r"prepared in ([0-9.]+) s", r"touched in ([0-9.]+) s"):
                said, seconds = wait_line(p, pattern)
                if seconds is None:
                    die("rank %d ended before its arena was %s:\n%s" % (r, pattern.split()[0], said[-2000:]))
            # From here on its log is read only to keep the pipe from filling; what is not
            # information (a warning, an error) still reaches the bench's stderr.
            threading.Thread(target=drain_log, args=(p.stderr,), daemon=True).start()
        return procs, pids, text

    def stop(self, procs):
        for p in procs:
            p.stdin.close()
        for p in procs:
            if p.wait(timeout=60) != 0:
                die("a saving rank exited %d" % p.returncode)

    def saves_vs_memcpy(self, pids, threads):
        ranks = ",".join("%d:%d" % (r, pid) for r, pid in sorted(pids.items()))
        save_s, memcpy_s, acks = [], [], ""
        inside_s = []  # per save, the slowest rank's own time in it (its ack's ms=)
        cpu = CpuShare()
        for i in range(RATIO_RUNS):
            order = ("save", "memcpy") if i % 2 == 0 else ("memcpy", "save")
            for what in order:
                if what == "save":
                    out = self.tool_run("save", "--job", self.job, "--ranks", ranks, "--runs", 1)
                    save_s += values(out, "save_s")
                    inside_s.append(max(values(out, "ms") or [0]) / 1000)
                    acks = out
                else:
                    memcpy_s += values(self.tool_run("memcpy", "--bytes", BYTES, "--threads", threads, "--runs", 1),
                                       "memcpy_s")
        # The rank's own time beside the whole: a slow save that was slow inside the rank (its
        # copy, its digests) or on the way to it and back (the bell, the ack's poll).
        print("bench: %d rank(s): JIT save %s s (inside the rank %s s), memcpy %s s; last ack: %s; %s" %
              (threads, fmt(save_s), fmt(inside_s), fmt(memcpy_s), acks.strip(), cpu.summary()), flush=True)
        return median(memcpy_s) / median(save_s), save_s, memcpy_s

    def persist_vs_dd(self):
        persist_s, dd_s, direct = [], [], None
        dd_file = os.path.join(self.disk, "dd.bin")
        arena = self.arena_path(0)
        for i in range(RUNS):
            order = ("persist", "dd") if i % 2 == 0 else ("dd", "persist")
            for what in order:
                if what == "persist":
                    shutil.rmtree(self.local_dir, ignore_errors=True)
                    out = self.tool_run("persist", "--arena-dir", self.arena_dir, "--job", self.job, "--rank", 0,
                                        "--dir", self.local_dir, "--tier", "local")
                    persist_s += values(out, "persist_s")
                    direct = re.search(r"direct_io=(\d)", out).group(1)
                    offset = int(re.search(r"data_offset=(\d+)", out).group(1))
                    data_bytes = int(re.search(r"bytes=(\d+)", out).group(1))
                else:
                    if not persist_s:
                        continue  # the first dd needs the data region's offset and size
                    t0 = time.monotonic()
                    p = subprocess.run(["dd", "if=" + arena, "of=" + dd_file, "bs=4M", "oflag=direct",
                                        "iflag=skip_bytes,count_bytes", "skip=%d" % offset, "count=%d" % data_bytes],
                                       capture_output=True, text=True)
                    dd_s.append(time.monotonic() - t0)
                    if p.returncode != 0:
                        die("dd: " + p.stderr)
                    os.unlink(dd_file)
        print("bench: local tier (%s, O_DIRECT=%s) PersistCopy %s s, dd oflag=direct %s s" %
              (DISK_DIR, direct, fmt(persist_s), fmt(dd_s)), flush=True)
        return median(dd_s) / median(persist_s)

    def arena_path(self, rank, job=None, must_exist=True):
        """The arena of `rank` of this bench's job (or `job`): exactly the name libft.so gives it,
        so the training loop's arenas (another job) never stand in for it."""
        path = os.path.join(self.arena_dir, "ft-ckpt.%s.%d" % (job or self.job, rank))
        if must_exist and not os.path.exists(path):
            die("arena of rank %d not found in %s: %s" % (rank, self.arena_dir, os.listdir(self.arena_dir)))
        return path

    def plan(self, tiers):
        args = ["--arena-dir", self.arena_dir, "--job", self.job, "--node", self.node, "--ranks", "0",
                "--step", str(STEPS), "--tiers", tiers, "--local-dir", self.local_dir, "--remote-dir", self.remote_dir]
        p = subprocess.run([self.plan_tool] + args, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            die("node_plan_tool: " + p.stdout + p.stderr)
        path = re.search(r"plan (\S+)", p.stdout).group(1)
        with open(path) as f:
            return path, f.read()

    def drop_tier_caches(self):
        """Cold reads for every restore from a directory: the remote tier writes through the
        page cache, and here it shares the local disk, so its copy would otherwise be read back
        from memory. Only these files' pages are dropped (no machine-wide drop_caches)."""
        for top in (self.local_dir, self.remote_dir):
            for dirpath, _, files in os.walk(top):
                for name in files:
                    fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
                    try:
                        os.fsync(fd)
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    finally:
                        os.close(fd)

    def restore(self, plan_path, plan_text, drop_arena, runs=None):
        secs = []
        for _ in range(runs or max(3, RUNS // 2)):
            with open(plan_path, "w") as f:
                f.write(plan_text)
            self.drop_tier_caches()
            if drop_arena:
                os.unlink(self.arena_path(0))
            p = subprocess.run([self.rank_bin, "--mode", "restore", "--bytes", str(BYTES)], env=self.env(0, 1),
                               capture_output=True, text=True, timeout=600)
            if p.returncode != 0 or "verified=1" not in p.stdout:
                die("restore (%s): exit %d\n%s%s" % (plan_text.splitlines()[-2], p.returncode, p.stdout, p.stderr))
            step = re.search(r"step=(\d+)", p.stdout.split("restore_s=")[1]).group(1)
            if int(step) != STEPS:
                die("restored step %s, expected %d" % (step, STEPS))
            secs += values(p.stdout, "restore_s")
        return secs


    def register_per_gib(self, slots):
        """Seconds per GiB for a fresh arena of `slots` slots: ft_register_end (the app's path:
        create, check the room, map) and the preparation libft.so's checkpoint thread does after
        it (reserve, populate, pin; its log line), medians of RUNS ranks, each exiting after
        one step once its arena is prepared."""
        secs, prepared = [], []
        for _ in range(RUNS):
            path = self.arena_path(0, must_exist=False)
            if os.path.exists(path):
                os.unlink(path)
            env = self.env(0, 1)
            env.update({"FT_CKPT_ARENA_SLOTS": str(slots), "FT_CKPT_EVERY": "0", "FT_LOG_LEVEL": "info"})
            p = subprocess.Popen([self.rank_bin, "--mode", "save", "--bytes", str(BYTES), "--steps", "1"],
                                 env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
            got = None
            for line in p.stdout:
                if got is None:
                    got = values(line, "register_s")
                    got = got[0] if got else None
                if line.startswith("ready"):
                    break
            said, prep = wait_prepared(p)
            self.arena_pages = "huge" if "on huge pages" in said else "4k"
            p.stdin.close()
            p.stderr.read()  # drained, not closed: a log line at exit must not meet a closed pipe
            p.stdout.read()
            if p.wait(timeout=120) != 0 or got is None or prep is None:
                die("registering %d slot(s): exit %s, register_s %s, prepared in %s s" % (slots, p.returncode, got, prep))
            secs.append(got / (BYTES / float(1 << 30)))
            prepared.append(prep / (BYTES / float(1 << 30)))
        os.unlink(self.arena_path(0))
        print("bench: a fresh %d-slot arena: ft_register_end %s s per GiB; prepared beside the app (reserved, "
              "populated, pinned) in %s s per GiB" % (slots, fmt(secs), fmt(prepared)), flush=True)
        return median(secs), median(prepared)

    def memcpy_s(self):
        return values(self.tool_run("memcpy", "--bytes", BYTES, "--threads", 1, "--runs", 1), "memcpy_s")

    def memcpy_from_arena_s(self):
        return values(self.tool_run("memcpy", "--arena-dir", self.arena_dir, "--job", self.job, "--rank", 0),
                      "memcpy_s")

    def verify_copy_s(self):
        return values(self.tool_run("verify-copy", "--arena-dir", self.arena_dir, "--job", self.job, "--rank", 0),
                      "verify_copy_s")

    def termination_saves(self, runs):
        """A saving rank with no periodic save (FT_CKPT_EVERY=0) after one step, then SIGTERM:
        seconds from the signal to the committed copy (libft.so's own line), and to the process
        gone (the signal's default action after the save)."""
        commit_s, gone_s = [], []
        for _ in range(runs):
            env = self.env(0, 1)
            env.update({"FT_CKPT_EVERY": "0", "FT_LOG_LEVEL": "info"})
            p = subprocess.Popen([self.rank_bin, "--mode", "save", "--bytes", str(BYTES), "--steps", "1"],
                                 env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
            for line in p.stdout:
                if line.startswith("ready"):
                    break
            else:
                die("the terminating rank exited %s before it was ready: %s" % (p.wait(), p.stderr.read()))
            # A termination long after start-up, as in a job: its arena prepared and every page of
            # it touched (libft.so's warm-up between requests), not still preparing.
            before, _ = wait_prepared(p)
            warmed, _ = wait_line(p, r"touched in ([0-9.]+) s")
            before += warmed
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=120)
            gone_s.append(time.monotonic() - t0)
            err = before + p.stderr.read()
            p.stdin.close()
            m = re.search(r"termination save committed .* ([0-9.]+) s after (?:the signal|it was asked for)", err)
            if rc != -signal.SIGTERM or not m:
                die("termination save: exit %s, no committed copy said:\n%s" % (rc, err[-2000:]))
            commit_s.append(float(m.group(1)))
            self.tool_run("wait", "--arena-dir", self.arena_dir, "--job", self.job, "--ranks", "0", "--step", 1,
                          "--timeout-s", 5)
        print("bench: termination save of %d MiB: committed %s s after SIGTERM, process gone after %s s" %
              (BYTES >> 20, fmt(commit_s), fmt(gone_s)), flush=True)
        return median(commit_s), median(gone_s)


def wait_line(p, pattern):
    """Reads a rank's stderr (FT_LOG_LEVEL=info) up to the first line matching `pattern`: (the text
    read, the float its group 1 says; None when the rank ended first)."""
    text = ""
    for line in p.stderr:
        text += line
        m = re.search(pattern, line)
        if m:
            return text, float(m.group(1))
    return text, None


def drain_log(stream):
    for line in stream:
        if not re.match(r"^\S+ I ", line):
            sys.stderr.write(line)


def wait_prepared(p):
    """Up to libft.so's line saying the rank's arena was prepared beside the app (wait_line)."""
    return wait_line(p, r"prepared in ([0-9.]+) s")


def every_step_snapshots(b):
    """Interleaved pairs of training runs (snapshot every step, then none, or the other way
    round): the host time in ft_step_done and the step-time ratio."""
    done_ms, ratios, taken = [], [], []
    for i in range(RUNS):
        order = (1, 0) if i % 2 == 0 else (0, 1)
        step_s = {}
        for every in order:
            env = b.env(0, 1)
            env.update({"FT_JOB": b.job + "-train", "FT_CKPT_EVERY": str(every), "FT_LOG_LEVEL": "info"})
            p = subprocess.run([b.rank_bin, "--mode", "train", "--bytes", str(BYTES), "--steps", str(TRAIN_STEPS),
                                "--compute-ms", str(TRAIN_COMPUTE_MS)], env=env, capture_output=True, text=True,
                               timeout=900)
            if p.returncode != 0:
                die("train (FT_CKPT_EVERY=%d): exit %d\n%s%s" % (every, p.returncode, p.stdout, p.stderr[-2000:]))
            step_s[every] = values(p.stdout, "step_s")[0]
            if every == 1:
                done_ms += values(p.stdout, "step_done_ms")
                taken.append(len(re.findall(r"periodic save: saved step=", p.stderr)))
        ratios.append(step_s[1] / step_s[0])
    # The training runs' arena (their own job) is not the measuring runs' to find.
    train_arena = b.arena_path(0, job=b.job + "-train", must_exist=False)
    if os.path.exists(train_arena):
        os.unlink(train_arena)
    print("bench: training loop, %d MiB, %d steps of %.0f ms compute: ft_step_done with a snapshot every step "
          "median %.3f ms, max %.3f ms; step time ratio (every step / none) %s; snapshots taken per run %s of %d" %
          (BYTES >> 20, TRAIN_STEPS, TRAIN_COMPUTE_MS, median(done_ms), max(done_ms), fmt(ratios), taken,
           TRAIN_STEPS), flush=True)
    return median(done_ms), median(ratios), min(ratios), max(ratios)


def replicate_vs_socket(b, build):
    """replicate_gbps (median of RUNS buddy-copy pulls between two real ftworkers) and pull_bench's
    socket_gbps for the same bytes."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from redis_fixture import RedisServer  # noqa: E402
    ftworker = os.path.join(os.path.abspath(build), "ftworker", "ftworker")
    pull_bench = os.path.join(os.path.abspath(build), "bench", "pull_bench")
    redis = RedisServer()
    redis.start()
    db = redis.client()
    db.command("SET", "ft:{%s}:transfer:secret" % b.job, "ab" * 32)
    workers, logs = [], []
    replica_dir = tempfile.mkdtemp(prefix="ft-bench-replica-", dir=b.arena_root)

    def worker(node, arena_dir, extra):
        log = tempfile.NamedTemporaryFile("w+", prefix="ft-bench-worker-%s-" % node, suffix=".log", delete=False)
        e = dict(os.environ)
        e.update({"FT_REDIS_PASSWORD": redis.password, "FT_LISTEN": "127.0.0.1", "FT_CKPT_ARENA_DIR": arena_dir,
                  "FT_LOG_LEVEL": "info"})
        e.update(extra)
        p = subprocess.Popen([ftworker, "--job", b.job, "--node", node, "--redis", redis.url], env=e,
                             stdout=log, stderr=subprocess.STDOUT)
        workers.append(p)
        logs.append(log.name)
        return p, log.name

    def stop(p):
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    procs, _, _ = b.start_savers(1)
    gbps = []
    try:
        worker("node0", b.arena_dir, {})
        for run in range(RUNS):
            shutil.rmtree(replica_dir, ignore_errors=True)
            os.makedirs(replica_dir, mode=0o700)
            p, log = worker("node1", replica_dir, {"FT_CKPT_REPLICATE_EVERY": "1"})
            deadline = time.monotonic() + 300
            got = None
            while got is None and time.monotonic() < deadline:
                with open(log) as f:
                    m = re.search(r"buddy copy of rank 0 step \d+ pulled from node0 \((\d+) bytes, ([0-9.]+) s, "
                                  r"([0-9.]+) Gbit/s;", f.read())
                if m:
                    got = float(m.group(3))
                elif p.poll() is not None:
                    die("node1's ftworker exited %d" % p.returncode)
                else:
                    time.sleep(0.1)
            if got is None:
                die("node1's ftworker pulled no buddy copy within 300 s (its log: %s)" % log)
            gbps.append(got)
            stop(p)
        print("bench: buddy copies of %d MiB from node0's worker to node1's: %s Gbit/s" % (BYTES >> 20, fmt(gbps)),
              flush=True)
    finally:
        for p in workers:
            if p.poll() is None:
                stop(p)
        b.stop(procs)
        redis.stop()
        shutil.rmtree(replica_dir, ignore_errors=True)
        for path in logs:
            os.unlink(path)
    e = dict(os.environ)
    e["LD_LIBRARY_PATH"] = b.gpusim
    out = subprocess.run([pull_bench, "--bytes", str(BYTES), "--runs", str(RUNS)], env=e, capture_output=True,
                         text=True, timeout=1800)
    m = re.search(r"socket_gbps=([0-9.]+)", out.stdout)
    if out.returncode != 0 or not m:
        die("pull_bench: %s%s" % (out.stdout[-2000:], out.stderr[-2000:]))
    socket_gbps = float(m.group(1))
    print("bench: pull_bench's plain socket copy of the same bytes: %.2f Gbit/s" % socket_gbps, flush=True)
    return median(gbps), socket_gbps


def fmt(xs):
    return "[" + " ".join("%.3f" % x for x in xs) + "]"


def main():
    if len(sys.argv) != 2:
        die("usage: ckpt_bench.py BUILD_DIR")
    b = Bench(sys.argv[1])
    try:
        print("bench: %d MiB per rank, %d runs, arenas in %s%s, disk tiers in %s" %
              (BYTES >> 20, RUNS, b.arena_dir, " (a huge-page tmpfs mounted for the bench)" if b.mounted else "",
               b.disk), flush=True)
        procs, pids, text = b.start_savers(1)
        block = values(text, "block_s")
        print("bench: 1 rank: register_s=%s (sizes and maps the arena; reserved and pinned beside the app); periodic saves blocked "
              "ft_step_done %s s" % (values(text, "register_s")[0], fmt(block)), flush=True)
        save_ratio, _, _ = b.saves_vs_memcpy(pids, 1)
        persist_ratio = b.persist_vs_dd()
        b.tool_run("persist", "--arena-dir", b.arena_dir, "--job", b.job, "--rank", 0, "--dir", b.remote_dir,
                   "--tier", "remote")
        plans = {t: b.plan(t) for t in ("arena", "local", "remote")}
        b.stop(procs)
        restore = {}
        fresh_memcpy, hot_memcpy, floor = [], [], []
        for tier in ("arena", "local", "remote"):
            path, text_ = plans[tier]
            if tier == "arena":
                # Each restore from the own arena beside the two memcpy baselines, alternating.
                restore[tier] = []
                cpu = CpuShare()
                for i in range(RATIO_RUNS):
                    if i % 2 == 1:
                        fresh_memcpy += b.memcpy_from_arena_s()
                        hot_memcpy += b.memcpy_s()
                        floor += b.verify_copy_s()
                    restore[tier] += b.restore(path, text_, drop_arena=False, runs=1)
                    if i % 2 == 0:
                        floor += b.verify_copy_s()
                        fresh_memcpy += b.memcpy_from_arena_s()
                        hot_memcpy += b.memcpy_s()
                arena_cpu = cpu.summary()
            else:
                restore[tier] = b.restore(path, text_, drop_arena=True)
            print("bench: restore from %s only: %s s" % (tier, fmt(restore[tier])), flush=True)
        restore_ratio = median(fresh_memcpy) / median(restore["arena"])
        restore_ratio_hot = median(hot_memcpy) / median(restore["arena"])
        restore_floor_ratio = median(floor) / median(restore["arena"])
        floor_vs_memcpy = median(fresh_memcpy) / median(floor)
        print("bench: restore from the own arena (verified, into device buffers) %s s; memcpy of the arena's copy "
              "mapped fresh in a new process %s s (restore_ratio=%.3f); memcpy between buffers mapped before %s s "
              "(restore_ratio_hot=%.3f); %s" % (fmt(restore["arena"]), fmt(fresh_memcpy), restore_ratio,
                                                fmt(hot_memcpy), restore_ratio_hot, arena_cpu), flush=True)
        print("bench: the same copy verified without ft (each chunk checked on one thread, copied on a second as "
              "it verifies) %s s: restore_floor_ratio=%.3f (ft against it), floor_vs_memcpy=%.3f (the best a verified "
              "restore can do here against memcpy)" % (fmt(floor), restore_floor_ratio, floor_vs_memcpy), flush=True)
        os.unlink(b.arena_path(0))
        register_1, prepare_1 = b.register_per_gib(1)
        register_2, prepare_2 = b.register_per_gib(2)
        term_s, term_gone_s = b.termination_saves(RUNS)
        step_done_ms, every_ratio, every_lo, every_hi = every_step_snapshots(b)
        if RANKS4 > 1:
            os.unlink(b.arena_path(0))
            procs, pids, text = b.start_savers(RANKS4)
            block4 = values(text, "block_s")
            ratio4, _, _ = b.saves_vs_memcpy(pids, RANKS4)
            b.stop(procs)
            print("bench: %d ranks: save_ratio=%.3f (all ranks' saves at once vs %d memcpy threads) "
                  "block_s=%.4f (median of every rank's periodic saves)" % (RANKS4, ratio4, RANKS4, median(block4)),
                  flush=True)
        if os.path.exists(b.arena_path(0, must_exist=False)):
            os.unlink(b.arena_path(0))
        replicate_gbps, socket_gbps = replicate_vs_socket(b, sys.argv[1])
        print("RESULT ckpt arena_pages=%s save_ratio=%.3f restore_ratio=%.3f restore_ratio_hot=%.3f restore_floor_ratio=%.3f "
              "floor_vs_memcpy=%.3f register_s_per_gib=%.3f register_s_per_gib_1slot=%.3f "
              "prepare_s_per_gib=%.3f prepare_s_per_gib_1slot=%.3f block_s=%.4f step_done_ms=%.3f every_step_ratio=%.3f "
              "every_step_ratio_min=%.3f every_step_ratio_max=%.3f persist_ratio=%.3f restore_arena_s=%.3f "
              "restore_dir_s=%.3f restore_remote_s=%.3f term_save_s=%.3f term_exit_s=%.3f replicate_gbps=%.2f "
              "socket_gbps=%.2f replicate_ratio=%.3f" %
              (b.arena_pages, save_ratio, restore_ratio, restore_ratio_hot, restore_floor_ratio, floor_vs_memcpy, register_2, register_1, prepare_2, prepare_1, median(block), step_done_ms, every_ratio, every_lo,
               every_hi, persist_ratio, median(restore["arena"]), median(restore["local"]), median(restore["remote"]),
               term_s, term_gone_s, replicate_gbps, socket_gbps, replicate_gbps / socket_gbps),
              flush=True)
    finally:
        b.cleanup()


if __name__ == "__main__":
    main()
