"""Helpers of trainsim's end-to-end tests: locate the programs, run a job, read its results."""

import argparse
import os
import re
import signal
import subprocess
import sys
import time

CHECKSUM_RE = re.compile(
    r"trainsim rank=(\d+) dp=(\d+) tp=(\d+) pp=(\d+) steps=(\d+) checksum=([0-9a-f]{16})$")
STEP_RE = re.compile(r"trainsim rank=(\d+) step=(\d+) ms=")


def parse_paths():
    p = argparse.ArgumentParser()
    p.add_argument("--launch", required=True)
    p.add_argument("--trainsim", required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--case")
    args = p.parse_args()
    check_environment()
    return args


def check_environment():
    """The stand-ins must come first on the library path, or a GPU-less host cannot run."""
    libdir = os.environ.get("LD_LIBRARY_PATH", "").split(":")[0]
    for lib in ("libcudart.so.13", "libnccl.so.2"):
        if not os.path.exists(os.path.join(libdir, lib)):
            sys.exit("FAIL: %s not found in %r (build gpusim_cudart and gpusim_nccl first)" % (lib, libdir))


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def checksums(text):
    """rank -> (dp, tp, pp, steps, checksum) from lines that may carry a '[rank r] ' prefix."""
    out = {}
    for line in text.splitlines():
        line = re.sub(r"^\[rank \d+\] ", "", line.strip())
        m = CHECKSUM_RE.match(line)
        if m:
            r, dp, tp, pp, steps, cs = m.groups()
            out[int(r)] = (int(dp), int(tp), int(pp), int(steps), cs)
    return out


def reference(args, model_flags):
    p = subprocess.run([args.reference] + model_flags, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "trainsim_reference failed: %s" % p.stderr)
    return checksums(p.stdout)


def run_job(args, nodes, per_node, trainsim_flags, launch_flags=(), timeout=100):
    """Runs launch.py to completion: (returncode, stdout, stderr, seconds)."""
    cmd = [sys.executable, args.launch, "--nodes", str(nodes), "--ranks-per-node", str(per_node)]
    cmd += list(launch_flags) + ["--", args.trainsim] + trainsim_flags
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    secs = time.monotonic() - t0
    print("$ %s\n  -> exit %d in %.2f s" % (" ".join(cmd), p.returncode, secs), flush=True)
    return p.returncode, p.stdout, p.stderr, secs


def verify_against_reference(args, got, model_flags, world):
    """Every rank printed a checksum; data-parallel replicas agree; each equals the reference."""
    check(sorted(got) == list(range(world)), "checksum lines for ranks %s, expected %d" % (sorted(got), world))
    ref = reference(args, model_flags)
    check(sorted(ref) == sorted(got), "reference printed ranks %s" % sorted(ref))
    replicas = {}
    for rank, (dp, tp, pp, steps, cs) in got.items():
        check(ref[rank] == (dp, tp, pp, steps, cs),
              "rank %d: got %s, reference %s" % (rank, got[rank], ref[rank]))
        replicas.setdefault((tp, pp), set()).add(cs)
    for coord, values in replicas.items():
        check(len(values) == 1, "DP replicas of (tp, pp)=%s disagree: %s" % (coord, values))
    print("OK: %d ranks match trainsim_reference; %d shards, replicas identical" % (world, len(replicas)))


def pids_from(stderr_text):
    return {int(r): int(p) for r, p in
            re.findall(r"\[launch\] rank (\d+) node\d+ local \d+ pid (\d+)", stderr_text)}


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def kill_quietly(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
