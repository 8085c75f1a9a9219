#!/usr/bin/env python3
"""The sections of the GPU kit (run.sh runs each under `timeout`): python3 kit.py SECTION OUT.

  env       the machine, the driver, where libcudart.so.13 and libnccl.so.2 come from
  preload   libft.so's suites that need one GPU, on the real runtime and NCCL
  smallop   all-reduces of 8 B .. 1 MiB on a one-rank communicator, with and without libft.so
  trainsim  trainsim's step time with and without libft.so (pairs), and per-call costs
  ckpt      device<->host copies, pinning, JIT saves with 1/2/4 checksum helpers, restore,
            the termination save
  detect    a kernel hang and a host hang under ftworker + ftmaster (embedded Redis)
  torch     a small GPT in PyTorch (bf16, eager and CUDA graphs) with and without libft.so
  report    RESULTS.md from what the sections wrote

Each section prints what it does, appends its `RESULT gpu_<section> ...` line to OUT/results.txt
and a markdown paragraph to OUT/notes/<section>.md as soon as it has them, and keeps the full
output of every program it ran in OUT/logs/. Python 3 standard library only (the GPU machine
has none of ft's dependencies); the kit's binaries get the kit's lib folder and the CUDA
libraries on LD_LIBRARY_PATH, nothing else does (python3 and PyTorch keep their own).

Settings (environment): FT_GPU_KIT_QUICK=1 (the dry run: few steps, small sizes),
FT_GPU_KIT_CUDA_LIBS=DIR[:DIR] (where libcudart.so.13 and libnccl.so.2 are; otherwise searched),
FT_GPU_KIT_SECTION_S (the section's time box, set by run.sh: sections plan within it).

Also `kit.py set-runpath FILE RUNPATH` (prepare.sh): rewrites an ELF file's RUNPATH in place.
"""

import glob
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

KIT = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.join(KIT, "bin")
LIB = os.path.join(KIT, "lib")
TESTS = os.path.join(KIT, "tests")
LIBFT = os.path.join(LIB, "libft.so")
QUICK = os.environ.get("FT_GPU_KIT_QUICK", "0") == "1"
T0 = time.monotonic()
SECTION_S = float(os.environ.get("FT_GPU_KIT_SECTION_S", "600"))


def left_s():
    """Seconds left in this section's time box."""
    return SECTION_S - (time.monotonic() - T0)


