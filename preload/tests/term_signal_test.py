#!/usr/bin/env python3
"""The termination save (preload/term_signal.h) against what launchers and schedulers do:
term_app (a loop with 256 KiB of registered host state, every byte = the step) under
LD_PRELOAD=libft.so gets SIGTERM as torchrun's agent, Slurm or Kubernetes send it.

  default            no handler: the state of a completed step is committed (the step signalled,
                     then one step more: a preempted job's ranks all hold the newer one), then
                     the process dies by SIGTERM (exit status -15), as it would without ft
  app-handler        the app's SIGTERM handler, installed before ft_register_end, runs once
                     after the save and the app exits 0; it reads back its own handler
  app-handler-after  the same with the handler installed after ft armed the signal
  ignored            SIG_IGN: nothing happens, as without ft — no save, no terminating mark, no
                     sleep interrupted (EINTR) — and the process runs on
  handler-continues  the app's handler logs and returns: saved, then the rank is a running one
                     again (the segment's terminating mark cleared); a later SIGTERM saves the
                     newer step
  resethand-exit     an SA_RESETHAND handler ends the loop and the program exits 0 (the signal's
                     disposition is the default again by then): the process exits 0, its atexit
                     handlers and stdio run, its segment is removed, after the save
  python-exit        a Python program whose SIGTERM handler calls sys.exit(0) (term_py_app.py):
                     exits 0 with its atexit output, the segment removed, after the save
  python-terminate   the same program calls std::terminate after step 5 (as a C++ extension ends
                     a Python process): step 5 saved whole, then SIGABRT
  sigset, sysv_signal, bsd_signal
                     the handler installed (after ft armed SIGTERM) by that older function is
                     chained like one sigaction installs: saved first, then it runs once
  strict-c-signal    the same for signal() in a program compiled as strict ISO C
                     (term_strict_c_app.c: glibc binds it to __sysv_signal)
  exit-failure       exit(1) after step 5: the step is saved before the process ends, which still
                     exits 1 and leaves its segment (state Exited, status 1) for the worker
  exit-clean         exit(0) after step 5: a clean finish saves nothing
  return-failure     main returns 1 after step 5, its state a 64 KiB std::vector (on the heap, so
                     still mapped once freed): the storage went back to the allocator before exit
                     began, so nothing is saved, and the log says why
  uncaught-exception a std::runtime_error leaves main after step 5: std::terminate saves step 5 whole,
                     then the C++ runtime's handler says what was thrown and aborts (SIGABRT, as
                     without ft)
  uncaught-exception-app-handler
                     the same with the app's own terminate handler, set before registration: it
                     runs after the save
  uncaught-exception-app-handler-late
                     the same with the app's handler set after registration (libft.so puts it
                     behind the save at the next step)
  uncaught-exception-app-handler-late-chain
                     the same, the app's handler calling the one it replaced (the save's, which
                     then ends the process: no loop)
  return-failure-static
                     the same with the state in a static array, alive until the process ends:
                     step 5 is saved whole, as exit(1) saves it
  exit-in-update     exit(1) inside the update of step 6 (no stream: it may be running): no save
                     or a torn one, never a mix
  save-on-failure    ft_save_on_failure: before registration a no-op (FT_INVALID_ARGUMENT); after
                     step 5, from two threads at once, both FT_OK and one save of step 5
  siginfo-handler    an SA_SIGINFO handler sees the sender's pid
  second-signal      two SIGTERMs 5 ms apart: one termination save (of the step signalled and
                     the one after it), one death by SIGTERM
  nothing-registered nothing registered: SIGTERM kills at once, no arena
  disabled           FT_ENABLE=0: SIGTERM kills at once, no arena
  forked-child       a fork()ed child dies by SIGTERM at once (the save is the parent's);
                     the parent then saves as usual
  off                FT_CKPT_ON_SIGNAL=none: SIGTERM kills at once, nothing saved
  update-running     the update takes 200 ms of every 205: the save waits for ft_step_done,
                     the copy is one step (every byte the fill of the step it names)
  joins-save         a just-in-time save command (posted as ftworker posts it) and SIGTERM on
                     an idle app holding 64 MiB, SIGTERM after the command's save or racing it:
                     one save of the step, not two
  blocked-read       the app waits in read(stdin) and exits 0 if the read is interrupted:
                     without ft SIGTERM kills it there, so with ft it must too (our handler
                     restarts the call), after saving step 3
  stale-segment      a segment under the app's own name (a SIGKILLed process with the same pid
                     left it): libft.so replaces it instead of disabling itself, and saves
  step-more-keeps-older
                     periodic saves every 3 steps, SIGTERM at a step after one: the termination
                     copy of the step signalled is one only this rank took (a peer that crashed
                     has the periodic one), so the step more's copy replaces it, never the
                     periodic copy in the other slot
  keeps-planned-step periodic saves every 3 steps, the node's restore plan naming step 3 (as ftworker
                     writes it; the master had not judged step 6 whole: a peer never took it):
                     SIGTERM after step 7 saves over the copy of step 6, never the planned step 3,
                     which the arena still holds whole beside the newest copy
  killed-mid-save    512 MiB of state (--state-mib), a periodic save of step 3 committed, idle after step 4:
                     SIGTERM starts the termination save of step 4, SIGKILL lands while it
                     writes (the launcher's grace ran out): the arena still holds step 3, whole
"""

