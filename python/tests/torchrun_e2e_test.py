#!/usr/bin/env python3
"""tests/workloads/torch_ddp/train.py (DDP over gloo, AdamW, a LambdaLR schedule, gradient
clipping, dropout; the model, the optimizer, the scheduler and the RNG states registered through
python/ft) under Debian's torchrun (PyTorch 1.13: `python3 -m torch.distributed.run`, underscore
flags only, `--redirects 1 --tee 1` under Python 3.11) on 2 simulated nodes: one torchrun per
node (--nnodes 2 --node_rank k --nproc_per_node 1, static rendezvous on loopback, torchrun's
default monitor interval of 5 s), each with its node's FT_NODE_ID and arena directory under
LD_PRELOAD=libft.so, one ftworker per node, ftmaster and a real redis-server
(tests/e2e/cluster.py). FT_JOB is given explicitly. A run without a fault gives the reference:
each rank's sha256 of its parameters, AdamW's state, the learning rate and torch's RNG state.

  --case sigkill    (issue 27 item 6) rank 1 SIGKILLs itself after step 13; once the restore
                    plan is settled, the same commands again: every rank restores one step (at
                    least the last periodic save, at most the step reached) and ends with the
                    reference checksums — learning rate and RNG included — bit for bit.
  --case exception  (issue 27 item 1) rank 1 raises an uncaught Python exception after step 13:
                    the master records an incident and the job is not `finished`; both ranks'
                    copies of step 13 (or 12) are saved and the step verified; the relaunch (the
                    same commands) restores that step on every rank and ends with the reference
                    checksums.

usage: torchrun_e2e_test.py --case C --libft F --ftworker W --ftmaster M --train T
Run it with the Python that has PyTorch (Debian's python3-torch: /usr/bin/python3).
"""

import argparse
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
sys.path.insert(0, HERE)
from cluster import check  # noqa: E402
from torch_ddp_e2e_test import TOPOLOGY, TorchCluster, require_torch  # noqa: E402

STEPS, EVERY, FAIL_AT, FAILED, WORLD = 30, 5, 13, 1, 2
STEP_MS = "20"


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--case", choices=("sigkill", "exception"), required=True)
    for name in ("libft", "ftworker", "ftmaster", "train"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--monitor-interval", type=float, default=None,
                   help="torchrun's --monitor_interval (default: torchrun's own, 5 s on 1.13)")
    args = p.parse_args()
    args.trainsim = None
    args.launch = None
    return args


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TorchrunCluster(TorchCluster):
    """One torchrun per simulated node, as a multi-node job is started by hand or by a script."""

    def run_job(self, flags, timeout=90):
        port = free_port()
        self.torchruns, outs, rank_log_dirs = [], [], []
        for k, node in enumerate(self.node_names):
            env = self.base_env({"FT_CKPT_EVERY": str(EVERY), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1",
                                 "FT_NODE_ID": node, "FT_CKPT_ARENA_DIR": self.arena_dir(node),
                                 "LD_PRELOAD": self.paths.libft})
            rank_logs = os.path.join(self.log_dir, "torchrun-%s-%s-ranks" % (self.job, node))
            shutil.rmtree(rank_logs, ignore_errors=True)
            rank_log_dirs.append(rank_logs)
            self.rank_log_dirs = getattr(self, "rank_log_dirs", set()) | {rank_logs}
            cmd = [sys.executable, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1",
                   "--log_dir", rank_logs,
                   "--nnodes", str(self.nodes), "--node_rank", str(k), "--nproc_per_node", str(self.ranks_per_node),
                   "--master_addr", "127.0.0.1", "--master_port", str(port), "--max_restarts", "0"]
            if self.paths.monitor_interval is not None:
                cmd += ["--monitor_interval", str(self.paths.monitor_interval)]
            cmd += [self.paths.train, "--steps", str(STEPS), "--step-ms", STEP_MS] + list(flags)
            out = open(os.path.join(self.log_dir, "torchrun-%s-%s.log" % (self.job, node)), "w+")
            outs.append(out)
            self.torchruns.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT))
        self.job_out = outs[0]
        self.node_logs = [o.name for o in outs]
        self.t_job_start = time.monotonic()
        done = self.poll_until(lambda: all(p.poll() is not None for p in self.torchruns), timeout, poll=0.1)
        for p in self.torchruns:
            if p.poll() is None:
                p.kill()
                p.wait()
        # The checks read each rank's own stdout (torchrun's --redirects file), not the tee: the
        # tee's thread polls that file while the rank writes it and copies what it finds as a line
        # with its "[default0]:" prefix, whole or not. In a CI run at a low CPU share it read a
        # rank's last line before its newline had been written and printed
        # "[default0]:torch_ddp rank=0 final step=30 checksum=c43b...[default0]:" (then the
        # newline); the rank's own file has every line whole.
        text = ""
        for d in rank_log_dirs:
            for path in sorted(glob.glob(os.path.join(d, "*", "attempt_*", "*", "stdout.log"))):
                with open(path, errors="replace") as f:
                    text += f.read()
        for o in outs:
            o.flush()
        check(done, "the torchruns did not end within %d s: %s" % (timeout, [p.returncode for p in self.torchruns]))
        return [p.returncode for p in self.torchruns], self.normalize(text)

    @staticmethod
    def normalize(text):
        """The ranks' own lines carry no rank prefix (torchrun's tee adds "[default<local>]:");
        the checks read "[rank r] torch_ddp rank=r ...", as launch.py writes them."""
        lines = []
        for line in text.splitlines():
            m = re.search(r"torch_ddp rank=(\d+) .*", line)
            lines.append("[rank %s] %s" % (m.group(1), m.group(0)) if m else line)
        return "\n".join(lines) + "\n"

    def show_logs(self, lines=40):
        super().show_logs(lines)
        for path in getattr(self, "node_logs", [])[1:]:  # the first is shown as the job's
            with open(path, errors="replace") as f:
                tail = f.readlines()[-lines:]
            print("---- last %d lines of %s" % (len(tail), path))
            print("".join(tail), end="", flush=True)

    def log_paths(self):
        return super().log_paths() + list(getattr(self, "node_logs", []))

    def __exit__(self, exc_type, exc, tb):
        failed = exc_type is not None and not (exc_type is SystemExit and exc.code in (0, None))
        super().__exit__(exc_type, exc, tb)
        if not failed:  # as the logs: a failed run's stay for a closer look
            for path in getattr(self, "rank_log_dirs", ()):
                shutil.rmtree(path, ignore_errors=True)
        return False

    def job_state(self):
        return self.db.command("HGET", self.key("master"), "job_state")

    def verdict(self, step):
        import json
        raw = self.db.command("HGET", self.key("ckpt:verdicts"), str(step))
        return json.loads(raw) if raw else None


