#!/usr/bin/env python3
"""A real PyTorch job through python/ft end to end: tests/workloads/torch_ddp/train.py (DDP over
gloo, CPU tensors: host buffers, which ft saves and restores like device memory) on 2 simulated
nodes, one rank each, started by launch.py with torchrun's environment under LD_PRELOAD=libft.so
(gpusim's libcudart.so.13 on the library path), one ftworker per node, ftmaster and a real
redis-server (tests/e2e/cluster.py). Each worker is told its node's ranks (FT_NODE_RANKS), so a
copy its ranks need from another node is pulled before they start. Each rank calls
ft.init_optimizer_state, registers its model's and AdamW's state dicts, restores at start and
reports every step (periodic saves every FT_CKPT_EVERY steps).

  (a) a run without a fault: both ranks register, save and finish; their final checksums (the
      sha256 of every parameter's and optimizer state tensor's bytes) are the reference.
  (b) rank 1 SIGKILLs itself after step CRASH_AT; the launcher tears the other rank down 0.1 s
      later (launch.py --grace 0.1, as torchrun's agent does), unless gloo's error on the closed
      connection ended it first. Once the master's restore plan is settled and on every node,
      the same command is relaunched (without the crash flags): every rank restores one step,
      the same on every rank, no older than the last periodic save before the crash and no newer
      than the step the ranks had reached, and the job ends with the reference checksums.

Which step is restored depends on what saved it: the master's crash decision asks the healthy
rank for a just-in-time save (the step it had completed) when the rank is still there to answer,
a save at termination (SIGTERM) would do the same; otherwise the last periodic save. The bounds
above hold either way, and the figures are printed.

usage: torch_ddp_e2e_test.py --launch L --libft F --ftworker W --ftmaster M --train T
Run it with the Python that has PyTorch (Debian's python3-torch: /usr/bin/python3).
"""

import argparse
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
from cluster import Cluster, check, fail  # noqa: E402

STEPS, EVERY, CRASH_AT, CRASHED = 30, 5, 13, 1
WORLD = 2
# Host work per step: periodic saves of the small model commit (in the background) well
# before the crash three steps after the last one.
STEP_MS = "20"
TOPOLOGY = ["--topology", "dp=%d,tp=1,pp=1" % WORLD]
# ftmaster publishes a plan for a step saved just in time as soon as the save's acknowledged
# copies are in, may withdraw it at its next re-read of the step (ckpt_refresh, 2 s) while not
# every replica reported, and publishes it again once the copies' deadline passed (copy_wait,
# 5 s). A relaunch within that window restores nothing, or ranks restore different plans. Until
# that changes, a plan is taken once it stayed the same this long.
PLAN_STABLE_S = 6.0


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "libft", "ftworker", "ftmaster", "train"):
        p.add_argument("--" + name, required=True)
    args = p.parse_args()
    args.trainsim = None  # Cluster's default program: every job here names its own
    return args


def require_torch():
    try:
        import torch
    except ImportError as e:  # a declared test dependency: say so, do not skip
        fail("PyTorch is not importable by %s (%s): python3-torch is a test dependency, install it with "
             "scripts/install-deps.sh" % (sys.executable, e))
    print("PyTorch %s (%s)" % (torch.__version__, sys.executable), flush=True)


