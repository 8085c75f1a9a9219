#!/usr/bin/env python3
"""trainsim's fault injection on the gpusim stand-ins, driven through launch.py.

  --case hang-kernel  a kernel that never ends on one rank: every rank stops before finishing
                      the fault step and stays alive; once the harness kills the hung rank and
                      stops the job, the launcher exits non-zero and no rank is left behind.
  --case crash-kill   one rank SIGKILLs itself: the launcher reports that rank's death, stops
                      the blocked peers after its grace period and exits 137.
  --case pause        one rank pauses 2 s on the host: peers wait for it, the run completes
                      with the reference's checksums.
  --case hang-host    one rank stops issuing work: nobody finishes, --timeout ends the job (124).
  --case crash-signals  crash-segv and crash-abort: reported as SIGSEGV / SIGABRT (139 / 134).
  --case slow         one rank's compute gets 10x longer from step 3: its steps (and its peers')
                      slow down by that much, and the results stay exact.
  --case sdc          one rank flips a bit of one parameter at step 4 and trains on: the run
                      completes, that rank's checksum differs from its data-parallel replica's
                      (what ftmaster's digest comparison catches), the other stage's replicas
                      still agree with each other.
"""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import trainsim_common as tc

WORLD = 4  # 2 nodes x 2 ranks: dp=2 pp=2, rank = dp + 2 * pp
MODEL = ["--dp", "2", "--pp", "2", "--steps", "10"]


def read_logs(log_dir):
    text = {}
    for r in range(WORLD):
        try:
            with open(os.path.join(log_dir, "rank%d.log" % r), errors="replace") as f:
                text[r] = f.read()
        except OSError:
            text[r] = ""
    return text


def steps_done(text):
    return [int(m.group(2)) for m in tc.STEP_RE.finditer(text)]


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    tc.fail("timed out after %.0f s waiting for %s" % (timeout, what))


def hang_kernel(args):
    fault_rank, fault_step = 1, 3
    with tempfile.TemporaryDirectory() as log_dir:
        cmd = [sys.executable, args.launch, "--nodes", "2", "--ranks-per-node", "2", "--keep-going",
               "--timeout", "90", "--log-dir", log_dir, "--", args.trainsim] + MODEL + [
               "--verbose", "--fault", "hang-kernel", "--fault-rank", str(fault_rank),
               "--fault-step", str(fault_step)]
        print("$ " + " ".join(cmd), flush=True)
        launcher = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        err_lines = []
        while len(tc.pids_from("".join(err_lines))) < WORLD:
            line = launcher.stderr.readline()
            tc.check(line, "launcher ended before starting all ranks: %s" % "".join(err_lines))
            err_lines.append(line)
        pids = tc.pids_from("".join(err_lines))
        try:
            wait_for(lambda: "injecting fault hang-kernel" in read_logs(log_dir)[fault_rank], 60,
                     "the fault to be injected")
            # A healthy run of the whole job takes about a second: after a few more, every rank
            # must still be alive and stuck inside the fault step.
            time.sleep(4)
            logs = read_logs(log_dir)
            for r in range(WORLD):
                tc.check(tc.alive(pids[r]), "rank %d exited while blocked:\n%s" % (r, logs[r]))
                tc.check(not tc.checksums(logs[r]), "rank %d finished despite the hang" % r)
                tc.check(steps_done(logs[r]) == list(range(fault_step)),
                         "rank %d completed steps %s, expected exactly 0..%d" %
                         (r, steps_done(logs[r]), fault_step - 1))
            print("OK: all %d ranks blocked in step %d" % (WORLD, fault_step), flush=True)
            # The harness acts: the hung rank is killed; the launcher (keep-going) reports it.
            os.kill(pids[fault_rank], signal.SIGKILL)
            while True:
                line = launcher.stderr.readline()
                tc.check(line, "launcher ended without reporting rank %d's death" % fault_rank)
                err_lines.append(line)
                if re.search(r"rank %d \(node\d+, pid %d\) killed by signal SIGKILL" %
                             (fault_rank, pids[fault_rank]), line):
                    break
            # Then the outer timeout stops the job, unless the peers already gave up on their own.
            try:
                launcher.wait(timeout=3)
            except subprocess.TimeoutExpired:
                launcher.send_signal(signal.SIGTERM)
            _, rest = launcher.communicate(timeout=30)
            err_lines.append(rest)
        finally:
            if launcher.poll() is None:
                launcher.kill()
                launcher.wait()
            for pid in pids.values():
                tc.kill_quietly(pid)
        print("".join(err_lines), flush=True)
        tc.check(launcher.returncode != 0, "launcher exited 0 after a hung, killed rank")
        wait_for(lambda: not any(tc.alive(p) for p in pids.values()), 10, "all ranks to be gone")
        print("OK: launcher exited %d; no rank left" % launcher.returncode)


