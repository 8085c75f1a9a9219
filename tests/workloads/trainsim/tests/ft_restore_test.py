#!/usr/bin/env python3
"""trainsim with libft.so preloaded (no ftworker: node_plan_tool writes the node plan file the
worker would write), 2 ranks dp=2 on node0, FT_CKPT_EVERY=4, arenas in a private directory:

  1. --ft save, 8 steps: the reference's checksums (saving changes nothing; steps 4 and 8 saved).
  2. --ft restore with a plan without a step: from scratch, no 'restored' line, the reference.
  3. a plan naming step 8 (each rank's own arena), --steps 12: every rank prints
     'restored step=8', computes steps 8..11 only, and ends on trainsim_reference --steps 12
     (the optimizer's counter, restored with the parameters, adds up to 12).
  4. the same plan again: the arenas now hold step 12, and step 8 in their other slot — restored
     from there (both slots are copies), --steps 16 ends on the reference and saves 12 and 16.
     Then the same plan once more: no copy of step 8 is left, so ft_restore fails and trainsim
     exits 1 saying so, without training from scratch.
  5. --ft restore and no plan file at all (no worker): FT_TIMEOUT after FT_RESTORE_WAIT, exit 1.
  6. an arena directory that cannot hold the arena: registration fails, trainsim warns and
     trains on to the reference's checksums (no restore is attempted).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import trainsim_common as tc

MODEL = ["--dp", "2", "--steps", "8", "--param-bytes", "256k"]


def main():
    p = argparse.ArgumentParser()
    for flag in ("--launch", "--trainsim", "--reference", "--libft", "--plan-tool"):
        p.add_argument(flag, required=True)
    args = p.parse_args()
    tc.check_environment()
    job = "ts-restore-%d" % os.getpid()
    arena_dir = tempfile.mkdtemp(prefix="ft-trainsim-arena-", dir="/dev/shm")
    env = dict(os.environ)
    env.update({"LD_PRELOAD": args.libft, "FT_JOB": job, "FT_CKPT_ARENA_DIR": arena_dir, "FT_CKPT_EVERY": "4",
                "FT_RESTORE_WAIT": "1s"})

    def run(flags, expect_rc=0):
        cmd = [sys.executable, args.launch, "--nodes", "1", "--ranks-per-node", "2", "--timeout", "60", "--grace",
               "1", "--kill-after", "2", "--", args.trainsim] + flags
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=90)
        print("$ trainsim %s -> exit %d" % (" ".join(flags), r.returncode), flush=True)
        if (r.returncode == 0) != (expect_rc == 0):
            print(r.stdout[-3000:], r.stderr[-3000:])
            tc.fail("exit %d, expected %s" % (r.returncode, "0" if expect_rc == 0 else "non-zero"))
        return r.stdout, r.stderr

    def plan(*flags):
        r = subprocess.run([args.plan_tool, "--arena-dir", arena_dir, "--job", job, "--node", "node0", "--ranks", "0,1"] +
                           list(flags), capture_output=True, text=True, timeout=60)
        tc.check(r.returncode == 0, "node_plan_tool %s: %s%s" % (flags, r.stdout, r.stderr))

    try:
        out, err = run(MODEL + ["--ft", "save"])
        tc.verify_against_reference(args, tc.checksums(out), MODEL, 2)
        tc.check("restored" not in out, "--ft save restored something")

        plan("--none")
        out, err = run(MODEL + ["--ft", "restore"])
        tc.check("restored" not in out, "restored although the plan has no step:\n" + out)
        tc.verify_against_reference(args, tc.checksums(out), MODEL, 2)
        print("OK: no checkpoint in the plan: from scratch", flush=True)

        plan("--step", "8", "--wait-s", "30")
        longer = ["--dp", "2", "--steps", "12", "--param-bytes", "256k"]
        out, err = run(longer + ["--verbose"])
        for r in range(2):
            tc.check("trainsim rank=%d restored step=8" % r in out, "rank %d did not restore step 8:\n%s" % (r, out))
            steps = [int(s) for s in re.findall(r"trainsim rank=%d step=(\d+) ms=" % r, out)]
            tc.check(steps == list(range(8, 12)), "rank %d ran steps %s, expected 8..11" % (r, steps))
            resumed = re.search(r"trainsim rank=%d resumed step=(\d+) unix_ms=(\d+)" % r, out)
            tc.check(resumed and resumed.group(1) == "9" and abs(int(resumed.group(2)) / 1e3 - time.time()) < 120,
                     "rank %d did not say when its first step after the restore (step 9) completed:\n%s" % (r, out))
        tc.verify_against_reference(args, tc.checksums(out), longer, 2)
        print("OK: restored step 8, ran 8..11, checksums of 12 steps", flush=True)

        longest = ["--dp", "2", "--steps", "16", "--param-bytes", "256k"]
        out, err = run(longest)
        for r in range(2):
            tc.check("trainsim rank=%d restored step=8" % r in out,
                     "rank %d did not restore step 8 from its arena's other slot:\n%s" % (r, out))
        tc.verify_against_reference(args, tc.checksums(out), longest, 2)
        print("OK: step 8 restored from the other slot behind step 12, checksums of 16 steps", flush=True)

        out, err = run(longer, expect_rc=1)
        tc.check(not tc.checksums(out), "a rank trained although its restore failed:\n" + out)
        tc.check(re.search(r"trainsim rank=\d: .*restore: FT_\w+", err), "no restore error message:\n" + err[-2000:])
        print("OK: no verified copy of the planned step: exit 1, %s" %
              re.search(r"restore: (FT_\w+)", err).group(1), flush=True)

        os.unlink(os.path.join(arena_dir, [n for n in os.listdir(arena_dir) if n.startswith("ft-plan.")][0]))
        out, err = run(MODEL, expect_rc=1)
        tc.check("restore: FT_TIMEOUT" in err, "no FT_TIMEOUT without a plan file:\n" + err[-2000:])
        tc.check(not tc.checksums(out), "a rank trained without a plan")
        print("OK: no plan file (no worker): FT_TIMEOUT, exit 1")

        env["FT_CKPT_ARENA_DIR"] = os.path.join(arena_dir, "missing", "dir")
        out, err = run(MODEL)
        tc.check(re.search(r"trainsim rank=\d: warning: ft_register_end: FT_NO_SPACE", err),
                 "no warning about the arena:\n" + err[-2000:])
        tc.verify_against_reference(args, tc.checksums(out), MODEL, 2)
        print("OK: no room for the arena: a warning, training ran on")
    finally:
        shutil.rmtree(arena_dir, ignore_errors=True)
        # Ranks that exited 1 (the failed restores) leave their segments: ftworker reclaims
        # those of dead processes, and there is none here.
        for name in os.listdir("/dev/shm"):
            if name.startswith("ft.%s." % job):
                os.unlink(os.path.join("/dev/shm", name))


if __name__ == "__main__":
    main()
