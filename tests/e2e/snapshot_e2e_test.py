#!/usr/bin/env python3
"""Snapshots that never block the host, end to end (docs/checkpoints.md): trainsim on gpusim
under libft.so with FT_CKPT_EVERY=1 gives ft_update_begin its stream, so every step is a
snapshot ordered on the device and ft_step_done does not wait for the copy. No termination
save (FT_CKPT_ON_SIGNAL=none) and no just-in-time save can help: the periodic snapshots alone
must carry the job.

  --case kill-mid-run   dp=2 tp=2 on two nodes: every rank stops at step 30 (trainsim
                        --fault hang-host on all ranks: the host stops after ft_step_done(30))
                        and is SIGKILLed once the master verified step 30; the relaunch restores
                        step 30 on every rank from the snapshots and ends with the checksums of
                        trainsim_reference (bit-identical)
"""

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import check, fail  # noqa: E402
from ckpt_e2e_test import CkptCluster, SMALL, parse_args, relaunch_restores, show_checkpoints  # noqa: E402


def case_kill_mid_run(args):
    steps, stop_step, world = 60, 30, 4
    model = ["--dp", "2", "--tp", "2"] + SMALL
    with CkptCluster(args, job="ck-snapshot-kill", nodes=2, ranks_per_node=2) as c:
        c.start_master(["--topology", "dp=2,tp=2,pp=1"])
        c.start_ckpt_workers()
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20", "--fault", "hang-host",
                                  "--fault-rank", "all", "--fault-step", str(stop_step)],
                         env={"FT_CKPT_EVERY": "1", "FT_CKPT_ON_SIGNAL": "none"})
        # Every rank's snapshot of the step it stopped after, verified across the DP replicas.
        verdict = c.wait_for(lambda: c.verdict(stop_step), 90, "the verdict of step %d" % stop_step, poll=0.2)
        print("verdict: %s" % verdict)
        check(verdict["state"] == "verified" and verdict["verified_shards"] == verdict["shards"],
              "step %d not verified: %s" % (stop_step, verdict))
        pids = c.rank_pids()
        check(sorted(pids) == list(range(world)), "rank pids %s" % pids)
        for rank, pid in sorted(pids.items()):
            os.kill(pid, signal.SIGKILL)
        c.wait_for(lambda: c.job_proc.poll() is not None, 60, "the killed job to end", poll=0.1)
        logs = "\n".join(line for r in range(world) for line in c.rank_log(r))
        snapshots = logs.count("a snapshot behind the app's stream")
        check(snapshots >= world * (stop_step - 5),
              "%d snapshot lines in the ranks' logs, expected about %d (one per step and rank)" %
              (snapshots, world * stop_step))
        check("termination save" not in logs and "just-in-time save" not in logs,
              "a save other than the snapshots ran")
        text = show_checkpoints(c)
        check(str(stop_step) in text, "`ftmaster checkpoints` does not list step %d" % stop_step)
        relaunch_restores(c, args, model, steps, stop_step, world)
        print("OK: a snapshot every step (%d snapshot lines, none waited for) -> every rank SIGKILLed at step %d "
              "-> relaunch restored step %d -> reference checksums" % (snapshots, stop_step, stop_step))


def main():
    args = parse_args()
    cases = {"kill-mid-run": case_kill_mid_run}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