def crash_kill(args):
    fault_rank = 2
    rc, out, err, secs = tc.run_job(
        args, 2, 2, MODEL + ["--fault", "crash-kill", "--fault-rank", str(fault_rank), "--fault-step", "2"],
        launch_flags=["--grace", "1", "--kill-after", "2"], timeout=60)
    print(err[-3000:])
    pids = tc.pids_from(err)
    tc.check(len(pids) == WORLD, "launcher started %d ranks" % len(pids))
    tc.check(re.search(r"rank %d \(node1, pid %d\) killed by signal SIGKILL \(9\)" % (fault_rank, pids[fault_rank]),
                       err), "launcher did not report rank %d's death" % fault_rank)
    tc.check(rc == 128 + 9, "launcher exited %d, expected 137 (the crashed rank's status)" % rc)
    tc.check(not tc.checksums(out), "some rank finished although a peer died")
    tc.check(secs < 30, "took %.1f s" % secs)
    for r, pid in pids.items():
        tc.check(not tc.alive(pid), "rank %d (pid %d) outlived the launcher" % (r, pid))
    print("OK: crash reported, job stopped in %.1f s" % secs)


def pause(args):
    fault_rank, fault_step, pause_s = 3, 2, 2.0
    rc, out, err, secs = tc.run_job(
        args, 2, 2, MODEL + ["--verbose", "--fault", "pause", "--fault-rank", str(fault_rank), "--fault-step",
                             str(fault_step), "--pause-s", str(pause_s)], timeout=60)
    tc.check(rc == 0, "launcher exited %d:\n%s\n%s" % (rc, out[-3000:], err[-3000:]))
    tc.check(secs >= pause_s, "finished in %.2f s, shorter than the pause" % secs)
    tc.check("[rank %d] trainsim rank=%d: pause over" % (fault_rank, fault_rank) in err, "no pause message")
    # Rank 0 shares no communicator with rank 3 yet waits for it through its peers: its step
    # 2 lasts about as long as the pause.
    m = re.search(r"trainsim rank=0 step=%d ms=([0-9.]+)" % fault_step, out)
    tc.check(m and float(m.group(1)) >= 1000 * pause_s * 0.75,
             "rank 0's step %d did not wait for the paused rank: %s" % (fault_step, m and m.group(0)))
    tc.verify_against_reference(args, tc.checksums(out), MODEL, WORLD)
    print("OK: pause of %.1f s survived in %.2f s" % (pause_s, secs))


def hang_host(args):
    fault_rank, fault_step = 2, 2
    with tempfile.TemporaryDirectory() as log_dir:
        rc, _, err, secs = tc.run_job(
            args, 2, 2, MODEL + ["--verbose", "--fault", "hang-host", "--fault-rank", str(fault_rank),
                                 "--fault-step", str(fault_step)],
            launch_flags=["--timeout", "8", "--kill-after", "1", "--log-dir", log_dir], timeout=60)
        logs = read_logs(log_dir)
    print(err[-2000:])
    tc.check(rc == 124, "launcher exited %d, expected 124 (timeout)" % rc)
    tc.check(re.search(r"injecting fault hang-host at step %d unix_ms=\d{13}\b" % fault_step, logs[fault_rank]),
             "no fault message with the step and the wall-clock time it was injected:\n" + logs[fault_rank])
    for r in range(WORLD):
        tc.check(not tc.checksums(logs[r]), "rank %d finished despite the hang" % r)
        tc.check(steps_done(logs[r]) == list(range(fault_step)),
                 "rank %d completed steps %s" % (r, steps_done(logs[r])))
    print("OK: hang-host blocked everyone until the timeout (%.1f s)" % secs)