class TorchCluster(Cluster):
    def __init__(self, args, job):
        super().__init__(args, job=job, nodes=2, ranks_per_node=WORLD // 2)
        self.program = [sys.executable, args.train]
        self.kept = []
        self.plan_since = None  # (plan version, when first seen settled)

    def keep_log(self, out):
        """Keeps an earlier run's output (a relaunch reuses the job log's name): removed with
        the other logs when the test passes, named when it fails."""
        path = os.path.join(self.log_dir, "job-%s-run%d.log" % (self.job, len(self.kept) + 1))
        with open(path, "w") as f:
            f.write(out)
        self.kept.append(path)

    def __exit__(self, exc_type, exc, tb):
        failed = exc_type is not None and not (exc_type is SystemExit and exc.code in (0, None))
        for path in self.kept:
            if failed:
                print("---- an earlier run's job log: %s" % path, flush=True)
            else:
                os.unlink(path)
        return super().__exit__(exc_type, exc, tb)

    def start_node_workers(self):
        """One worker per node, told the ranks the launcher starts there (FT_NODE_RANKS, as a
        deployment sets it): a rank whose planned copy is on another node only (the healthy
        replica's) is pulled to its node before it starts."""
        per = self.ranks_per_node
        for k, node in enumerate(self.node_names):
            self.start_worker(node, env={"FT_NODE_RANKS": "%d-%d" % (k * per, k * per + per - 1)})

    def run_job(self, flags, launch_args=("--keep-going",), timeout=60):
        # One torch thread per rank (2 cores here); saves every EVERY steps.
        env = {"FT_CKPT_EVERY": str(EVERY), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        self.start_job(["--steps", str(STEPS), "--step-ms", STEP_MS] + list(flags), env=env, program=self.program,
                       launch_args=launch_args, timeout=timeout)
        self.wait_for(lambda: self.job_proc.poll() is not None, timeout + 15, "end of the job", poll=0.1)
        return self.job_proc.returncode, self.job_output()

    # -- what the job printed ----------------------------------------------------------------
    @staticmethod
    def restored(out):
        """{rank: step or None}."""
        got = {}
        for rank, what in re.findall(r"^\[rank (\d+)\] torch_ddp rank=\d+ restored (none|step=\d+)$", out, re.M):
            got[int(rank)] = None if what == "none" else int(what.split("=")[1])
        return got

    @staticmethod
    def checksums(out):
        return {int(r): (int(s), h) for r, s, h in
                re.findall(r"^\[rank (\d+)\] torch_ddp rank=\d+ final step=(\d+) checksum=([0-9a-f]+)$", out, re.M)}

    @staticmethod
    def reached(out):
        """{rank: the last step it completed}."""
        got = {}
        for rank, step in re.findall(r"^\[rank (\d+)\] torch_ddp rank=\d+ step=(\d+) ", out, re.M):
            got[int(rank)] = max(got.get(int(rank), 0), int(step))
        return got

    # -- what the checkpoint machinery wrote -------------------------------------------------
    def steps(self):
        return sorted(int(s) for s in self.db.command("ZRANGE", self.key("ckpt:steps"), 0, -1) or [])

    def copies(self, step):
        raw = self.db.command("HGETALL", self.key("ckpt:%d" % step)) or []
        return {int(r): json.loads(v) for r, v in zip(raw[0::2], raw[1::2])}

    def plan(self):
        value = self.db.command("GET", self.key("restore"))
        return json.loads(value) if value else None

    def plan_file_version(self, node):
        """(step, version) of the node plan ftworker wrote for its ranks, or None."""
        try:
            with open(os.path.join(self.arena_dir(node), "ft-plan.%s.%s" % (self.job, node))) as f:
                fields = dict(line.partition(" ")[::2] for line in f.read().splitlines() if line)
        except OSError:
            return None
        return (fields.get("step"), fields.get("version")) if "end" in fields else None

    def settled_plan(self):
        """The restore plan once every reported step is judged, the master has read every event,
        each node's plan file is this plan, and it stayed so for PLAN_STABLE_S: what a relaunch
        restores. None until then."""
        steps = self.steps()
        plan = self.plan()
        ready = (steps and all(self.db.command("HGET", self.key("ckpt:verdicts"), str(s)) is not None for s in steps)
                 and self.master_caught_up() and plan and plan.get("step", -1) >= 0 and
                 all(self.plan_file_version(n) == (str(plan["step"]), str(plan["version"])) for n in self.node_names))
        if not ready:
            self.plan_since = None
            return None
        now = time.monotonic()
        if self.plan_since is None or self.plan_since[0] != plan["version"]:
            self.plan_since = (plan["version"], now)
        return plan if now - self.plan_since[1] >= PLAN_STABLE_S else None


def reference_run(args):
    with TorchCluster(args, "torch-ref") as c:
        c.start_master(TOPOLOGY)
        c.start_node_workers()
        t0 = time.monotonic()
        rc, out = c.run_job([])
        check(rc == 0, "the run without a fault exited %d" % rc)
        restored = c.restored(out)
        check(restored == {r: None for r in range(WORLD)}, "a first run restored %s, expected none" % restored)
        sums = c.checksums(out)
        check(sorted(sums) == list(range(WORLD)), "final checksums of ranks %s, expected %s" % (sorted(sums), WORLD))
        check(len({h for _, h in sums.values()}) == 1, "the DDP replicas end with different bytes: %s" % sums)
        # A CPU-only job (its state all in host memory, no CUDA runtime) is not pinned, so it is
        # not told pinning failed; and the warnings it gets are the ones a person should act on.
        check("pinning" not in out, "a CPU-only job tried to pin its arena:\n%s" %
              "\n".join(l for l in out.splitlines() if "pinning" in l))
        # ft saw the state: both ranks' copies of the last step reported by their workers.
        copies = c.wait_for(lambda: (lambda got: got if sorted(got) == list(range(WORLD)) else None)(c.copies(STEPS)),
                            30, "both ranks' copies of step %d" % STEPS, poll=0.2)
        check(copies[0]["digest"] == copies[1]["digest"], "the replicas' copies of step %d differ: %s" % (STEPS, copies))
        print("(a) no fault: %.1f s, ranks' final checksum %s; step %d saved by ranks %s (%d bytes each)" % (
            time.monotonic() - t0, sums[0][1], STEPS, sorted(copies), copies[0]["bytes"]), flush=True)
        return sums


def crash_run(args, reference):
    with TorchCluster(args, "torch-crash") as c:
        c.start_master(TOPOLOGY)
        c.start_node_workers()
        t0 = time.monotonic()
        rc, out = c.run_job(["--crash-at-step", str(CRASH_AT), "--crash-rank", str(CRASHED)],
                            launch_args=["--grace", "0.1"])
        c.keep_log(out)
        check(rc != 0, "the crashed run exited 0")
        check("crashing after step %d" % CRASH_AT in out and
              re.search(r"\[launch\] rank %d \([^)]*\) killed by signal SIGKILL" % CRASHED, out),
              "rank %d did not crash (SIGKILL) after step %d" % (CRASHED, CRASH_AT))
        # The launcher SIGTERMs the healthy rank 0.1 s later, unless gloo's error on the closed
        # connection ended it first (a matter of timing): say which.
        teardown = [line[len("[launch] "):] for line in out.splitlines()
                    if line.startswith("[launch] ") and " local " not in line and "world " not in line]
        print("launcher: %s" % " | ".join(teardown), flush=True)
        reached = c.reached(out)
        check(reached.get(CRASHED) == CRASH_AT, "rank %d completed step %s before crashing, expected %d" %
              (CRASHED, reached.get(CRASHED), CRASH_AT))
        healthy = [r for r in range(WORLD) if r != CRASHED]
        step_reached = min(reached.get(r, 0) for r in healthy)
        # DDP all-reduces every step: nobody gets past the step after the crashed rank's last.
        check(step_reached in (CRASH_AT, CRASH_AT + 1), "the healthy ranks reached %s" % reached)
        last_periodic = CRASH_AT // EVERY * EVERY

        plan = c.wait_for(c.settled_plan, 45, "a settled restore plan on every node", poll=0.2)
        print("plan after the crash: step %d (version %d), checkpoint steps %s" % (
            plan["step"], plan["version"], c.steps()), flush=True)

        rc, out = c.run_job([], launch_args=["--grace", "0.1"])  # the same command, no fault
        check(rc == 0, "the relaunched job exited %d" % rc)
        restored = c.restored(out)
        print("(b) crash of rank %d after step %d, teardown 0.1 s later: restored step %s, step reached before "
              "the crash %d (per rank %s), last periodic save %d (%.1f s)" % (
                  CRASHED, CRASH_AT, restored, step_reached, reached, last_periodic, time.monotonic() - t0),
              flush=True)
        check(sorted(restored) == list(range(WORLD)), "restore lines from ranks %s" % sorted(restored))
        steps = set(restored.values())
        check(len(steps) == 1, "the ranks restored different steps: %s" % restored)
        step = steps.pop()
        check(step is not None, "the relaunch restored nothing")
        check(last_periodic <= step <= step_reached,
              "restored step %d, expected between the last periodic save %d and the step reached %d" %
              (step, last_periodic, step_reached))
        check(step == plan["step"], "restored step %d, the plan said %d" % (step, plan["step"]))
        sums = c.checksums(out)
        check(sums == reference, "final checksums after the restore %s differ from the run without a fault %s" %
              (sums, reference))
        print("OK: restored step %d (reached %d, last periodic save %d) on every rank; final checksums equal the "
              "uninterrupted run's (%s)" % (step, step_reached, last_periodic, reference[0][1]), flush=True)


def main():
    args = parse_args()
    require_torch()
    t0 = time.monotonic()
    reference = reference_run(args)
    crash_run(args, reference)
    print("OK (%.1f s)" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