import argparse
import os
import re
import resource
import struct
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class App:
    def __init__(self, args, flags, env_extra=None, tmp_dir=None, stale_segment=False, cmd=None):
        self.dir = tempfile.mkdtemp(prefix="ft-term-", dir=tmp_dir)
        self.job = "term-%d" % os.getpid()
        env = dict(os.environ, LD_PRELOAD=args.libft, FT_JOB=self.job, FT_RANK="0", FT_WORLD_SIZE="1",
                   FT_CKPT_ARENA_DIR=self.dir, FT_CKPT_PIN="0")
        env.update(env_extra or {})
        self.args = args
        self.lines = []
        self.cv = threading.Condition()
        job = self.job

        def before_exec():  # in the child: its pid is the app's
            # An app that dies by SIGABRT (uncaught-exception) leaves no core file behind.
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if not stale_segment:
                return
            path = "/dev/shm/ft.%s.r0.p%d" % (job, os.getpid())
            with open(path, "w") as f:
                f.write("left by a process killed with this pid")
            os.chmod(path, 0o600)

        self.proc = subprocess.Popen((cmd or [args.app, "run"]) + flags, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=before_exec)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()

    def wait_line(self, prefix, timeout=20):
        deadline = time.time() + timeout
        with self.cv:
            while True:
                for line in self.lines:
                    if line.startswith(prefix):
                        return line
                left = deadline - time.time()
                if left <= 0:
                    fail("no line '%s' within %d s; output:\n%s" % (prefix, timeout, "\n".join(self.lines[-30:])))
                self.cv.wait(min(left, 0.2))

    def last_step(self):
        with self.cv:
            # The number only: a Python app's SIGTERM handler may print between "step <s>" and
            # its newline (python-exit once read "step 12python handler sig=15: ...").
            steps = [int(m.group(1)) for m in (re.match(r"step (\d+)", l) for l in self.lines) if m]
        return steps[-1] if steps else 0

    def wait_exit(self, timeout=20):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("the process did not end within %d s; output:\n%s" % (timeout, "\n".join(self.lines[-30:])))
        time.sleep(0.1)  # the reader takes the last lines
        return rc

    def output(self):
        with self.cv:
            return "\n".join(self.lines)

    def arena(self):
        out = subprocess.run([self.args.app, "check", "--arena-dir", self.dir, "--job", self.job, "--rank", "0"],
                             capture_output=True, text=True).stdout.strip()
        print("arena: " + out)
        if not out.startswith("arena step="):
            return None
        fields = dict(kv.split("=") for kv in out.split()[1:])
        return int(fields["step"]), fields["torn"] == "1", fields["content"]

    def slots(self):
        """{step: (torn, content)} of every copy in the arena's slots."""
        out = subprocess.run([self.args.app, "check", "--arena-dir", self.dir, "--job", self.job, "--rank", "0",
                              "--slots", "1"], capture_output=True, text=True).stdout
        print(out.strip())
        copies = {}
        for line in out.splitlines():
            if line.startswith("slot "):
                fields = dict(kv.split("=") for kv in line.split()[2:])
                copies[int(fields["step"])] = (fields["torn"] == "1", fields["content"])
        return copies

    def exit_fields(self, name):
        """The segment header's state and exit_status (docs/shm-format.md, offsets 320 and 324)."""
        with open(os.path.join("/dev/shm", name), "rb") as f:
            f.seek(320)
            return struct.unpack("<Ii", f.read(8))

    def segments(self):
        return [n for n in os.listdir("/dev/shm") if n.startswith("ft.%s." % self.job)]

    def terminate_mark(self):
        """The segment header's terminate_signal (docs/shm-format.md, offset 328)."""
        with open("/dev/shm/ft.%s.r0.p%d" % (self.job, self.proc.pid), "rb") as f:
            f.seek(328)
            return struct.unpack("<i", f.read(4))[0]

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        # A SIGKILLed app (killed-mid-save) leaves its segment: no worker collects it here.
        for name in os.listdir("/dev/shm"):
            if name.startswith("ft.%s." % self.job):
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except FileNotFoundError:
                    pass