def crash_signals(args):
    for kind, sig in (("crash-segv", signal.SIGSEGV), ("crash-abort", signal.SIGABRT)):
        rc, out, err, _ = tc.run_job(
            args, 1, 2, ["--dp", "2", "--steps", "5", "--fault", kind, "--fault-rank", "1", "--fault-step", "1"],
            launch_flags=["--grace", "0.5", "--kill-after", "1"], timeout=60)
        print(err[-2000:])
        if sig == signal.SIGSEGV and "AddressSanitizer: SEGV" in err:
            # An FT_SANITIZE build: ASan's handler reports the fault and exits 1.
            tc.check(rc == 1 and "rank 1 (node0, pid" in err and "exited with code 1" in err,
                     "%s under ASan: launcher exited %d" % (kind, rc))
            continue
        tc.check(rc == 128 + sig, "%s: launcher exited %d, expected %d" % (kind, rc, 128 + sig))
        tc.check("rank 1 (node0, pid" in err and "killed by signal %s" % sig.name in err,
                 "%s: launcher did not report rank 1's %s" % (kind, sig.name))
        tc.check(not tc.checksums(out), "%s: a rank finished" % kind)
    print("OK: crash-segv and crash-abort reported")


def slow(args):
    fault_rank, fault_step, factor, compute_ms = 0, 3, 10, 30
    model = ["--dp", "2", "--steps", "6"]
    rc, out, err, secs = tc.run_job(
        args, 1, 2, model + ["--verbose", "--compute-ms", str(compute_ms), "--fault", "slow", "--fault-rank",
                             str(fault_rank), "--fault-step", str(fault_step), "--slow-factor", str(factor)],
        timeout=60)
    tc.check(rc == 0, "launcher exited %d:\n%s" % (rc, err[-3000:]))
    for r in range(2):
        ms = {int(s): float(t) for s, t in re.findall(r"trainsim rank=%d step=(\d+) ms=([0-9.]+)" % r, out)}
        tc.check(sorted(ms) == list(range(6)), "rank %d step lines: %s" % (r, sorted(ms)))
        slow_steps = [ms[s] for s in range(fault_step, 6)]
        # Each slow step lasts at least factor * compute-ms, on the slow rank and on its peer.
        tc.check(min(slow_steps) >= factor * compute_ms * 0.95,
                 "rank %d steps from %d: %s ms, expected >= %d" % (r, fault_step, slow_steps, factor * compute_ms))
        # Before the fault step no step is that slow (the warm-up step 0 aside).
        tc.check(max(ms[s] for s in range(1, fault_step)) < factor * compute_ms * 0.75,
                 "rank %d was slow before step %d: %s" % (r, fault_step, ms))
    tc.verify_against_reference(args, tc.checksums(out), model, 2)
    print("OK: slow rank slowed its steps by %dx, results exact" % factor)


def sdc(args):
    fault_rank, fault_step = 1, 4  # dp=1 pp=0; its data-parallel replica is rank 0
    rc, out, err, _ = tc.run_job(
        args, 2, 2, MODEL + ["--fault", "sdc", "--fault-rank", str(fault_rank), "--fault-step", str(fault_step)],
        timeout=60)
    tc.check(rc == 0, "launcher exited %d:\n%s\n%s" % (rc, out[-3000:], err[-3000:]))
    m = re.search(r"\[rank %d\] trainsim rank=%d: sdc: layers\.0\.weight\[(\d+)\] (\d+) -> (\d+) \(bit (\d+)\)" %
                  (fault_rank, fault_rank), err)
    tc.check(m, "no sdc message from rank %d:\n%s" % (fault_rank, err[-3000:]))
    before, after = int(m.group(2)), int(m.group(3))
    tc.check(abs(before - after) == 1, "the flip changed %d to %d, expected one unit" % (before, after))
    tc.check(err.count(": sdc: ") == 1, "more than one rank corrupted a parameter")
    got = tc.checksums(out)
    tc.check(sorted(got) == list(range(WORLD)), "checksum lines for ranks %s" % sorted(got))
    ref = tc.reference(args, MODEL)
    tc.check(got[fault_rank][4] != got[0][4], "replicas of pp=0 agree despite the corruption: %s" % got)
    tc.check(got[fault_rank] != ref[fault_rank], "the corrupted rank matches the reference")
    tc.check(got[2][4] == got[3][4], "replicas of pp=1 disagree: %s" % got)
    print("OK: sdc on rank %d (%d -> %d): its replica disagrees, the run completed" % (fault_rank, before, after))


def main():
    args = tc.parse_paths()
    {"hang-kernel": hang_kernel, "crash-kill": crash_kill, "pause": pause, "hang-host": hang_host,
     "crash-signals": crash_signals, "slow": slow, "sdc": sdc}[args.case](args)


if __name__ == "__main__":
    main()
