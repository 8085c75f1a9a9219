#!/usr/bin/env python3
"""Tests of launch.py with small Python programs as ranks (no GPU stand-in needed).

usage: launch_test.py PATH/TO/launch.py
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

LAUNCH = None
PY = sys.executable


def launch(launcher_args, program, timeout=30, env=None):
    """Runs the launcher to completion: (returncode, stdout, stderr, seconds)."""
    t0 = time.monotonic()
    p = subprocess.run([PY, LAUNCH] + launcher_args + ["--", PY, "-c", program],
                       capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def pids_from(stderr):
    return {int(r): int(p) for r, p in re.findall(r"\[launch\] rank (\d+) \S+ local \d+ pid (\d+)", stderr)}


def exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of someone else's child still "exists": look at its state.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class LaunchTest(unittest.TestCase):
    def test_environment_and_prefixes(self):
        prog = ("import os, json; keys = ['RANK','LOCAL_RANK','WORLD_SIZE','LOCAL_WORLD_SIZE',"
                "'GROUP_RANK','ROLE_RANK','MASTER_ADDR','MASTER_PORT','TORCHELASTIC_RUN_ID',"
                "'FT_NODE_ID','PASSED_THROUGH']; print(json.dumps({k: os.environ.get(k) for k in keys}))")
        env = dict(os.environ, PASSED_THROUGH="yes")
        rc, out, err, _ = launch(["--nodes", "2", "--ranks-per-node", "3", "--run-id", "job7"], prog, env=env)
        self.assertEqual(rc, 0, err)
        seen = {}
        for line in out.splitlines():
            m = re.match(r"\[rank (\d+)\] (.*)$", line)
            self.assertIsNotNone(m, line)
            seen[int(m.group(1))] = json.loads(m.group(2))
        self.assertEqual(sorted(seen), list(range(6)))
        ports = set()
        for rank, e in seen.items():
            self.assertEqual(e["RANK"], str(rank))
            self.assertEqual(e["ROLE_RANK"], str(rank))
            self.assertEqual(e["LOCAL_RANK"], str(rank % 3))
            self.assertEqual(e["GROUP_RANK"], str(rank // 3))
            self.assertEqual(e["FT_NODE_ID"], "node%d" % (rank // 3))
            self.assertEqual(e["WORLD_SIZE"], "6")
            self.assertEqual(e["LOCAL_WORLD_SIZE"], "3")
            self.assertEqual(e["MASTER_ADDR"], "127.0.0.1")
            self.assertEqual(e["TORCHELASTIC_RUN_ID"], "job7")
            self.assertEqual(e["PASSED_THROUGH"], "yes")
            ports.add(e["MASTER_PORT"])
        self.assertEqual(len(ports), 1)
        self.assertTrue(0 < int(ports.pop()) < 65536)

    def test_node_names_and_per_node_environment(self):
        prog = ("import os, json; print(json.dumps({k: os.environ.get(k) for k in "
                "['FT_NODE_ID', 'GROUP_RANK', 'FT_CKPT_ARENA_DIR', 'FT_CKPT_DIR', 'PLAIN']}))")
        rc, out, err, _ = launch(["--nodes", "2", "--ranks-per-node", "2", "--node-names", "node0,node2",
                                  "--node-env", "FT_CKPT_ARENA_DIR=/dev/shm/j/{node}",
                                  "--node-env", "FT_CKPT_DIR=/tmp/{node}/local-{node}",
                                  "--node-env", "PLAIN=a=b"], prog)
        self.assertEqual(rc, 0, err)
        seen = {int(m.group(1)): json.loads(m.group(2)) for m in re.finditer(r"^\[rank (\d+)\] (.*)$", out, re.M)}
        self.assertEqual(sorted(seen), [0, 1, 2, 3])
        for rank, e in seen.items():
            node = ["node0", "node2"][rank // 2]
            self.assertEqual(e["FT_NODE_ID"], node)
            self.assertEqual(e["GROUP_RANK"], str(rank // 2))  # the position, not the name
            self.assertEqual(e["FT_CKPT_ARENA_DIR"], "/dev/shm/j/" + node)
            self.assertEqual(e["FT_CKPT_DIR"], "/tmp/%s/local-%s" % (node, node))
            self.assertEqual(e["PLAIN"], "a=b")
        self.assertEqual(sorted(pids_from(err)), [0, 1, 2, 3])
        self.assertIn("rank 3 node2 local 1 pid", err)

    def test_master_port_and_log_dir(self):
        with tempfile.TemporaryDirectory() as d:
            prog = "import os, sys; print('out', os.environ['MASTER_PORT']); print('err', file=sys.stderr)"
            rc, out, err, _ = launch(["--nodes", "1", "--ranks-per-node", "2", "--master-port", "29555",
                                      "--log-dir", d], prog)
            self.assertEqual(rc, 0, err)
            self.assertNotIn("[rank", out)
            for r in range(2):
                with open(os.path.join(d, "rank%d.log" % r)) as f:
                    text = f.read()
                self.assertIn("out 29555", text)
                self.assertIn("err", text)

    def test_failure_stops_the_others_after_grace(self):
        prog = ("import os, sys, time\n"
                "if os.environ['RANK'] == '2': sys.exit(3)\n"
                "time.sleep(60)\n")
        rc, _, err, secs = launch(["--nodes", "2", "--ranks-per-node", "2", "--grace", "0.5",
                                   "--kill-after", "1"], prog)
        self.assertEqual(rc, 3, err)
        self.assertIn("rank 2 (node1, pid", err)
        self.assertIn("exited with code 3", err)
        self.assertLess(secs, 15)
        for pid in pids_from(err).values():
            self.assertFalse(exists(pid), pid)

    def test_keep_going_waits_for_the_others(self):
        prog = ("import os, sys, time\n"
                "if os.environ['RANK'] == '1': sys.exit(5)\n"
                "time.sleep(1.5); print('survived')\n")
        rc, out, err, secs = launch(["--nodes", "1", "--ranks-per-node", "3", "--grace", "0.1",
                                     "--keep-going"], prog)
        self.assertEqual(rc, 5, err)
        self.assertEqual(out.count("survived"), 2, out)
        self.assertGreaterEqual(secs, 1.5)

    def test_signal_death_is_reported(self):
        prog = ("import os, signal, time\n"
                "if os.environ['RANK'] == '0': os.kill(os.getpid(), signal.SIGKILL)\n"
                "time.sleep(60)\n")
        rc, _, err, _ = launch(["--nodes", "1", "--ranks-per-node", "2", "--grace", "0.2"], prog)
        self.assertEqual(rc, 128 + 9, err)
        self.assertIn("killed by signal SIGKILL (9)", err)

    def test_timeout_exits_124_and_sigkills_stubborn_ranks(self):
        prog = ("import signal, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "time.sleep(60)\n")
        # The ranks must have set SIGTERM aside before the timeout: 5 s leaves a loaded machine
        # time to start two Pythons (with 1 s one could still be starting and die of SIGTERM).
        rc, _, err, secs = launch(["--nodes", "2", "--ranks-per-node", "1", "--timeout", "5",
                                   "--kill-after", "0.5"], prog)
        self.assertEqual(rc, 124, err)
        self.assertIn("SIGKILL to 2 ranks", err)
        self.assertLess(secs, 20)
        for pid in pids_from(err).values():
            self.assertFalse(exists(pid), pid)

    def test_sigterm_to_launcher_kills_the_group(self):
        prog = "import time; print('up', flush=True); time.sleep(60)"
        p = subprocess.Popen([PY, LAUNCH, "--nodes", "2", "--ranks-per-node", "2", "--", PY, "-c", prog],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ups = 0
        while ups < 4:
            line = p.stdout.readline()
            self.assertTrue(line, "launcher output ended early")
            ups += "up" in line
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        pids = pids_from(err)
        self.assertEqual(len(pids), 4)
        for pid in pids.values():
            self.assertFalse(exists(pid), pid)

    def test_ranks_die_with_a_sigkilled_launcher(self):
        prog = "import time; print('up', flush=True); time.sleep(60)"
        p = subprocess.Popen([PY, LAUNCH, "--nodes", "1", "--ranks-per-node", "2", "--", PY, "-c", prog],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2):
            self.assertIn("up", p.stdout.readline())
        p.kill()
        p.wait()
        err = p.stderr.read()
        p.stdout.close()
        p.stderr.close()
        pids = pids_from(err)
        self.assertEqual(len(pids), 2, err)
        deadline = time.monotonic() + 20
        while any(exists(pid) for pid in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in pids.values():
            self.assertFalse(exists(pid), pid)

    def test_torchrun_teardown_terms_the_rest_a_tenth_of_a_second_after_a_failure(self):
        # Rank 0 fails once the others have their SIGTERM handler (a loaded host can start a
        # Python rank slower than the 0.1 s teardown); they note when SIGTERM came and exit 0 on
        # it: the launcher reports the failure, and SIGTERM reached them within about 0.1 s
        # (+ the poll period), and not the SIGKILL 30 s later.
        ready_dir = tempfile.TemporaryDirectory(prefix="launch-ready-")
        self.addCleanup(ready_dir.cleanup)
        ready = ready_dir.name
        prog = ("import os, signal, sys, time\n"
                "ready = %r\n"
                "t0 = time.time()\n"
                "if os.environ['RANK'] == '0':\n"
                "    while len(os.listdir(ready)) < 3 and time.time() - t0 < 20: time.sleep(0.02)\n"
                "    sys.exit(3)\n"
                "def on_term(s, f):\n"
                "    print('term after %%.2f' %% (time.time() - t0), flush=True); sys.exit(0)\n"
                "signal.signal(signal.SIGTERM, on_term)\n"
                "open(os.path.join(ready, os.environ['RANK']), 'w').close()\n"
                "time.sleep(20)\n") % ready
        rc, out, err, secs = launch(["--nodes", "2", "--ranks-per-node", "2", "--teardown", "torchrun"], prog)
        self.assertEqual(rc, 3, err)
        waits = [float(x) for x in re.findall(r"term after ([0-9.]+)", out)]
        self.assertEqual(len(waits), 3, out + err)
        self.assertLess(secs, 10, "SIGTERM did not end them: %s" % err)
        self.assertIn("stopping the other ranks in 0.1 s", err)

    def test_preemption_terms_every_rank_and_kills_what_outlives_the_grace(self):
        # Every rank gets SIGTERM at once; one ignores it and is SIGKILLed --kill-after later.
        prog = ("import os, signal, sys, time\n"
                "if os.environ['RANK'] == '1': signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('up', flush=True)\n"
                "time.sleep(30)\n")
        rc, out, err, secs = launch(["--nodes", "1", "--ranks-per-node", "2", "--teardown", "slurm",
                                     "--kill-after", "1", "--preempt-after", "1"], prog)
        self.assertEqual(rc, 128 + signal.SIGTERM, err)
        self.assertIn("preemption after 1.0 s", err)
        self.assertIn("SIGKILL to 1 ranks that outlived SIGTERM", err)
        self.assertIn("rank 0 (node0, pid", err)
        self.assertRegex(err, r"rank 0 .*killed by signal SIGTERM")
        self.assertRegex(err, r"rank 1 .*killed by signal SIGKILL")
        self.assertLess(secs, 10)

    def test_restarts_in_place_until_a_group_succeeds(self):
        # Rank 1 fails in the first two groups; the third ends cleanly. Every group has the
        # same ranks on the same nodes, the same run id, and its own restart count. Rank 1 fails
        # only once rank 0 has printed (a marker file): on a loaded host the group's teardown
        # once ended rank 0 before its interpreter got that far.
        with tempfile.TemporaryDirectory() as d:
            prog = ("import os, sys, json, time\n"
                    "print(json.dumps({k: os.environ.get(k) for k in ['TORCHELASTIC_RESTART_COUNT', "
                    "'TORCHELASTIC_MAX_RESTARTS', 'TORCHELASTIC_RUN_ID', 'FT_NODE_ID', 'TAG']}), flush=True)\n"
                    "marker = os.path.join(%r, os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
                    "if os.environ['RANK'] == '0': open(marker, 'w').close()\n"
                    "if os.environ['RANK'] == '1' and os.environ['TORCHELASTIC_RESTART_COUNT'] != '2':\n"
                    "    start = time.time()\n"
                    "    while not os.path.exists(marker) and time.time() - start < 30: time.sleep(0.01)\n"
                    "    sys.exit(7)\n" % d)
            rc, out, err, _ = launch(["--nodes", "2", "--ranks-per-node", "1", "--teardown", "torchrun",
                                      "--max-restarts", "3", "--run-id", "j1", "--node-env", "TAG={node}-{restart}"],
                                     prog)
        self.assertEqual(rc, 0, err)
        self.assertEqual(err.count("restart 1 of 3 in place"), 1, err)
        self.assertEqual(err.count("restart 2 of 3 in place"), 1, err)
        self.assertNotIn("restart 3 of 3", err)
        seen = [(int(m.group(1)), json.loads(m.group(2))) for m in re.finditer(r"^\[rank (\d+)\] (.*)$", out, re.M)]
        self.assertEqual(len(seen), 6, out)
        for rank, e in seen:
            self.assertEqual(e["TORCHELASTIC_RUN_ID"], "j1")
            self.assertEqual(e["TORCHELASTIC_MAX_RESTARTS"], "3")
            self.assertEqual(e["FT_NODE_ID"], "node%d" % rank)
            self.assertEqual(e["TAG"], "node%d-%s" % (rank, e["TORCHELASTIC_RESTART_COUNT"]))
        self.assertEqual(sorted(e["TORCHELASTIC_RESTART_COUNT"] for _, e in seen), ["0", "0", "1", "1", "2", "2"])

    def test_restarts_run_out_and_the_last_failure_is_the_status(self):
        prog = "import os, sys\nif os.environ['RANK'] == '0': sys.exit(5)\nimport time; time.sleep(30)\n"
        rc, _, err, secs = launch(["--nodes", "1", "--ranks-per-node", "2", "--teardown", "torchrun",
                                   "--kill-after", "1", "--max-restarts", "1", "--restart-delay", "0.3"], prog)
        self.assertEqual(rc, 5, err)
        self.assertEqual(err.count("restart 1 of 1 in place in 0.3 s"), 1, err)
        self.assertEqual(err.count("exited with code 5"), 2, err)
        self.assertLess(secs, 20)

    def test_a_clean_group_is_not_restarted(self):
        rc, _, err, _ = launch(["--nodes", "1", "--ranks-per-node", "2", "--max-restarts", "2"], "pass")
        self.assertEqual(rc, 0, err)
        self.assertNotIn("restart", err)

    def test_run_id_as_torchrun_gives_it(self):
        prog = "import os; print(os.environ['TORCHELASTIC_RUN_ID'])"
        rc, out, err, _ = launch(["--nodes", "1", "--ranks-per-node", "1"], prog)
        self.assertEqual(rc, 0, err)
        self.assertIn("[rank 0] none", out)  # torchrun's static rendezvous
        ids = set()
        for _ in range(2):
            rc, out, err, _ = launch(["--nodes", "1", "--ranks-per-node", "1", "--standalone"], prog)
            self.assertEqual(rc, 0, err)
            m = re.search(r"^\[rank 0\] ([0-9a-f-]{36})$", out, re.M)
            self.assertIsNotNone(m, out)
            ids.add(m.group(1))
        self.assertEqual(len(ids), 2)  # a fresh id per launch

    def test_usage_errors(self):
        p = subprocess.run([PY, LAUNCH, "--nodes", "1", "--ranks-per-node", "1"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no program", p.stderr)
        p = subprocess.run([PY, LAUNCH, "--nodes", "1", "--ranks-per-node", "1", "--", "/nonexistent/prog"],
                           capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("cannot start", p.stderr)
        for bad, words in ((["--node-names", "a"], "names 1 nodes"), (["--node-names", "a,a"], "distinct"),
                           (["--node-env", "NOVALUE"], "KEY=VALUE")):
            p = subprocess.run([PY, LAUNCH, "--nodes", "2", "--ranks-per-node", "1"] + bad + ["--", PY, "-c", "0"],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn(words, p.stderr)


if __name__ == "__main__":
    LAUNCH = sys.argv.pop(1)
    unittest.main()