def signal_after_steps(app, steps=5, sig=signal.SIGTERM):
    app.wait_line("step %d" % steps)
    before = app.last_step()
    sent = time.time()
    app.proc.send_signal(sig)
    return before, sent


def completed_at_most(app):
    """The newest step the app may have completed: the last one it printed, or the one after it.
    ft_step_done returns before the app prints its "step <s>" line, and after a signal the rank
    takes one step more (SaveOneStepMore) and dies by the signal once that step's save committed,
    which may come before the print. The saved bytes are still checked to be that step's, whole."""
    return app.last_step() + 1


def check_saved(app, before, after):
    got = app.arena()
    check(got is not None, "no committed copy in the arena; output:\n" + app.output()[-3000:])
    step, torn, content = got
    check(not torn, "the termination save is torn")
    check(content == "ok", "the copy of step %d holds bytes of another step" % step)
    check(before <= step <= after, "saved step %d, not between the last step before the signal (%d) and the "
          "newest it may have completed (%d)" % (step, before, after))
    check("termination save committed" in app.output(), "the log does not say the termination save committed")
    print("saved step %d (last step before the signal %d, completed at most %d)" % (step, before, after))
    return step


def arena_writing(path):
    """Whether a save is writing the arena now: a slot's sequence is odd (docs/checkpoints.md)."""
    try:
        with open(path, "rb") as f:
            header = f.read(320)
    except FileNotFoundError:
        return False
    if len(header) < 320:
        return False
    slots = struct.unpack_from("<I", header, 64)[0]
    return any(struct.unpack_from("<Q", header, 192 + 64 * s)[0] % 2 == 1 for s in range(min(slots, 2)))


def wait_for(cond, what, timeout=20):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            fail("not within %d s: %s" % (timeout, what))
        time.sleep(0.01)


def saved_steps(app):
    return [int(m) for m in re.findall(r"termination save committed step=(\d+)", app.output())]


def check_ended_as_without_ft(app, rc):
    """exit(0) after the app's SIGTERM handler ran: status 0, atexit handlers and stdio, no segment."""
    out = app.output()
    check(rc == 0, "exit status %d, expected 0 (the app exits 0 after its handler); output:\n%s" % (rc, out[-2000:]))
    check("atexit handler ran" in out, "the app's atexit handler did not run (or stdio was not flushed)")
    check(not app.segments(), "the segment was left in /dev/shm: %s" % app.segments())


def check_killed_at_once(app, sent):
    rc = app.wait_exit(5)
    took = time.time() - sent
    print("exit status %d after %.3f s" % (rc, took))
    check(rc == -signal.SIGTERM, "exit status %d, expected death by SIGTERM (-15)" % rc)
    check(took < 2, "took %.1f s to die: something held the signal back" % took)