class Out:
    def __init__(self, path):
        self.dir = os.path.abspath(path)
        for sub in ("", "logs", "notes", "tmp"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)

    def result(self, line):
        line = "RESULT " + line
        print(line, flush=True)
        with open(os.path.join(self.dir, "results.txt"), "a") as f:
            f.write(line + "\n")

    def note(self, section, text):
        with open(os.path.join(self.dir, "notes", section + ".md"), "a") as f:
            f.write(text.rstrip() + "\n\n")

    def log(self, name, text):
        with open(os.path.join(self.dir, "logs", name + ".log"), "a") as f:
            f.write(text)

    def tmp(self, prefix):
        return tempfile.mkdtemp(prefix=prefix, dir=os.path.join(self.dir, "tmp"))

    def config(self):
        try:
            with open(os.path.join(self.dir, "kit_env.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}


def say(msg):
    print("kit: " + msg, flush=True)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs):
    return "%.4f..%.4f" % (min(xs), max(xs)) if xs else "nan"


# Every program a section starts runs in a process group of its own (so a hung one is killed
# with its children); when run.sh's `timeout` stops the section, these go with it.
CHILDREN = []


def spawn(cmd, **kw):
    p = subprocess.Popen(cmd, start_new_session=True, **kw)
    CHILDREN.append(p)
    return p


def on_term(signum, _frame):
    for p in CHILDREN:
        if p.poll() is None:
            kill_group(p)
    print("kit: stopped by signal %d (the section's time box ran out)" % signum, flush=True)
    os._exit(124)


def run(cmd, env=None, timeout=60, stdin=None):
    """(exit code, stdout + stderr); 124 when the time ran out (the whole process group killed)."""
    try:
        p = spawn(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                  errors="replace", stdin=stdin or subprocess.DEVNULL)
    except OSError as e:
        return 127, "%s: %s\n" % (cmd[0], e)
    try:
        text, _ = p.communicate(timeout=max(1, timeout))
        return p.returncode, text
    except subprocess.TimeoutExpired:
        kill_group(p)
        text, _ = p.communicate()
        return 124, (text or "") + "\n[kit: killed after %.0f s]\n" % timeout


def kill_group(p, sig=signal.SIGKILL):
    try:
        os.killpg(p.pid, sig)
    except OSError:
        pass


def stop(p, grace=10):
    if p is None or p.poll() is not None:
        return
    kill_group(p, signal.SIGTERM)
    try:
        p.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        kill_group(p)
        p.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kv(text, key):
    return [float(v) for v in re.findall(r"\b%s=([0-9.]+)" % re.escape(key), text)]


def kit_env(cfg, preload=False, extra=None):
    """The environment of a kit binary: the kit's libraries and the CUDA ones on the library
    path, the kit's bin first on PATH (ftmaster starts the kit's redis-server), libft.so
    preloaded when asked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FT_GPU_KIT_")}  # not ft's settings
    env.pop("LD_PRELOAD", None)
    env["LD_LIBRARY_PATH"] = ":".join([LIB] + cfg.get("cuda_dirs", []))
    env["PATH"] = BIN + ":" + env.get("PATH", "/usr/bin:/bin")
    # gpusim (the dry run) runs trainsim's kernels from this library; a GPU ignores it.
    env["GPUSIM_KERNEL_LIBS"] = os.path.join(LIB, "libtrainsim_kernels.so")
    env.setdefault("FT_LOG_LEVEL", "warn")
    if preload:
        env["LD_PRELOAD"] = LIBFT
    env.update(extra or {})
    return env


# ---- env --------------------------------------------------------------------------------------

def site_dirs():
    import site
    dirs = []
    try:
        dirs += site.getsitepackages()
    except AttributeError:
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    dirs += [p for p in sys.path if p.endswith("-packages")]
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def find_cuda_libs():
    """{name: (path, where it was found)} for libcudart.so.13 and libnccl.so.2."""
    wanted = ("libcudart.so.13", "libnccl.so.2")
    override = os.environ.get("FT_GPU_KIT_CUDA_LIBS")
    candidates = []
    if override:
        candidates += [(d, "FT_GPU_KIT_CUDA_LIBS") for d in override.split(":") if d]
    else:
        try:
            cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
            for name in wanted:
                for m in re.finditer(r"^\s*%s \(.*x86-64.*\) => (\S+)" % re.escape(name), cache, re.M):
                    candidates.append((os.path.dirname(m.group(1)), "ldconfig -p"))
        except (OSError, subprocess.SubprocessError):
            pass
        for pattern in ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/*/lib", "/usr/local/cuda-*/lib64",
                        "/usr/local/cuda-*/targets/*/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/lib"):
            candidates += [(d, "CUDA toolkit / system") for d in sorted(glob.glob(pattern))]
        for sp in site_dirs():  # the PyTorch wheel's own (nvidia-*-cu13 packages), then torch/lib
            for pattern in ("nvidia/*/lib", "nvidia/*/*/lib", "torch/lib"):
                candidates += [(d, "python wheel " + os.path.relpath(d, sp)) for d in sorted(glob.glob(os.path.join(sp, pattern)))]
    found = {}
    for name in wanted:
        for d, where in candidates:
            if os.path.exists(os.path.join(d, name)):
                found[name] = (os.path.realpath(os.path.join(d, name)), where)
                break
    return found


def section_env(out):
    cfg = {}
    shell = [
        ("date", "date -u"), ("host", "hostname; uname -srm"), ("cpus", "nproc; grep -m1 'model name' /proc/cpuinfo"),
        ("memory", "free -g"), ("shm", "df -h /dev/shm /tmp"), ("glibc", "ldd --version | head -n 1"),
        ("python", "python3 --version"), ("nvidia-smi", "nvidia-smi"),
        ("gpu", "nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max,"
                "clocks.max.sm,power.limit --format=csv"),
        ("kit", "head -n 5 %s/MANIFEST.txt" % KIT),
    ]
    for label, cmd in shell:
        rc, text = run(["sh", "-c", cmd], timeout=20)
        print("---- %s (%s)\n%s" % (label, cmd, text.rstrip()), flush=True)
        out.log("env", "---- %s\n%s\n" % (cmd, text))
        if label == "gpu" and rc == 0:
            lines = text.strip().splitlines()
            cfg["gpu_csv"] = lines[-1] if lines else ""
    libs = find_cuda_libs()
    cfg["cuda_libs"] = {k: {"path": v[0], "from": v[1]} for k, v in libs.items()}
    cfg["cuda_dirs"] = list(dict.fromkeys(os.path.dirname(v[0]) for v in libs.values()))
    for name in ("libcudart.so.13", "libnccl.so.2"):
        if name in libs:
            say("%s: %s (found through %s)" % (name, libs[name][0], libs[name][1]))
        else:
            say("%s: NOT FOUND (set FT_GPU_KIT_CUDA_LIBS=DIR)" % name)
    with open(os.path.join(out.dir, "kit_env.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    # Do the kit's binaries load here? (a library the image lacks and the kit does not carry)
    missing = []
    for f in sorted(glob.glob(os.path.join(BIN, "*")) + glob.glob(os.path.join(TESTS, "*"))):
        rc, text = run(["ldd", f], env=kit_env(cfg), timeout=10)
        missing += ["%s: %s" % (os.path.basename(f), l.split()[0]) for l in text.splitlines() if "not found" in l]
    for m in missing:
        say("cannot load: " + m)
    rc, info = run([os.path.join(BIN, "kit_bench"), "info"], env=kit_env(cfg), timeout=60)
    print(info.rstrip(), flush=True)
    out.log("env", info)
    m = re.search(r'cuda_runtime=(\d+) cuda_driver=(\d+) nccl=(\d+) devices=(\d+) device="([^"]*)" memory_gib=([0-9.]+)', info)
    if m:
        cfg.update(runtime=int(m.group(1)), driver=int(m.group(2)), nccl=int(m.group(3)), devices=int(m.group(4)),
                   device=m.group(5), memory_gib=float(m.group(6)))
    with open(os.path.join(out.dir, "kit_env.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    device = cfg.get("device", "unknown").replace(" ", "_")
    out.result("gpu_env device=%s devices=%s cuda_runtime=%s cuda_driver=%s nccl=%s cudart=%s nccl_lib=%s missing_libs=%d"
               % (device, cfg.get("devices", "?"), cfg.get("runtime", "?"), cfg.get("driver", "?"), cfg.get("nccl", "?"),
                  cfg["cuda_libs"].get("libcudart.so.13", {}).get("path", "none"),
                  cfg["cuda_libs"].get("libnccl.so.2", {}).get("path", "none"), len(missing)))
    out.note("env", "Device: %s (%s GiB), %d device(s); CUDA runtime %s, driver %s, NCCL %s. `nvidia-smi`: %s. "
             "libcudart.so.13 from %s (%s), libnccl.so.2 from %s (%s).%s"
             % (cfg.get("device", "?"), cfg.get("memory_gib", "?"), cfg.get("devices", 0), cfg.get("runtime", "?"),
                cfg.get("driver", "?"), cfg.get("nccl", "?"), cfg.get("gpu_csv", "-"),
                cfg["cuda_libs"].get("libcudart.so.13", {}).get("path", "-"),
                cfg["cuda_libs"].get("libcudart.so.13", {}).get("from", "-"),
                cfg["cuda_libs"].get("libnccl.so.2", {}).get("path", "-"),
                cfg["cuda_libs"].get("libnccl.so.2", {}).get("from", "-"),
                (" Binaries that could not load: " + "; ".join(missing) + ".") if missing else ""))
    return 0 if m else 1


# ---- preload ----------------------------------------------------------------------------------

# name, binary, gtest filter, environment; the longest suite last. What is left out and why: two-rank communicators in
# one process (ncclCommInitAll over two devices; the machine has one), a kernel registered with
# a fake fat binary (gpusim accepts it, a real runtime does not), host buffers passed to NCCL
# (gpusim's device memory is host memory), gpusim's own fault hooks (rules_test's launch
# delays and violation counters, the copy-failure shim).
PRELOAD_SUITES = [
    ("ckpt_save", "preload_ckpt_test", "CkptSave.BadArgumentsAreRefusedWithAReason:CkptSave.RegistrationReservesTheArena:"
     "CkptSave.ForkedChildIsDisabled", {"FT_JOB": "preload_ckpt_save"}),
    ("ckpt_periodic", "preload_ckpt_test", "CkptPeriodic.*", {"FT_JOB": "preload_ckpt_periodic", "FT_CKPT_EVERY": "2"}),
    ("ckpt_periodic_checksum_threads", "preload_ckpt_test", "CkptPeriodic.*",
     {"FT_JOB": "preload_ckpt_periodic_checksum_threads", "FT_CKPT_EVERY": "2", "FT_CKPT_CHECKSUM_THREADS": "3"}),
    ("ckpt_restore", "preload_ckpt_test", "CkptRestore.*", {"FT_JOB": "preload_ckpt_restore", "FT_CKPT_EVERY": "3"}),
    ("ckpt_nothing", "preload_ckpt_test", "CkptNothing.*", {"FT_JOB": "preload_ckpt_nothing"}),
    ("ckpt_disabled", "preload_ckpt_test", "CkptDisabled.*", {"FT_JOB": "preload_ckpt_disabled", "FT_ENABLE": "0"}),
    ("late_load", "preload_late_load_test", None, {"FT_JOB": "preload_late_load_test"}),
    ("behavior", "preload_behavior_test",
     "-Behavior.InitAllAndAGroupSpanningTwoCommunicators:Behavior.StartedMeansTheStreamReachedTheOp:"
     "Behavior.KernelLaunchesAreCountedPerStreamAndSampled",
     {"FT_JOB": "preload_behavior_test", "FT_KERNEL_SAMPLE": "4", "FT_TOTAL_STEPS": "500"}),
]


def section_preload(out):
    cfg = out.config()
    arenas = tempfile.mkdtemp(prefix="ft-kit-preload-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    passed = failed = 0
    failures, broken, ran = [], [], []
    try:
        for name, binary, gfilter, extra in PRELOAD_SUITES:
            if left_s() < 8:
                broken.append(name + ":no-time")
                continue
            if binary == "preload_ckpt_test":  # as CMake runs them (preload/tests/CMakeLists.txt)
                extra = dict(extra, FT_RANK="0", FT_NODE_ID="ckpt-node", FT_CKPT_CHUNK="1mb", FT_CKPT_ARENA_DIR=arenas)
            env = kit_env(cfg, preload=True, extra=dict(extra, FT_LOG_LEVEL="error"))
            cmd = [os.path.join(TESTS, binary)]
            if gfilter:
                cmd.append("--gtest_filter=" + gfilter)
            else:
                cmd += [os.path.join(LIB, "libft_late_cuda.so"), os.path.join(LIB, "libft_late_nccl.so")]
            t = time.monotonic()
            rc, text = run(cmd, env=env, timeout=min(25, left_s() - 3))
            out.log("preload_" + name, text)
            ok = len(re.findall(r"^\[       OK \] ", text, re.M))
            bad = sorted(set(re.findall(r"^\[  FAILED  \] (\S+) \(", text, re.M)))
            if gfilter is None:  # a plain program: its exit status is the verdict
                ok, bad = (1, []) if rc == 0 else (0, ["late_load"])
            passed += ok
            failed += len(bad)
            failures += bad
            if rc != 0 and not bad:
                broken.append("%s:rc=%d" % (name, rc))
            ran.append(name)
            say("preload %s: %d passed, %d failed, exit %d, %.1f s%s" % (name, ok, len(bad), rc, time.monotonic() - t,
                                                                   (" — " + ", ".join(bad)) if bad else ""))
            if rc != 0:
                print("\n".join(text.splitlines()[-25:]), flush=True)
    finally:
        shutil.rmtree(arenas, ignore_errors=True)
    out.result("gpu_preload passed=%d failed=%d suites=%d broken=%s failed_tests=%s"
               % (passed, failed, len(ran), ",".join(broken) or "none", ",".join(failures) or "none"))
    out.note("preload", "libft.so's suites on the real runtime and NCCL (single-rank communicators; `kit.py` lists "
             "what was left out and why: two-rank communicators in one process, fake fat binaries, host buffers "
             "given to NCCL, gpusim's fault hooks): %d tests passed, %d failed (%s)%s. Suites: %s."
             % (passed, failed, ", ".join(failures) or "none",
                ("; did not finish: " + ", ".join(broken)) if broken else "", ", ".join(ran)))
    return 0


# ---- smallop ----------------------------------------------------------------------------------

def section_smallop(out):
    cfg = out.config()
    runs = 1 if QUICK else 4
    iters = 200 if QUICK else 2000
    sizes = "8,64,512,4096,32768,262144,1048576"
    data = {False: {}, True: {}}  # preload -> bytes -> {"sync": [], "queued": []}
    done = 0
    for i in range(runs):
        for preload in ((False, True) if i % 2 == 0 else (True, False)):
            if left_s() < 10:
                break
            rc, text = run([os.path.join(BIN, "kit_bench"), "allreduce", "--sizes", sizes, "--iters", str(iters)],
                           env=kit_env(cfg, preload=preload, extra={"FT_JOB": "kit-smallop-%d" % os.getpid()}),
                           timeout=min(60, left_s() - 3))
            out.log("smallop", "---- run %d preload=%s exit %d\n%s" % (i, preload, rc, text))
            if rc != 0:
                say("kit_bench allreduce (preload=%s) exit %d:\n%s" % (preload, rc, text[-2000:]))
                continue
            for m in re.finditer(r"bytes=(\d+) sync_us=([0-9.]+) queued_us=([0-9.]+)", text):
                d = data[preload].setdefault(int(m.group(1)), {"sync": [], "queued": []})
                d["sync"].append(float(m.group(2)))
                d["queued"].append(float(m.group(3)))
        done += 1
    sizes_done = sorted(set(data[False]) & set(data[True]))
    if not sizes_done:
        out.result("gpu_smallop status=failed")
        return 1
    rows, fields = [], []
    for b in sizes_done:
        so, sw = median(data[False][b]["sync"]), median(data[True][b]["sync"])
        qo, qw = median(data[False][b]["queued"]), median(data[True][b]["queued"])
        rows.append("| %d | %.2f | %.2f | %+.2f | %.2f | %.2f | %+.2f |" % (b, so, sw, sw - so, qo, qw, qw - qo))
        fields.append("%dB=%.2f/%.2f" % (b, sw - so, qw - qo))
    n = min(len(data[False][sizes_done[0]]["sync"]), len(data[True][sizes_done[0]]["sync"]))
    out.result("gpu_smallop runs=%d added_us_sync/queued %s base_sync_us_8B=%.2f base_queued_us_8B=%.2f"
               % (n, " ".join(fields), median(data[False][sizes_done[0]]["sync"]), median(data[False][sizes_done[0]]["queued"])))
    out.note("smallop", "All-reduce (float32, sum) on a one-rank communicator, `kit_bench allreduce`, %d alternating runs "
             "each way, medians. *sync*: one all-reduce then `cudaStreamSynchronize`, per op; *queued*: 500 enqueued "
             "then one synchronize, per op.\n\n| bytes | sync µs without | with | added | queued µs without | with | added |\n"
             "|---|---|---|---|---|---|---|\n%s" % (n, "\n".join(rows)))
    return 0


# ---- trainsim ---------------------------------------------------------------------------------

def trainsim_step_ms(cfg, preload, arena_dir, flags, skip, timeout):
    env = kit_env(cfg, preload=preload, extra={
        "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
        "FT_JOB": "kit-trainsim-%d" % os.getpid(), "FT_NODE_ID": "node0", "FT_CKPT_ARENA_DIR": arena_dir})
    rc, text = run([os.path.join(BIN, "trainsim")] + flags + ["--verbose", "--ft", "save"], env=env, timeout=timeout)
    steps = [float(m.group(2)) for m in re.finditer(r"step=(\d+) ms=([0-9.]+)", text) if int(m.group(1)) >= skip]
    return (median(steps) if rc == 0 and steps else None), rc, text


def section_trainsim(out):
    cfg = out.config()
    base, _ = arena_place(256 << 20)
    arena = tempfile.mkdtemp(prefix="ft-kit-trainsim-", dir=base)
    if QUICK:
        flags, skip, pairs, calls = ["--steps", "8", "--compute-ms", "2", "--layers", "2", "--param-bytes", "1mb"], 2, 1, 2000
    else:
        flags, skip, pairs, calls = ["--steps", "80", "--compute-ms", "5", "--layers", "8", "--param-bytes", "64mb",
                                     "--hidden", "65536"], 10, 8, 20000
    # Per call first (the existing overhead_bench): kernel launch and ncclAllReduce enqueue.
    per = {False: {"launch": [], "nccl": []}, True: {"launch": [], "nccl": []}}
    for i in range(1 if QUICK else 2):
        for preload in ((False, True) if i % 2 == 0 else (True, False)):
            rc, text = run([os.path.join(BIN, "overhead_bench"), str(calls)],
                           env=kit_env(cfg, preload=preload, extra={"FT_JOB": "kit-ovh-%d" % os.getpid()}), timeout=30)
            out.log("trainsim", "---- overhead_bench preload=%s exit %d\n%s" % (preload, rc, text))
            if rc == 0:
                per[preload]["launch"] += kv(text, "launch_ns")
                per[preload]["nccl"] += kv(text, "nccl_ns")
    launch_added = median(per[True]["launch"]) - median(per[False]["launch"])
    nccl_added = median(per[True]["nccl"]) - median(per[False]["nccl"])
    say("per call: kernel launch %.0f -> %.0f ns, ncclAllReduce enqueue %.0f -> %.0f ns" % (
        median(per[False]["launch"]), median(per[True]["launch"]), median(per[False]["nccl"]), median(per[True]["nccl"])))
    ratios, without, with_ = [], [], []
    last = 10.0
    for i in range(pairs):
        if left_s() < last + 5:
            say("trainsim: %d pairs done, no time for more" % i)
            break
        t = time.monotonic()
        got = {}
        for preload in ((False, True) if i % 2 == 0 else (True, False)):
            ms, rc, text = trainsim_step_ms(cfg, preload, arena, flags, skip, min(60, left_s() - 2))
            out.log("trainsim", "---- pair %d preload=%s exit %d\n%s" % (i, preload, rc, text))
            if ms is None:
                say("trainsim (preload=%s) exit %d:\n%s" % (preload, rc, text[-2000:]))
            got[preload] = ms
        last = time.monotonic() - t
        if got.get(False) and got.get(True):
            without.append(got[False])
            with_.append(got[True])
            ratios.append(got[True] / got[False])
            say("pair %d: %.3f ms without, %.3f ms with, ratio %.4f (%.1f s)" % (i + 1, got[False], got[True], ratios[-1], last))
    shutil.rmtree(arena, ignore_errors=True)
    if not ratios:
        out.result("gpu_overhead_trainsim status=failed launch_added_ns=%.0f nccl_added_ns=%.0f" % (launch_added, nccl_added))
        return 1
    out.result("gpu_overhead_trainsim step_ratio=%.4f step_ratio_spread=%s pairs=%d step_ms=%.3f launch_added_ns=%.0f "
               "nccl_added_ns=%.0f" % (median(ratios), spread(ratios), len(ratios), median(without), launch_added, nccl_added))
    out.note("trainsim", "trainsim, one rank (%s), `--ft save` (its state registered with libft.so), %d pairs of runs "
             "without and with `LD_PRELOAD=libft.so`, order alternating: median step %.3f ms without, %.3f ms with; "
             "ratio per pair: median **%.4f**, spread %s. Per call (`overhead_bench`, one-rank communicator): kernel "
             "launch %.0f → %.0f ns (%+.0f), `ncclAllReduce` enqueue %.0f → %.0f ns (%+.0f)."
             % (" ".join(flags), len(ratios), median(without), median(with_), median(ratios), spread(ratios),
                median(per[False]["launch"]), median(per[True]["launch"]), launch_added,
                median(per[False]["nccl"]), median(per[True]["nccl"]), nccl_added))
    return 0


# ---- ckpt -------------------------------------------------------------------------------------

def arena_place(want_bytes):
    """(directory for the host arenas, bytes per rank): /dev/shm when it holds two slots of the
    size (the arena's layout), else a smaller size, else the temporary directory."""
    def free(path):
        try:
            st = os.statvfs(path)
            return st.f_bavail * st.f_frsize
        except OSError:
            return 0
    size = want_bytes
    while size >= (64 << 20):
        if free("/dev/shm") > 2 * size + (512 << 20):
            return "/dev/shm", size
        size //= 2
    return tempfile.gettempdir(), 64 << 20


def huge_page_dir(nbytes):
    """A tmpfs mounted huge=within_size for the arenas (docs/checkpoints.md, "Arenas on huge
    pages"), big enough for two slots; None where it cannot be mounted (not root)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return None
    root = tempfile.mkdtemp(prefix="ft-kit-huge-")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777,huge=within_size,size=%d" % (2 * nbytes + (1 << 30)),
                        "tmpfs", root], capture_output=True, text=True)
    if p.returncode != 0:
        say("ckpt: no huge-page tmpfs for the arenas (%s)" % (p.stderr.strip() or p.returncode))
        os.rmdir(root)
        return None
    return root


def section_ckpt(out):
    cfg = out.config()
    want = (64 << 20) if QUICK else (2 << 30)
    base, nbytes = arena_place(want)
    gib = nbytes / float(1 << 30)
    runs = 1 if QUICK else 5
    say("checkpoint of %d MiB per rank, arenas in %s" % (nbytes >> 20, base))
    rc, text = run([os.path.join(BIN, "kit_bench"), "copy", "--bytes", str(nbytes), "--runs", str(runs)],
                   env=kit_env(cfg), timeout=min(90, left_s() - 5))
    out.log("ckpt", "---- kit_bench copy exit %d\n%s" % (rc, text))
    print(text.rstrip(), flush=True)
    copy = {k: (kv(text, k) or [float("nan")])[0] for k in
            ("d2h_gbps", "h2d_gbps", "d2h_registered_gbps", "host_alloc_s_per_gib", "host_register_s_per_gib")}
    tool = os.path.join(BIN, "ckpt_bench_tool")
    per_threads = {}
    term = "not measured"
    term_save_s = float("nan")
    arena_dir = tempfile.mkdtemp(prefix="ft-kit-ckpt-", dir=base)
    huge_root = huge_page_dir(nbytes)
    huge = {}  # the default pass again with the arenas on huge pages: its figures, *_huge
    try:
        # 0: the default (helpers sized by libft.so to the rank's share of the cores), which is
        # what the RESULT's save_ratio and restore_ratio are; then fixed counts to compare; last,
        # the default with the arenas on a huge-page tmpfs (where one can be mounted).
        passes = [(t, arena_dir) for t in ((0, 1) if QUICK else (0, 1, 4))]
        if huge_root:
            passes.append((0, tempfile.mkdtemp(prefix="ft-kit-ckpt-", dir=huge_root)))
        for threads, pass_dir in passes:
            on_huge = pass_dir != arena_dir
            if left_s() < 20:
                say("ckpt: no time left for %s checksum helpers%s" % (threads or "the default",
                                                                     " on huge pages" if on_huge else ""))
                break
            job = "kit-ckpt-%d-t%d%s" % (os.getpid(), threads, "-huge" if on_huge else "")
            # Info: libft.so's line saying how long the arena's preparation beside the app took.
            extra = {"FT_JOB": job, "FT_NODE_ID": "node0", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
                     "LOCAL_WORLD_SIZE": "1", "FT_CKPT_ARENA_DIR": pass_dir, "FT_CKPT_EVERY": "1",
                     "FT_RESTORE_WAIT": "30s", "FT_LOG_LEVEL": "info"}
            if threads > 0:
                extra["FT_CKPT_CHECKSUM_THREADS"] = str(threads)
            env = kit_env(cfg, preload=True, extra=extra)
            r = {}
            saver = spawn([os.path.join(BIN, "ckpt_bench_rank"), "--mode", "save", "--bytes", str(nbytes),
                           "--steps", "3", "--gap-ms", "300"], env=env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            lines, pid = "", None
            for line in saver.stdout:
                lines += line
                m = re.match(r"ready pid=(\d+)", line)
                if m:
                    pid = int(m.group(1))
                    break
            out.log("ckpt", "---- ckpt_bench_rank save, %d helpers\n%s" % (threads, lines))
            if pid is None:
                say("ckpt_bench_rank (%d helpers) exited before it was ready:\n%s" % (threads, lines[-2000:]))
                stop(saver)
                continue
            r["register_s"] = kv(lines, "register_s")[0]
            prepared = re.search(r"prepared in ([0-9.]+) s", lines)
            r["prepare_s"] = float(prepared.group(1)) if prepared else float("nan")
            r["block_s"] = median(kv(lines, "block_s"))
            rc, text = run([tool, "wait", "--arena-dir", pass_dir, "--job", job, "--ranks", "0", "--step", "3",
                            "--timeout-s", "60"], env=kit_env(cfg), timeout=70)
            rc, text = run([tool, "save", "--job", job, "--ranks", "0:%d" % pid, "--runs", str(max(2, runs - 2))],
                           env=kit_env(cfg), timeout=min(120, left_s() - 5))
            out.log("ckpt", "---- JIT saves, %d helpers, exit %d\n%s" % (threads, rc, text))
            saves = kv(text, "save_s")
            if saves:
                r["save_s"] = median(saves)
                r["jit_gbps"] = nbytes / 1e9 / r["save_s"]
            saver.stdin.close()
            try:
                saver.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stop(saver)
            # Restore from the rank's own arena (once: the helpers are the save's): the plan file
            # ftworker would write, then a new process restores and checks every byte.
            if threads != 0:
                per_threads[threads] = r
                say("%s checksum helpers: register %.3f s, periodic save blocks %.4f s, JIT save %s s (%s GB/s)"
                    % (threads or "default", r["register_s"], r["block_s"], fmt(r.get("save_s")), fmt(r.get("jit_gbps"))))
                remove_arenas(pass_dir, job)
                continue
            plan_tool = os.path.join(BIN, "node_plan_tool")
            rc, text = run([plan_tool, "--arena-dir", pass_dir, "--job", job, "--node", "node0", "--ranks", "0",
                            "--step", "3", "--tiers", "arena", "--local-dir", os.path.join(pass_dir, "none-local"),
                            "--remote-dir", os.path.join(pass_dir, "none-remote")], env=kit_env(cfg), timeout=60)
            out.log("ckpt", "---- node_plan_tool exit %d\n%s" % (rc, text))
            rc, text = run([os.path.join(BIN, "ckpt_bench_rank"), "--mode", "restore", "--bytes", str(nbytes)],
                           env=env, timeout=min(120, left_s() - 3))
            out.log("ckpt", "---- restore exit %d\n%s" % (rc, text))
            if rc == 0 and "verified=1" in text:
                r["restore_s"] = kv(text, "restore_s")[0]
                r["restore_gbps"] = nbytes / 1e9 / r["restore_s"]
            else:
                say("restore (%d helpers) failed, exit %d:\n%s" % (threads, rc, text[-1500:]))
            if on_huge:
                huge = r
            else:
                per_threads[threads] = r
            say("%s checksum helper(s)%s: register %.3f s, periodic save blocks %.4f s, JIT save %s s (%s GB/s), "
                "restore %s s (%s GB/s)" % (threads or "default", " on huge pages" if on_huge else "", r["register_s"], r["block_s"], fmt(r.get("save_s")),
                                           fmt(r.get("jit_gbps")), fmt(r.get("restore_s")), fmt(r.get("restore_gbps"))))
            remove_arenas(pass_dir, job)
        # A snapshot every step against none, same training loop (the optimizer writes every
        # registered byte each step): step_done_ms and every_step_ratio.
        train = {}
        steps = 4 if QUICK else 8
        compute_ms = 100 if QUICK else 1000
        for every in (1, 0):
            if left_s() < 2 * steps * compute_ms / 1000.0 + 20:
                say("ckpt: no time left for the training loop (FT_CKPT_EVERY=%d)" % every)
                break
            env = kit_env(cfg, preload=True, extra={
                "FT_JOB": "kit-ckpt-%d-train%d" % (os.getpid(), every), "FT_NODE_ID": "node0", "RANK": "0",
                "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "FT_CKPT_ARENA_DIR": arena_dir,
                "FT_CKPT_EVERY": str(every)})
            rc, text = run([os.path.join(BIN, "ckpt_bench_rank"), "--mode", "train", "--bytes", str(nbytes),
                            "--steps", str(steps), "--compute-ms", str(compute_ms)], env=env,
                           timeout=min(steps * compute_ms / 1000.0 * 3 + 60, left_s() - 5))
            out.log("ckpt", "---- training loop FT_CKPT_EVERY=%d exit %d\n%s" % (every, rc, text))
            if rc == 0 and kv(text, "step_s"):
                train[every] = {"step_s": kv(text, "step_s")[0], "step_done_ms": median(kv(text, "step_done_ms"))}
            remove_arenas(arena_dir, "kit-ckpt-%d-train%d" % (os.getpid(), every))
        every_step_ratio = (train[1]["step_s"] / train[0]["step_s"]) if len(train) == 2 else float("nan")
        step_done_ms = train.get(1, {}).get("step_done_ms", float("nan"))
        say("training loop of %d ms compute per step: ft_step_done with a snapshot every step %s ms, step time "
            "every step / none %s" % (compute_ms, fmt(step_done_ms), fmt(every_step_ratio)))
        term_save_s = float("nan")
        # The termination save: SIGTERM after a step, no periodic save; is a copy of the step
        # committed when the process is gone, and how long did it take to go?
        if left_s() > 15:
            job = "kit-ckpt-%d-term" % os.getpid()
            env = kit_env(cfg, preload=True, extra={
                "FT_JOB": job, "FT_NODE_ID": "node0", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
                "FT_CKPT_ARENA_DIR": arena_dir, "FT_CKPT_EVERY": "0", "FT_LOG_LEVEL": "info"})
            saver = spawn([os.path.join(BIN, "ckpt_bench_rank"), "--mode", "save", "--bytes", str(nbytes),
                           "--steps", "1"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
            lines = ""
            for line in saver.stdout:
                lines += line
                if line.startswith("ready"):
                    break
            t = time.monotonic()
            saver.send_signal(signal.SIGTERM)
            try:
                saver.wait(timeout=30)
                exit_s = time.monotonic() - t
            except subprocess.TimeoutExpired:
                stop(saver)
                exit_s = float("nan")
            rest = saver.stdout.read() if saver.stdout else ""
            said = re.search(r"termination save committed .* ([0-9.]+) s after (?:the signal|it was asked for)", rest)
            term_save_s = float(said.group(1)) if said else float("nan")
            rc, text = run([tool, "wait", "--arena-dir", arena_dir, "--job", job, "--ranks", "0", "--step", "1",
                            "--timeout-s", "3"], env=kit_env(cfg), timeout=10)
            out.log("ckpt", "---- termination: exit %s after %.3f s; wait: %s\n%s\n" % (saver.returncode, exit_s, text,
                                                                                        rest[-2000:]))
            term = ("committed step 1 %.3f s after SIGTERM (libft.so's figure), process gone %.3f s after it"
                    % (term_save_s, exit_s) if rc == 0 else
                    "no copy committed (the process was gone %.3f s after SIGTERM, exit %s): no termination save" % (exit_s, saver.returncode))
            say("termination: " + term)
    finally:
        shutil.rmtree(arena_dir, ignore_errors=True)
        if huge_root:
            subprocess.run(["umount", huge_root], capture_output=True)
            shutil.rmtree(huge_root, ignore_errors=True)
        # The terminated rank's segment: libft.so leaves it for a worker to read the death
        # from, and no worker runs here.
        for name in os.listdir("/dev/shm"):
            if name.startswith("ft.kit-ckpt-%d-" % os.getpid()):
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass
    fields = " ".join("jit_gbps_t%s=%s" % (t or "default", fmt(r.get("jit_gbps"))) for t, r in sorted(per_threads.items()))
    first = per_threads.get(0, {})
    fields += " restore_gbps=%s" % fmt(first.get("restore_gbps"))
    if huge:
        fields += " save_ratio_huge=%s restore_ratio_huge=%s prepare_s_per_gib_huge=%s" % (
            fmt(huge.get("jit_gbps", float("nan")) / copy["d2h_gbps"]),
            fmt(huge.get("restore_gbps", float("nan")) / copy["h2d_gbps"]), fmt(huge.get("prepare_s", float("nan")) / gib))
    # The names `make bench-ckpt` uses, here against the link measured in the same run.
    out.result("gpu_ckpt bytes=%d d2h_gbps=%.2f h2d_gbps=%.2f save_ratio=%s restore_ratio=%s register_s_per_gib=%s "
               "prepare_s_per_gib=%s step_done_ms=%s every_step_ratio=%s pin_alloc_s_per_gib=%.3f pin_register_s_per_gib=%.3f "
               "block_s=%s save_ratio_t1=%s %s term_save=%s term_save_s=%s"
               % (nbytes, copy["d2h_gbps"], copy["h2d_gbps"], fmt(first.get("jit_gbps", float("nan")) / copy["d2h_gbps"]),
                  fmt(first.get("restore_gbps", float("nan")) / copy["h2d_gbps"]),
                  fmt(first.get("register_s", float("nan")) / gib), fmt(first.get("prepare_s", float("nan")) / gib),
                  fmt(step_done_ms), fmt(every_step_ratio),
                  copy["host_alloc_s_per_gib"], copy["host_register_s_per_gib"], fmt(first.get("block_s")),
                  fmt(per_threads.get(1, {}).get("jit_gbps", float("nan")) / copy["d2h_gbps"]), fields,
                  "committed" if term.startswith("committed") else "none", fmt(term_save_s)))
    rows = "\n".join("| %s | %s | %s | %s | %s | %s |" % (t or "default", fmt(r.get("register_s")), fmt(r.get("block_s")),
                                                      fmt(r.get("save_s")), fmt(r.get("jit_gbps")),
                                                      fmt(r.get("restore_gbps")) if t == 0 else "-")
                     for t, r in sorted(per_threads.items()))
    out.note("ckpt", "Checkpoint of %d MiB of device memory per rank (arenas in %s). Same run, `kit_bench copy`: "
             "`cudaMemcpyAsync` device→host into `cudaHostAlloc` memory **%.2f GB/s**, host→device %.2f GB/s, device→host "
             "into `cudaHostRegister`ed memory %.2f GB/s; pinning %.3f s/GiB (`cudaHostAlloc`), %.3f s/GiB "
             "(`cudaHostRegister` of touched memory). `ckpt_bench_rank` under libft.so (`FT_CKPT_EVERY=1`), a JIT save "
             "posted as ftworker posts it, then a restore from the arena in a new process (every byte checked):\n\n"
             "| checksum helpers | register s | periodic save blocks s | JIT save s | JIT GB/s | restore GB/s |\n"
             "|---|---|---|---|---|---|\n%s\n\nTermination (SIGTERM after a step, no periodic save): %s."
             % (nbytes >> 20, base, copy["d2h_gbps"], copy["h2d_gbps"], copy["d2h_registered_gbps"],
                copy["host_alloc_s_per_gib"], copy["host_register_s_per_gib"], rows, term))
    return 0 if per_threads else 1


def remove_arenas(arena_dir, job):
    for name in os.listdir(arena_dir):
        if job in name:
            os.unlink(os.path.join(arena_dir, name))


def fmt(x):
    return "nan" if x is None or x != x else ("%.4f" % x if x < 10 else "%.2f" % x)


# ---- detect -----------------------------------------------------------------------------------

def read_env_file(path):
    values = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.strip().removeprefix("export ").partition("=")
            if key.startswith("FT_REDIS"):
                values[key] = value.strip("'\"")
    return values


def detect_case(out, cfg, fault, fault_step, compute_ms):
    work = out.tmp("detect-")
    arenas = tempfile.mkdtemp(prefix="ft-kit-detect-", dir="/dev/shm" if os.path.isdir("/dev/shm") else work)
    job = "kit-%s-%d" % (fault, os.getpid())
    env_file = os.path.join(work, "redis.env")
    settings = {"FT_JOB": job, "FT_TIMEOUT_WARMUP": "5s", "FT_TIMEOUT_MIN_SAMPLES": "5", "FT_LISTEN": "127.0.0.1",
                "FT_LOG_LEVEL": "info"}
    procs, logs = [], {}

    def start(name, cmd, env):
        logs[name] = os.path.join(work, name + ".log")
        with open(logs[name], "w") as log:
            p = spawn(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(p)
        return p

    def cli(*args):
        rc, text = run([os.path.join(BIN, "ftmaster")] + list(args) + ["--job", job, "--redis-env", env_file],
                       env=kit_env(cfg, extra=settings), timeout=15)
        return text if rc == 0 else ""

    result = {"status": "no-incident"}
    try:
        master = start("ftmaster", [os.path.join(BIN, "ftmaster"), "run", "--job", job, "--topology", "dp=2,tp=1,pp=1",
                                    "--order", "tp-dp-pp", "--redis-env", env_file], kit_env(cfg, extra=settings))
        deadline = time.monotonic() + 20
        while not os.path.exists(env_file) and master.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not os.path.exists(env_file):
            result["status"] = "master-failed"
            return result, logs
        redis = read_env_file(env_file)
        for node in ("node0", "node1"):
            os.makedirs(os.path.join(arenas, node), exist_ok=True)
            start("ftworker-" + node, [os.path.join(BIN, "ftworker"), "--job", job, "--node", node, "--redis", redis["FT_REDIS"]],
                  kit_env(cfg, extra=dict(settings, FT_REDIS_PASSWORD=redis.get("FT_REDIS_PASSWORD", ""),
                                          FT_CKPT_ARENA_DIR=os.path.join(arenas, node))))
        # Two ranks on the one GPU: each is told it is on its own host (NCCL_HOSTID), so NCCL
        # accepts two ranks of a communicator on one device and connects them through its socket
        # transport on loopback. On gpusim these variables mean nothing.
        job_env = kit_env(cfg, preload=True, extra=dict(settings, NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1",
                                                        NCCL_NET="Socket", NCCL_P2P_DISABLE="1", NCCL_SHM_DISABLE="1"))
        job_env.pop("FT_LOG_LEVEL", None)
        ranks = start("job", [sys.executable, os.path.join(KIT, "scripts", "launch.py"), "--nodes", "2",
                              "--ranks-per-node", "1", "--node-names", "node0,node1", "--keep-going", "--timeout", "150",
                              "--node-env", "FT_CKPT_ARENA_DIR=" + os.path.join(arenas, "{node}"),
                              "--node-env", "NCCL_HOSTID=ft-kit-{node}", "--",
                              os.path.join(BIN, "trainsim"), "--verbose", "--dp", "2", "--steps", "100000", "--compute-ms",
                              str(compute_ms), "--fault", fault, "--fault-rank", "1", "--fault-step", str(fault_step),
                              "--ft", "save"], job_env)
        inc, early, fault_ms = None, {}, None
        deadline = time.monotonic() + min(60, left_s() - 8)
        while time.monotonic() < deadline:
            # A job the master stopped (save-then-stop) exits right after its incident is
            # written, often within one of these polls: the incidents are read once more
            # before the exit counts as a failure.
            exited = ranks.poll() is not None and ranks.returncode not in (0,)
            if fault_ms is None:
                with open(logs["job"], errors="replace") as f:
                    m = re.search(r"injecting fault \S+ at step \d+ unix_ms=(\d+)", f.read())
                fault_ms = int(m.group(1)) if m else None
            for line in cli("incidents", "--json").splitlines():
                try:
                    i = json.loads(line)
                except ValueError:
                    continue
                if i.get("kind") not in ("hang", "host-frozen", "crash", "transport-hang"):
                    continue
                if fault_ms is None or i["decided_unix_ms"] < fault_ms:
                    early[i["id"]] = i  # decided before the fault: a false incident
                    continue
                inc = i
                break
            if inc:
                break
            if exited:
                result["status"] = "job-exited-%d" % ranks.returncode
                break
            time.sleep(0.25)
        with open(logs["job"], errors="replace") as f:
            joblog = f.read()
        steps = [float(x) for x in re.findall(r"rank=0 step=\d+ ms=([0-9.]+)", joblog)]
        result["false_incidents"] = len(early)
        for i in early.values():
            say("an incident before the fault: %s %s suspects %s" % (i["id"], i["kind"], [s["rank"] for s in i.get("suspects", [])]))
        if inc:
            result.update({"status": "incident", "kind": inc["kind"], "suspects": [s["rank"] for s in inc.get("suspects", [])],
                           "decide_ms": inc.get("decide_ms", float("nan")),
                           "fault_to_incident_ms": inc["decided_unix_ms"] - fault_ms,
                           "decision": inc.get("decision", "?")})
            time.sleep(1)
            text = cli("incidents")
            print(text.rstrip(), flush=True)
            out.log("detect", "---- %s: ftmaster incidents\n%s\n---- ftmaster checkpoints\n%s\n" % (fault, text, cli("checkpoints")))
        elif "injecting fault" not in joblog:
            result["status"] = result["status"] if result["status"] != "no-incident" else "fault-not-reached"
        if steps:
            result["step_ms"] = median(steps)
        return result, logs
    finally:
        for p in reversed(procs):
            stop(p, grace=5)
        for name, path in logs.items():
            try:
                with open(path, errors="replace") as f:
                    out.log("detect_" + fault, "---- %s\n%s\n" % (name, f.read()[-20000:]))
            except OSError:
                pass
        shutil.rmtree(arenas, ignore_errors=True)
        for name in os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []:
            if name.startswith("ft.%s." % job):
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass


def section_detect(out):
    cfg = out.config()
    fields, rows = [], []
    for fault in ("hang-kernel", "hang-host"):
        if left_s() < 20:
            fields.append("%s=no-time" % fault)
            continue
        t = time.monotonic()
        r, logs = detect_case(out, cfg, fault, fault_step=10 if QUICK else 60, compute_ms=20)
        key = fault.replace("hang-", "")
        if r["status"] == "incident":
            fields.append("%s_kind=%s %s_suspects=%s %s_fault_to_incident_ms=%.0f %s_decide_ms=%.0f %s_false_incidents=%d"
                          % (key, r["kind"], key, "+".join(map(str, r["suspects"])) or "none", key,
                             r["fault_to_incident_ms"], key, r["decide_ms"], key, r["false_incidents"]))
            rows.append("| %s on rank 1 | %s | %s | %s | %.0f | %.0f | %s |" % (
                fault, r["kind"], ",".join(map(str, r["suspects"])), r["decision"], r["fault_to_incident_ms"],
                r["decide_ms"], fmt(r.get("step_ms"))))
        else:
            fields.append("%s=%s" % (key, r["status"]))
            rows.append("| %s on rank 1 | %s | | | | | %s |" % (fault, r["status"], fmt(r.get("step_ms"))))
            for name, path in logs.items():
                try:
                    with open(path, errors="replace") as f:
                        print("---- %s (last lines)\n%s" % (name, "".join(f.readlines()[-15:])), flush=True)
                except OSError:
                    pass
        say("detect %s: %s (%.1f s)" % (fault, r, time.monotonic() - t))
    out.result("gpu_detect " + " ".join(fields))
    out.note("detect", "Two trainsim ranks (dp=2, 20 ms compute per step) on the one GPU, each told it is on a host "
             "of its own (`NCCL_HOSTID`), so NCCL accepts them and connects them over its socket transport on "
             "loopback; one ftworker per simulated node, `ftmaster run` with its embedded Redis "
             "(`FT_TIMEOUT_WARMUP=5s`, `FT_TIMEOUT_MIN_SAMPLES=5`; an incident decided before the fault would be counted as false). Rank 1 hangs at step %d; time from the fault's "
             "injection (trainsim's own clock) to the incident's decision:\n\n"
             "| fault | incident | suspects | decision | fault → incident ms | first event → decision ms | step ms |\n"
             "|---|---|---|---|---|---|---|\n%s" % (10 if QUICK else 60, "\n".join(rows)))
    return 0


# ---- torch ------------------------------------------------------------------------------------

def section_torch(out):
    probe = ("import json, torch; c = torch.cuda.is_available(); "
             "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, 'available': c, "
             "'device': torch.cuda.get_device_name(0) if c else None, "
             "'nccl': '.'.join(map(str, torch.cuda.nccl.version())) if c else None}))")
    rc, text = run([sys.executable, "-c", probe], timeout=min(120, left_s() - 5))
    out.log("torch", "---- probe exit %d\n%s" % (rc, text))
    info = None
    for line in text.splitlines():
        if line.startswith("{"):
            info = json.loads(line)
    if not info or not info.get("available"):
        why = "no PyTorch" if not info else "PyTorch %s without CUDA" % info["torch"]
        say("torch: skipped: " + why)
        out.result("gpu_overhead_torch status=skipped reason=%s" % why.replace(" ", "_"))
        out.note("torch", "The PyTorch model was not run: %s." % why)
        return 0
    say("torch %s, CUDA %s, NCCL %s on %s" % (info["torch"], info["cuda"], info["nccl"], info["device"]))
    arenas = out.tmp("torch-arenas-")
    ratios = {"eager": [], "graphs": []}
    ms = {"eager": {False: [], True: []}, "graphs": {False: [], True: []}}
    notes, seen = set(), []
    last = 40.0
    pairs = 4
    for i in range(pairs):
        if left_s() < last + 5:
            say("torch: %d pairs done, no time for more" % i)
            break
        t = time.monotonic()
        got = {}
        for preload in ((False, True) if i % 2 == 0 else (True, False)):
            # PyTorch keeps its own libraries: no kit library path.
            env = {k: v for k, v in os.environ.items() if not k.startswith("FT_GPU_KIT_")}
            env.pop("LD_PRELOAD", None)
            env.update({"FT_JOB": "kit-torch-%d" % os.getpid(), "FT_CKPT_ARENA_DIR": arenas, "FT_LOG_LEVEL": "warn",
                        "PYTHONPATH": os.path.join(KIT, "python"), "KIT_FTDUMP": os.path.join(BIN, "ftdump"),
                        "KIT_LIB": LIB})
            if preload:
                env["LD_PRELOAD"] = LIBFT
            rc, text = run([sys.executable, os.path.join(KIT, "torch_gpt.py")], env=env, timeout=min(150, left_s() - 2))
            out.log("torch", "---- pair %d preload=%s exit %d\n%s" % (i, preload, rc, text))
            got[preload] = {m.group(1): float(m.group(2)) for m in re.finditer(r"^torch mode=(\w+) step_ms=([0-9.]+)", text, re.M)}
            notes.update(re.findall(r"^torch note: (.*)$", text, re.M))
            if preload:  # what libft.so saw of the process (its segment, by ftdump)
                calls = [int(x) for x in re.findall(r"^torch ftdump: .*\bcalls=(\d+)", text, re.M)]
                entered = [int(x) for x in re.findall(r"^torch ftdump: .*\bentered=(\d+)", text, re.M)]
                seen.append("%s calls, %d collectives entered on %d communicators" % (
                    "+".join(map(str, calls)) or "no segment: 0", sum(entered), len(entered)))
            if rc != 0:
                say("torch_gpt.py (preload=%s) exit %d:\n%s" % (preload, rc, text[-3000:]))
        last = time.monotonic() - t
        for mode in ratios:
            if mode in got.get(False, {}) and mode in got.get(True, {}):
                ms[mode][False].append(got[False][mode])
                ms[mode][True].append(got[True][mode])
                ratios[mode].append(got[True][mode] / got[False][mode])
        say("pair %d (%.0f s): %s" % (i + 1, last, {m: (got.get(False, {}).get(m), got.get(True, {}).get(m)) for m in ratios}))
    shutil.rmtree(arenas, ignore_errors=True)
    fields = []
    for mode, rs in ratios.items():
        if rs:
            fields.append("%s_ratio=%.4f %s_spread=%s %s_ms=%.3f" % (mode, median(rs), mode, spread(rs), mode, median(ms[mode][False])))
        else:
            fields.append("%s=failed" % mode)
    first = re.search(r"^(\S+) calls, (\d+) collectives", seen[0]) if seen else None
    out.result("gpu_overhead_torch %s pairs=%d torch=%s libft_calls=%s libft_collectives=%s" % (
        " ".join(fields), max(len(r) for r in ratios.values()), info["torch"], first.group(1) if first else "?",
        first.group(2) if first else "?"))
    rows = "\n".join("| %s | %d | %.3f | %.3f | %.4f | %s |" % (mode, len(rs), median(ms[mode][False]), median(ms[mode][True]),
                                                            median(rs), spread(rs)) for mode, rs in ratios.items() if rs)
    out.note("torch", "PyTorch %s (CUDA %s, NCCL %s): `torch_gpt.py`, a GPT built in the script (random weights, bf16, "
             "AdamW, gradients all-reduced on a one-rank NCCL process group), eager and whole-step CUDA graphs in "
             "alternating blocks within each process; pairs of processes without and with `LD_PRELOAD=libft.so`, order "
             "alternating. Median step time and the per-pair ratio with/without:\n\n| mode | pairs | ms without | ms with "
             "| ratio (median) | spread |\n|---|---|---|---|---|---|\n%s%s"
             % (info["torch"], info["cuda"], info["nccl"], rows, ("\n\nNotes: " + "; ".join(sorted(notes))) if notes else "")
             + ("\n\nWhat libft.so saw of each preloaded process before it exited (its segment, by `ftdump`): %s."
                % "; ".join(seen) if seen else ""))
    return 0 if any(ratios.values()) else 1


# ---- report -----------------------------------------------------------------------------------

def section_report(out):
    cfg = out.config()
    try:
        with open(os.path.join(out.dir, "results.txt")) as f:
            results = f.read()
    except OSError:
        results = ""
    parts = ["## %s, %s (`bench/gpu/run.sh`)" % (time.strftime("%Y-%m-%d"), cfg.get("device", "unknown device")), ""]
    for section in ("env", "preload", "smallop", "trainsim", "ckpt", "detect", "torch"):
        path = os.path.join(out.dir, "notes", section + ".md")
        if os.path.exists(path):
            with open(path) as f:
                parts.append(f.read().rstrip() + "\n")
        else:
            parts.append("(%s: no result; the section did not finish)\n" % section)
    parts.append("```\n" + results.rstrip() + "\n```\n")
    with open(os.path.join(out.dir, "RESULTS.md"), "w") as f:
        f.write("\n".join(parts))
    say("wrote %s" % os.path.join(out.dir, "RESULTS.md"))
    return 0


# ---- set-runpath (prepare.sh) ----------------------------------------------------------------

def set_runpath(path, new):
    """Rewrites the DT_RUNPATH/DT_RPATH string of a 64-bit little-endian ELF file in place, when
    the new one fits in the old one's bytes (the rest NUL). No entry: nothing to do."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            return 0
        phoff, = struct.unpack_from("<Q", data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
        loads, dynamic = [], None
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
            if p_type == 1:
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == 2:
                dynamic = (p_offset, p_filesz)
        if dynamic is None:
            return 0
        strtab, paths = None, []
        for off in range(dynamic[0], dynamic[0] + dynamic[1], 16):
            tag, val = struct.unpack_from("<qQ", data, off)
            if tag == 0:
                break
            if tag == 5:
                strtab = val
            elif tag in (15, 29):
                paths.append(val)
        if not paths or strtab is None:
            return 0
        base = next((strtab - v + o for v, o, n in loads if v <= strtab < v + n), None)
        if base is None:
            raise SystemExit("set-runpath: %s: DT_STRTAB outside every PT_LOAD" % path)
        for val in paths:
            start = base + val
            end = data.index(0, start)
            old = bytes(data[start:end])
            if old == new.encode():
                continue
            if len(new) > len(old):
                raise SystemExit("set-runpath: %s: %r does not fit in %r" % (path, new, old.decode()))
            data[start:end] = new.encode() + b"\0" * (len(old) - len(new))
        f.seek(0)
        f.write(data)
    return 0


SECTIONS = {"env": section_env, "preload": section_preload, "smallop": section_smallop, "trainsim": section_trainsim,
            "ckpt": section_ckpt, "detect": section_detect, "torch": section_torch, "report": section_report}


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "set-runpath":
        return set_runpath(sys.argv[2], sys.argv[3])
    if len(sys.argv) != 3 or sys.argv[1] not in SECTIONS:
        print(__doc__, file=sys.stderr)
        return 2
    out = Out(sys.argv[2])
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    return SECTIONS[sys.argv[1]](out)


if __name__ == "__main__":
    sys.exit(main())