def reference(args):
    with TorchrunCluster(args, "trun-ref") as c:
        c.start_master(TOPOLOGY)
        c.start_node_workers()
        t0 = time.monotonic()
        rcs, out = c.run_job([])
        check(rcs == [0, 0], "the run without a fault: torchrun exit codes %s" % rcs)
        check(c.restored(out) == {r: None for r in range(WORLD)}, "a first run restored %s" % c.restored(out))
        sums = c.checksums(out)
        check(sorted(sums) == list(range(WORLD)), "final checksums of ranks %s" % sorted(sums))
        check(len({h for _, h in sums.values()}) == 1, "the DDP replicas end with different bytes: %s" % sums)
        print("reference: %.1f s, final checksum %s (parameters, AdamW's state, lr, RNG)" % (
            time.monotonic() - t0, sums[0][1]), flush=True)
        return sums


def failed_run(args, ref):
    fault = (["--crash-at-step", str(FAIL_AT), "--crash-rank", str(FAILED)] if args.case == "sigkill" else
             ["--fail-at-step", str(FAIL_AT), "--fail-rank", str(FAILED)])
    with TorchrunCluster(args, "trun-" + args.case) as c:
        c.start_master(TOPOLOGY)
        c.start_node_workers()
        t0 = time.monotonic()
        rcs, out = c.run_job(fault)
        c.keep_log(out)
        check(any(rc != 0 for rc in rcs), "the failed run's torchruns exited %s" % rcs)
        reached = c.reached(out)
        check(reached.get(FAILED) == FAIL_AT, "rank %d completed step %s before failing, expected %d" %
              (FAILED, reached.get(FAILED), FAIL_AT))
        step_reached = min(reached.get(r, 0) for r in range(WORLD))
        incidents = c.poll_until(c.incidents, 30, poll=0.2)
        check(incidents, "no incident within 30 s of rank %d's %s after step %d (torchrun exit codes %s): job_state "
              "%s, checkpoint steps %s, copies of step %d: %s" % (
                  FAILED, args.case, FAIL_AT, rcs, c.job_state(), c.steps(), FAIL_AT, sorted(c.copies(FAIL_AT))))
        print("failure after step %d (%s), torchrun exit codes %s, %.1f s; incidents: %s" % (
            FAIL_AT, args.case, rcs, time.monotonic() - t0,
            ["%s/%s" % (i.get("kind"), i.get("decision")) for i in incidents]), flush=True)

        plan = c.wait_for(c.settled_plan, 45, "a settled restore plan on every node", poll=0.2)
        print("plan: step %d (version %d), checkpoint steps %s, job_state %s" % (
            plan["step"], plan["version"], c.steps(), c.job_state()), flush=True)
        check(c.job_state() != "finished", "the master declared the job finished after a failure")
        if args.case == "exception":
            check(plan["step"] in (FAIL_AT, FAIL_AT - 1), "the plan is step %d, expected %d or %d (a save at the "
                  "failure), the last periodic save is %d" % (plan["step"], FAIL_AT, FAIL_AT - 1, FAIL_AT // EVERY * EVERY))
            copies = c.copies(plan["step"])
            check(sorted(copies) == list(range(WORLD)), "copies of step %d from ranks %s" % (plan["step"], sorted(copies)))
            verdict = c.verdict(plan["step"]) or {}
            check(verdict.get("state") == "verified", "step %d's verdict: %s" % (plan["step"], verdict))

        rcs, out = c.run_job([])  # the same commands, no fault
        check(rcs == [0, 0], "the relaunch: torchrun exit codes %s" % rcs)
        restored = c.restored(out)
        check(sorted(restored) == list(range(WORLD)), "restore lines from ranks %s" % sorted(restored))
        steps = set(restored.values())
        check(len(steps) == 1 and None not in steps, "the ranks restored %s" % restored)
        step = steps.pop()
        check(step == plan["step"], "restored step %d, the plan said %d" % (step, plan["step"]))
        check(FAIL_AT // EVERY * EVERY <= step <= step_reached, "restored step %d, reached %d" % (step, step_reached))
        sums = c.checksums(out)
        check(sums == ref, "final checksums after the restore %s differ from the uninterrupted run's %s" % (sums, ref))
        print("OK: %s after step %d: restored step %d on every rank (reached %d); final parameters, optimizer "
              "state, learning rate and RNG equal the uninterrupted run's (%.1f s)" % (
                  args.case, FAIL_AT, step, step_reached, time.monotonic() - t0), flush=True)


def main():
    args = parse_args()
    require_torch()
    t0 = time.monotonic()
    ref = reference(args)
    failed_run(args, ref)
    print("OK (%.1f s)" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