def run_case(args):
    c = args.case
    if c in ("default", "second-signal", "update-running"):
        flags = ["--update-ms", "200", "--step-ms", "5"] if c == "update-running" else []
        app = App(args, flags)
        try:
            before, _ = signal_after_steps(app, 3 if c == "update-running" else 5)
            if c == "second-signal":
                time.sleep(0.005)
                app.proc.send_signal(signal.SIGTERM)
            rc = app.wait_exit()
            check(rc == -signal.SIGTERM, "exit status %d, expected death by SIGTERM (-15)" % rc)
            check_saved(app, before, completed_at_most(app))
            # The step the signal found, then one step more (SaveOneStepMore: a preempted job's
            # ranks all hold the newer of the two); a second signal adds none.
            steps = saved_steps(app)
            check(1 <= len(steps) <= 2 and steps == sorted(set(steps)) and steps[-1] - steps[0] <= 1,
                  "termination saves of steps %s, expected the step signalled and at most one more" % steps)
        finally:
            app.close()
    elif c in ("app-handler", "app-handler-after", "siginfo-handler"):
        flags = ["--handler", "info" if c == "siginfo-handler" else "app"]
        if c == "app-handler-after":
            flags.append("--handler-after")
        app = App(args, flags)
        try:
            check("reads back its own" in app.wait_line("handler "), "the app reads back another handler")
            before, _ = signal_after_steps(app)
            rc = app.wait_exit()
            out = app.output()
            check(rc == 0, "exit status %d, expected 0 (the app's handler ends the loop)\n%s" % (rc, out[-2000:]))
            ran = [l for l in out.splitlines() if l.startswith("app handler")]
            print("\n".join(ran))
            check(len(ran) == 1 and "count=1" in ran[0], "the app's handler ran %d times, expected once" % len(ran))
            check("exiting count=1" in out, "the app did not end after its handler")
            if c == "siginfo-handler":
                check(" pid=%d" % os.getpid() in ran[0], "the handler does not see the sender's pid %d: %s" %
                      (os.getpid(), ran[0]))
            check_saved(app, before, completed_at_most(app))
        finally:
            app.close()
    elif c == "joins-save":
        # First the command's save ends before SIGTERM (the step is committed: nothing more to
        # save); then SIGTERM a few ms after the command, the two saves racing.
        for signal_after_s in (None, 0.003, 0.02):
            app = App(args, ["--max-steps", "5", "--kib", "65536"])
            try:
                pid = int(app.wait_line("ready pid=").split("=")[1])
                app.wait_line("idle after step 5")
                tool = subprocess.Popen([args.tool, "save", "--job", app.job, "--ranks", "0:%d" % pid, "--runs",
                                         "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                if signal_after_s is None:
                    tool_out = tool.communicate(timeout=30)[0]
                    check(tool.returncode == 0, "the save command failed: %s" % tool_out)
                else:
                    time.sleep(signal_after_s)
                app.proc.send_signal(signal.SIGTERM)
                rc = app.wait_exit()
                try:  # the process may be gone before it acknowledged the command
                    tool.communicate(timeout=5)
                except subprocess.TimeoutExpired:
                    tool.kill()
                    tool.communicate()
                check(rc == -signal.SIGTERM, "exit status %d, expected -15" % rc)
                out = app.output()
                saves = [l for l in out.splitlines() if re.search(r"(just-in-time|termination) save: saved step=", l)]
                print("SIGTERM %s: %s" % ("after the command's ack" if signal_after_s is None else
                                          "%.3f s after the command" % signal_after_s,
                                          "; ".join(l.split(": ", 1)[1][:60] for l in saves)))
                check(len(saves) == 1, "%d saves of step 5, expected one (joined, not doubled)" % len(saves))
                if signal_after_s is None:
                    check("step 5 is already committed in the arena" in out,
                          "the termination save did not see the committed step")
                got = app.arena()
                check(got is not None and got[0] == 5 and not got[1] and got[2] == "ok",
                      "the arena holds %s, expected step 5 intact" % (got,))
            finally:
                app.close()
        # Last, the command after the termination save committed, while the rank waits for its
        # one step more (about two step times: 500 ms steps): answered by that copy, never saved
        # again into the other slot.
        app = App(args, ["--max-steps", "5", "--kib", "65536", "--step-ms", "500"])
        try:
            pid = int(app.wait_line("ready pid=").split("=")[1])
            app.wait_line("idle after step 5")
            app.proc.send_signal(signal.SIGTERM)
            deadline = time.time() + 20
            while "termination save committed" not in app.output() and time.time() < deadline:
                time.sleep(0.01)
            check("termination save committed" in app.output(), "no termination save:\n" + app.output()[-1500:])
            tool = subprocess.run([args.tool, "save", "--job", app.job, "--ranks", "0:%d" % pid, "--runs", "1"],
                                  capture_output=True, text=True, timeout=30)
            rc = app.wait_exit()
            check(rc == -signal.SIGTERM, "exit status %d, expected -15" % rc)
            out = app.output()
            saves = [l for l in out.splitlines() if re.search(r"(just-in-time|termination) save: saved step=", l)]
            print("a command after the termination save: %s; the command: %s" %
                  ("; ".join(l.split(": ", 1)[1][:60] for l in saves), tool.stdout.strip()[-120:]))
            check(tool.returncode == 0 and "saved step=5" in tool.stdout,
                  "the command was not answered with step 5: %s%s" % (tool.stdout, tool.stderr))
            check(len(saves) == 1, "%d saves of step 5, expected one (answered by the first)" % len(saves))
        finally:
            app.close()
    elif c == "stale-segment":
        app = App(args, [], stale_segment=True)
        try:
            before, _ = signal_after_steps(app)
            rc = app.wait_exit()
            check(rc == -signal.SIGTERM, "exit status %d, expected -15" % rc)
            out = app.output()
            check("libft.so disabled" not in out, "the stale segment disabled libft.so:\n" + out[-1500:])
            check("removed a stale segment" in out, "libft.so did not say it replaced the stale segment")
            check_saved(app, before, completed_at_most(app))
        finally:
            app.close()
    elif c == "step-more-keeps-older":
        # Signalled after step 4 or 5 (never a periodic step), the rank saves that step, trains
        # one step more and saves it (or a periodic save of step 6 takes it): the arena must
        # then hold that newest step and the periodic step 3, which every rank holds.
        for attempt in range(1, 6):
            app = App(args, ["--step-ms", "60"], {"FT_CKPT_EVERY": "3"})
            try:
                app.wait_line("step 4")
                app.proc.send_signal(signal.SIGTERM)
                rc = app.wait_exit()
                check(rc == -signal.SIGTERM, "exit status %d, expected death by SIGTERM (-15)" % rc)
                out = app.output()
                first = saved_steps(app)
                print("termination saves of steps %s" % first)
                if not first or first[0] % 3 == 0 or "the step after %d did not complete" % first[0] in out:
                    print("attempt %d: signalled at a periodic step, or no step more (%s); again" % (attempt, first))
                    continue
                copies = app.slots()
                newest = max(copies)
                check(newest == first[0] + 1, "the arena's newest copy is step %d, expected the step more %d" %
                      (newest, first[0] + 1))
                periodic = (first[0] // 3) * 3
                check(sorted(copies) == [periodic, newest],
                      "the arena holds steps %s; expected the periodic step %d beside the step more %d (the "
                      "termination copy of step %d is the one replaced)" % (sorted(copies), periodic, newest,
                                                                           first[0]))
                check(all(not torn and content == "ok" for torn, content in copies.values()),
                      "a copy is torn or mixed: %s" % copies)
                check("writes over that copy" in out, "the log does not say the step more replaced its first copy")
                break
            finally:
                app.close()
        else:
            fail("in 5 tries the signal never landed between periodic steps with a step more after it")
    elif c == "keeps-planned-step":
        for attempt in range(1, 6):
            app = App(args, ["--step-ms", "60"], {"FT_CKPT_EVERY": "3", "FT_NODE_ID": "n0"})
            try:
                app.wait_line("step 6")
                with open(os.path.join(app.dir, "ft-plan.%s.n0" % app.job), "w") as f:
                    f.write("ft-restore-plan 1\njob %s\nnode n0\nversion 7\nstep 3\narena_dir %s\n"
                            "rank 0 0000000000000000 0:n0:arena\nend\n" % (app.job, app.dir))
                app.wait_line("step 7")
                app.proc.send_signal(signal.SIGTERM)
                rc = app.wait_exit()
                check(rc == -signal.SIGTERM, "exit status %d, expected death by SIGTERM (-15)" % rc)
                first = saved_steps(app)
                print("termination saves of steps %s" % first)
                if not first or first[0] % 3 == 0:
                    print("attempt %d: signalled at a periodic step (%s); again" % (attempt, first))
                    continue
                copies = app.slots()
                check(3 in copies and not copies[3][0] and copies[3][1] == "ok",
                      "the arena lost the restore plan's step 3: it holds %s" % copies)
                check(max(copies) >= first[0] and 6 not in copies,
                      "the arena holds %s: expected the planned step 3 beside the termination copy (step %d or "
                      "the step more), step 6 written over" % (sorted(copies), first[0]))
                check(all(not torn and content == "ok" for torn, content in copies.values()),
                      "a copy is torn or mixed: %s" % copies)
                check("(the restore plan's, version 7) stays" in app.output(),
                      "the log does not say the plan's step stayed")
                break
            finally:
                app.close()
        else:
            fail("in 5 tries the signal never landed between periodic steps")
    elif c == "killed-mid-save":
        # The copy of 512 MiB (128 under a sanitizer, whose copies are slower) takes long enough
        # to be caught writing; a try where the save committed before the poll saw it is run again.
        for attempt in range(1, 4):
            app = App(args, ["--max-steps", "4", "--kib", str(args.state_mib * 1024), "--step-ms", "1"],
                      {"FT_CKPT_EVERY": "3", "FT_CKPT_CHECKSUM_THREADS": "1"}, tmp_dir="/dev/shm")
            try:
                app.wait_line("idle after step 4", timeout=60)
                deadline = time.time() + 20
                while True:  # the periodic save of step 3 commits after ft_step_done returned
                    got = app.arena()
                    if got is not None and got[0] == 3 or time.time() > deadline:
                        break
                    time.sleep(0.05)
                check(got is not None and got[0] == 3 and got[2] == "ok", "no periodic save of step 3: %s" % (got,))
                path = os.path.join(app.dir, "ft-ckpt.%s.0" % app.job)
                app.proc.send_signal(signal.SIGTERM)
                deadline = time.time() + 10
                caught = False
                while time.time() < deadline and app.proc.poll() is None:
                    if arena_writing(path):
                        app.proc.send_signal(signal.SIGKILL)
                        caught = True
                        break
                    time.sleep(0.0005)
                rc = app.wait_exit()
                if not caught:
                    print("attempt %d: the save ended before it was seen writing (exit %d); again" % (attempt, rc))
                    continue
                check(rc == -signal.SIGKILL, "exit status %d, expected death by SIGKILL (-9)" % rc)
                check("termination save committed" not in app.output(), "the save committed before the SIGKILL")
                got = app.arena()
                check(got is not None, "the SIGKILL mid-save left no committed copy")
                check(got[0] == 3 and not got[1] and got[2] == "ok",
                      "the arena holds %s after the SIGKILL mid-save, expected step 3 whole" % (got,))
                print("SIGKILL during the termination save of step 4: the arena holds step 3, whole")
                break
            finally:
                app.close()
        else:
            fail("in 3 tries the termination save was never seen writing")
    elif c == "blocked-read":
        app = App(args, ["--block-read"])
        try:
            app.wait_line("step 3")
            time.sleep(0.2)  # into the read
            app.proc.send_signal(signal.SIGTERM)
            rc = app.wait_exit()
            check(rc == -signal.SIGTERM, "exit status %d, expected death by SIGTERM (-15); output:\n%s" %
                  (rc, app.output()[-1500:]))
            check("exiting 0" not in app.output(), "the app's read was interrupted: it took its exit path")
            check_saved(app, 3, 3)
        finally:
            app.close()
    elif c == "ignored":
        app = App(args, ["--handler", "ign"])
        try:
            before, _ = signal_after_steps(app)
            line = app.wait_line("step %d " % (before + 30))  # it runs on
            check(app.proc.poll() is None, "the process ended although it ignores SIGTERM")
            check(line.endswith(" eintr=0"), "a sleep was interrupted by the ignored signal: " + line)
            check(app.terminate_mark() == 0, "the segment says the process was told to terminate")
            check("termination save" not in app.output(), "an ignored SIGTERM took a termination save")
            check(app.arena() is None, "an ignored SIGTERM committed a copy")
        finally:
            app.close()
    elif c == "handler-continues":
        app = App(args, ["--handler", "log"])
        try:
            before, _ = signal_after_steps(app)
            app.wait_line("app handler logged sig=15 count=1")
            first = check_saved(app, before, completed_at_most(app))
            wait_for(lambda: app.terminate_mark() == 0, "the terminating mark cleared after the handler returned")
            n_first = len(saved_steps(app))  # the step signalled, and maybe the one after it
            again = app.last_step() + 3
            before, _ = signal_after_steps(app, again)
            app.wait_line("app handler logged sig=15 count=2")
            wait_for(lambda: len(saved_steps(app)) > n_first, "a second termination save for the second SIGTERM")
            second = saved_steps(app)[n_first]
            check(second > first, "the second save holds step %d, not newer than the first's %d" % (second, first))
            check_saved(app, before, completed_at_most(app))
            wait_for(lambda: app.terminate_mark() == 0, "the terminating mark cleared again")
            app.wait_line("step %d " % (app.last_step() + 2))
            check(app.proc.poll() is None, "the process ended although its handler returned")
            print("saved step %d, then step %d for the second SIGTERM; running on" % (first, second))
        finally:
            app.close()
    elif c in ("resethand-exit", "python-exit"):
        if c == "python-exit":
            app = App(args, [], cmd=[sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                  "term_py_app.py")])
        else:
            app = App(args, ["--handler", "app", "--resethand"])
        try:
            before, _ = signal_after_steps(app)
            rc = app.wait_exit()
            check_saved(app, before, completed_at_most(app))
            check_ended_as_without_ft(app, rc)
        finally:
            app.close()
    elif c in ("sigset", "sysv_signal", "bsd_signal", "strict-c-signal"):
        if c == "strict-c-signal":
            app = App(args, [], cmd=[args.strict_c_app])
        else:
            app = App(args, ["--handler", "app", "--handler-after", "--install", c])
        try:
            if c != "strict-c-signal":
                check("reads back its own" in app.wait_line("handler "), "the app reads back another handler")
            before, _ = signal_after_steps(app)
            rc = app.wait_exit()
            out = app.output()
            check(rc == 0, "exit status %d, expected 0 (the app's handler ends the loop)\n%s" % (rc, out[-2000:]))
            check(out.count("app handler sig=15") == 1, "the app's handler did not run once")
            check_saved(app, before, completed_at_most(app))
        finally:
            app.close()
    elif c in ("exit-failure", "exit-clean", "exit-in-update"):
        code = 0 if c == "exit-clean" else 1
        flags = ["--exit-after", "5", "--exit-code", str(code)] + (["--exit-in-update"] if c == "exit-in-update" else [])
        app = App(args, flags)
        try:
            rc = app.wait_exit()
            out = app.output()
            check(rc == code, "exit status %d, expected %d; output:\n%s" % (rc, code, out[-2000:]))
            if code == 0:
                check(not app.segments(), "the segment was left in /dev/shm: %s" % app.segments())
            else:
                # A failing exit leaves its segment, Exited with the status, for the worker to
                # report and reclaim (docs/shm-format.md).
                segs = app.segments()
                check(len(segs) == 1, "a failing exit leaves its segment for the worker: %s" % segs)
                state, status = app.exit_fields(segs[0])
                check(state == 2 and status == code, "the segment says state %d exit_status %d, expected "
                      "2 (exited) and %d" % (state, status, code))
            got = app.arena()
            if c == "exit-failure":
                check(got is not None, "no committed copy after exit(1); output:\n" + out[-2000:])
                check(got == (5, False, "ok"), "the arena holds %s, expected step 5 whole" % (got,))
                check("exit status 1: termination save committed step=5" in out, "the log does not say why it saved")
            elif c == "exit-clean":
                check(got is None, "exit(0) committed a copy: %s" % (got,))
                check("termination save" not in out, "exit(0) took a save")
            else:
                check(got is None or got[1] or (got[0] == 5 and got[2] == "ok"),
                      "the arena holds %s: a copy of two steps" % (got,))
                check("was still running" in out, "the exit save did not see the update running:\n" + out[-2000:])
        finally:
            app.close()
    elif c in ("uncaught-exception", "uncaught-exception-app-handler", "uncaught-exception-app-handler-late",
               "uncaught-exception-app-handler-late-chain", "python-terminate"):
        if c == "python-terminate":
            app = App(args, [], cmd=[sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                  "term_py_app.py"), "--terminate-after", "5"])
        else:
            handler = {"uncaught-exception-app-handler": ["--app-terminate"],
                       "uncaught-exception-app-handler-late": ["--app-terminate", "--late"],
                       "uncaught-exception-app-handler-late-chain": ["--app-terminate", "--late", "--chain"]}
            app = App(args, ["--throw-after", "5"] + handler.get(c, []))
        try:
            rc = app.wait_exit()
            out = app.output()
            check(rc == -signal.SIGABRT, "exit status %d, expected death by SIGABRT; output:\n%s" % (rc, out[-2000:]))
            got = app.arena()
            check(got == (5, False, "ok"), "the arena holds %s, expected step 5 whole; output:\n%s" % (got, out[-2000:]))
            check("std::terminate: termination save committed step=5" in out, "the log does not say why it saved:\n" +
                  out[-2000:])
            if c != "python-terminate":
                said = ("app terminate handler" if "app-handler" in c
                        else "terminate called after throwing an instance of 'std::runtime_error'")
                check(said in out, "the replaced terminate handler did not run after the save:\n" + out[-2000:])
                check(out.count(said) == 1, "the terminate handler ran %d times:\n%s" % (out.count(said), out[-2000:]))
                check(out.index("std::terminate: termination save committed") < out.index(said),
                      "the app's terminate handler ran before the save:\n" + out[-2000:])
        finally:
            app.close()
    elif c in ("return-failure", "return-failure-static"):
        flags = ["--return-after", "5", "--kib", "64"] + (["--static-state"] if c.endswith("static") else [])
        app = App(args, flags)
        try:
            rc = app.wait_exit()
            out = app.output()
            check(rc == 1, "exit status %d, expected 1; output:\n%s" % (rc, out[-2000:]))
            check("return 1 from main after step 5" in out, "the app did not return from main:\n" + out[-2000:])
            got = app.arena()
            if c == "return-failure":
                check(got is None, "the exit save copied freed memory: the arena holds %s" % (got,))
                check("exit status 1: no save: main returned, and the registered host buffer 'state' is not in static storage" in out,
                      "the log does not say why nothing was saved:\n" + out[-2000:])
            else:
                check(got == (5, False, "ok"), "the arena holds %s, expected step 5 whole; output:\n%s" %
                      (got, out[-2000:]))
                check("exit status 1: termination save committed step=5" in out, "the log does not say why it saved")
        finally:
            app.close()
    elif c == "save-on-failure":
        app = App(args, ["--save-on-failure-after", "5"])
        try:
            check(app.wait_line("early result=") == "early result=2",
                  "ft_save_on_failure before registration is not FT_INVALID_ARGUMENT")
            rc = app.wait_exit()
            out = app.output()
            check(rc == 0, "exit status %d, expected 0; output:\n%s" % (rc, out[-2000:]))
            check("save_on_failure results=0,0" in out, "ft_save_on_failure did not return FT_OK twice:\n" + out[-2000:])
            check(saved_steps(app) == [5], "saves %s, expected one of step 5" % saved_steps(app))
            check("already committed" in out, "the second call did not find step 5 committed")
            got = app.arena()
            check(got == (5, False, "ok"), "the arena holds %s, expected step 5 whole" % (got,))
        finally:
            app.close()
    elif c in ("nothing-registered", "disabled", "off"):
        flags = ["--register", "0"] if c == "nothing-registered" else []
        env = {"FT_ENABLE": "0"} if c == "disabled" else {"FT_CKPT_ON_SIGNAL": "none"} if c == "off" else {}
        app = App(args, flags, env)
        try:
            _, sent = signal_after_steps(app)
            check_killed_at_once(app, sent)
            check(app.arena() is None, "a copy was committed")
        finally:
            app.close()
    elif c == "forked-child":
        app = App(args, ["--fork-child"])
        child = int(app.wait_line("child pid=").split("=")[1])
        try:
            sent = time.time()
            os.kill(child, signal.SIGTERM)
            deadline = time.time() + 2
            while time.time() < deadline:
                try:  # term_app never reaps it: dead, it is a zombie of the parent
                    with open("/proc/%d/stat" % child) as f:
                        if f.read().split(")")[1].split()[0] == "Z":
                            break
                except FileNotFoundError:
                    break
                time.sleep(0.01)
            else:
                fail("the forked child still runs 2 s after SIGTERM")
            print("the child ended %.3f s after SIGTERM" % (time.time() - sent))
            check("termination save" not in app.output(), "the child's SIGTERM made a save")
            check(app.proc.poll() is None, "the parent ended with its child")
            before, _ = signal_after_steps(app, app.last_step() + 2)
            rc = app.wait_exit()
            check(rc == -signal.SIGTERM, "the parent's exit status %d, expected -15" % rc)
            check_saved(app, before, completed_at_most(app))
        finally:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
            app.close()
    else:
        fail("unknown case " + c)
    print("PASS " + c)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--app", required=True)
    p.add_argument("--libft", required=True)
    p.add_argument("--case", required=True)
    p.add_argument("--tool", help="ckpt_bench_tool (joins-save posts a save command with it)")
    p.add_argument("--strict-c-app", help="term_strict_c_app (strict-c-signal)")
    p.add_argument("--state-mib", type=int, default=512, help="killed-mid-save: the app's registered state")
    run_case(p.parse_args())


if __name__ == "__main__":
    main()
