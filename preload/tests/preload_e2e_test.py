#!/usr/bin/env python3
"""libft.so end to end: trainsim on the gpusim stand-ins under LD_PRELOAD=libft.so.

  --case trainsim  8 ranks (dp=2 tp=2 pp=2): checksums equal to the run without libft.so and
                   to trainsim_reference; a reader (ft_drain) following the segments sees, for
                   every communicator, the same collective sequence on every member, every op
                   started and completed, p2p numbered per (peer, direction), clean exit.
  --case fail-open no usable segment (FT_RING_RECORDS=3: creation refused) and a tiny ring
                   (FT_RING_RECORDS=4, nobody reading: records dropped): same checksums.
  --case hang      trainsim --fault hang-kernel: while the job hangs, ftdump shows every rank
                   IN FLIGHT for seconds; the hung rank's op never started on its GPU, a peer's
                   did (it waits inside the collective).
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tests", "workloads", "trainsim", "tests"))
import trainsim_common as tc  # noqa: E402

MODEL = ["--dp", "2", "--tp", "2", "--pp", "2", "--steps", "10"]
REC_ENTER, REC_START, REC_END, REC_COMM = 2, 3, 4, 1
REC_KERNEL_COUNT, REC_KERNEL_SAMPLE = 9, 10
FLAG_P2P, FLAG_ERROR, FLAG_UNTIMED = 1, 16, 32
KV_RE = re.compile(r"(\w+)=(\S+)")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--launch", required=True)
    p.add_argument("--trainsim", required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--libft", required=True)
    p.add_argument("--drain", required=True)
    p.add_argument("--ftdump", required=True)
    p.add_argument("--case", required=True)
    args = p.parse_args()
    tc.check_environment()
    return args


def job_env(args, job, **extra):
    env = dict(os.environ)
    env.update({"LD_PRELOAD": args.libft, "FT_JOB": job})
    env.update(extra)
    return env


def launch_cmd(args, flags, launch_flags=()):
    # --ft off: these cases test detection; with no ftworker there is no restore plan to wait for.
    return ([sys.executable, args.launch, "--nodes", "2", "--ranks-per-node", "4"] + list(launch_flags) +
            ["--", args.trainsim] + flags + ["--ft", "off"])


def run(args, env, flags=MODEL, timeout=100):
    t0 = time.monotonic()
    p = subprocess.run(launch_cmd(args, flags, ["--timeout", "90"]), env=env, capture_output=True,
                       text=True, timeout=timeout)
    secs = time.monotonic() - t0
    if p.returncode != 0:
        print(p.stdout[-3000:], p.stderr[-3000:])
    tc.check(p.returncode == 0, "launcher exited %d" % p.returncode)
    return tc.checksums(p.stdout), p.stderr, secs


def leftover(job):
    prefix = "ft.%s." % job
    return [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]


def parse_drain(text):
    segs, recs, slots, ends = {}, [], [], {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        kv = dict(KV_RE.findall(rest))
        if kind == "segment":
            segs[int(kv["rank"])] = kv
        elif kind == "rec":
            recs.append({k: (int(v, 16) if k == "comm" else int(v)) for k, v in kv.items()})
        elif kind == "slot":
            slots.append({k: (int(v, 16) if k == "comm" else int(v)) for k, v in kv.items()})
        elif kind == "end":
            ends[int(kv["rank"])] = {k: int(v) for k, v in kv.items()}
    return segs, recs, slots, ends


def case_trainsim(args):
    plain, _, plain_secs = run(args, dict(os.environ))
    job = "preload_e2e_%d" % os.getpid()
    drain = subprocess.Popen([args.drain, "--job", job, "--ranks", "8", "--timeout", "60"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got, _, secs = run(args, job_env(args, job))
    out, err = drain.communicate(timeout=70)
    tc.check(drain.returncode == 0, "ft_drain exited %d: %s" % (drain.returncode, err))
    print("without libft.so %.2f s, with %.2f s" % (plain_secs, secs))
    tc.check(got == plain, "checksums differ from the run without libft.so:\n%s\n%s" % (got, plain))
    tc.verify_against_reference(args, got, MODEL, 8)
    tc.check(not leftover(job), "segments left behind: %s" % leftover(job))

    segs, recs, slots, ends = parse_drain(out)
    tc.check(sorted(segs) == list(range(8)), "segments of ranks %s" % sorted(segs))
    for r, e in ends.items():
        tc.check(e["state"] == 2, "rank %d ended in state %d, not exited" % (r, e["state"]))
        tc.check(e["dropped"] == 0, "rank %d dropped %d records" % (r, e["dropped"]))
        tc.check(e["heartbeats"] > 0 and e["calls"] > 0, "rank %d: %s" % (r, e))

    # Kernel names from __cudaRegisterFunction (trainsim registers its kernels before main).
    for r in range(8):
        names = [x for x in recs if x["type"] == 7 and x["rank"] == r]
        tc.check(names, "rank %d recorded no kernel names" % r)

    # Communicators: identity equal on every member, each member exactly once.
    members = {}
    for x in recs:
        if x["type"] == REC_COMM:
            size = x["a"] >> 32
            members.setdefault(x["comm"], {})[x["rank"]] = (x["a"] & 0xffffffff, size)
    sizes = sorted(len(m) for m in members.values())
    tc.check(sizes == [2] * 12 + [8], "communicator member counts %s (want world + 12 pairs)" % sizes)
    for comm, m in members.items():
        tc.check(sorted(cr for cr, _ in m.values()) == list(range(len(m))),
                 "comm %016x: member ranks %s" % (comm, m))
        tc.check(all(sz == len(m) for _, sz in m.values()), "comm %016x: sizes %s" % (comm, m))

    # Collectives: per comm, the same (seq -> op, bytes) on every member, seq 1..n.
    colls = {}
    for x in recs:
        if x["type"] == REC_ENTER and not x["flags"] & FLAG_P2P:
            colls.setdefault(x["comm"], {}).setdefault(x["rank"], []).append((x["seq"], x["a"] & 0xff, x["b"]))
    tc.check(colls, "no collective was recorded")
    total = 0
    for comm, per_rank in colls.items():
        tc.check(set(per_rank) == set(members[comm]), "comm %016x: collectives from ranks %s, members %s" %
                 (comm, sorted(per_rank), sorted(members[comm])))
        seqs = list(per_rank.values())
        tc.check(all(s == seqs[0] for s in seqs), "comm %016x: members disagree:\n%s" % (comm, per_rank))
        tc.check([s for s, _, _ in seqs[0]] == list(range(1, len(seqs[0]) + 1)),
                 "comm %016x: sequence numbers %s" % (comm, [s for s, _, _ in seqs[0]]))
        total += len(seqs[0])
    print("OK: %d communicators; %d collectives, sequence numbers equal on every member" % (len(members), total))

    # P2P: numbered per (comm, peer, direction); sends of a to b pair with receives of b from a.
    p2p = {}
    for x in recs:
        if x["type"] == REC_ENTER and x["flags"] & FLAG_P2P:
            peer = x["a"] >> 32
            p2p.setdefault((x["comm"], x["rank"], peer, x["a"] & 0xff), []).append(x["seq"])
    tc.check(p2p, "no send/recv was recorded")
    for key, seqs in p2p.items():
        tc.check(seqs == list(range(1, len(seqs) + 1)), "p2p %s numbered %s" % (key, seqs))
    rank_of = {(comm, r): cr for comm, m in members.items() for r, (cr, _) in m.items()}
    for (comm, r, peer, op), seqs in p2p.items():
        if op == 10:  # send: the peer's receives from us
            peer_global = [g for (c, g), cr in rank_of.items() if c == comm and cr == peer][0]
            mine = rank_of[(comm, r)]
            tc.check(len(p2p.get((comm, peer_global, mine, 11), [])) == len(seqs),
                     "rank %d sent %d to %d on %016x, which received %d" %
                     (r, len(seqs), peer_global, comm, len(p2p.get((comm, peer_global, mine, 11), []))))

    # Every entered op was seen started and completed on the GPU, without error.
    key = lambda x: (x["rank"], x["comm"], x["seq"], x["flags"] & FLAG_P2P, x["a"])
    entered = {key(x): x for x in recs if x["type"] == REC_ENTER}
    started = {key(x) for x in recs if x["type"] == REC_START}
    ended = {key(x): x for x in recs if x["type"] == REC_END}
    missing = [k for k in entered if k not in ended]
    tc.check(not missing, "%d ops never completed, e.g. %s" % (len(missing), missing[:3]))
    tc.check(not [k for k in entered if k not in started], "ops completed without a start record")
    bad = [x for x in ended.values() if x["flags"] & (FLAG_ERROR | FLAG_UNTIMED)]
    tc.check(not bad, "ops completed with error/untimed flags: %s" % bad[:3])
    durations = sorted(x["b"] for x in ended.values())
    print("OK: %d ops started and completed; duration p50 %.3f ms, max %.3f ms" %
          (len(ended), durations[len(durations) // 2] / 1e6, durations[-1] / 1e6))

    # Kernel launches: counted per stream on every rank (the last count written at exit), none
    # sampled (FT_KERNEL_SAMPLE is off by default).
    launches = {}
    for x in recs:
        if x["type"] == REC_KERNEL_COUNT:
            launches[(x["rank"], x["a"])] = x["b"]
    per_rank = {r: sum(n for (rr, _), n in launches.items() if rr == r) for r in range(8)}
    steps = int(MODEL[MODEL.index("--steps") + 1])
    tc.check(all(n >= steps for n in per_rank.values()), "kernel launches per rank %s, want >= %d" % (per_rank, steps))
    tc.check(not [x for x in recs if x["type"] == REC_KERNEL_SAMPLE], "kernels sampled with FT_KERNEL_SAMPLE unset")
    print("OK: kernel launches counted on every rank: %s" % per_rank)

    # The in-flight table at exit: nothing in flight anywhere.
    for s in slots:
        tc.check(s["entered"] == s["started"] == s["completed"],
                 "rank %d comm %016x left %s" % (s["rank"], s["comm"], s))
    busy = [s for s in slots if s["entered"] > 0]
    tc.check(len(busy) == 8 * 3, "%d slots saw ops, want 8 ranks x (dp, tp all-reduces, pp send/recv)" % len(busy))
    print("OK: in-flight tables of %d slots drained at exit" % len(slots))


def case_fail_open(args):
    for label, extra in (("no segment", {"FT_RING_RECORDS": "3"}), ("tiny ring", {"FT_RING_RECORDS": "4"})):
        job = "preload_failopen_%d" % os.getpid()
        got, err, secs = run(args, job_env(args, job, **extra))
        tc.verify_against_reference(args, got, MODEL, 8)
        tc.check(not leftover(job), "segments left behind: %s" % leftover(job))
        if label == "no segment":
            tc.check("libft.so disabled" in err, "no warning about the disabled library:\n%s" % err[-2000:])
        print("OK: %s: same checksums in %.2f s" % (label, secs))


def case_hang(args):
    job = "preload_hang_%d" % os.getpid()
    fault_rank, fault_step = 1, 2
    with tempfile.TemporaryDirectory() as log_dir:
        flags = ["--dp", "2", "--tp", "2", "--pp", "2", "--steps", "10", "--verbose", "--fault",
                 "hang-kernel", "--fault-rank", str(fault_rank), "--fault-step", str(fault_step)]
        cmd = launch_cmd(args, flags, ["--keep-going", "--timeout", "60", "--log-dir", log_dir])
        launcher = subprocess.Popen(cmd, env=job_env(args, job), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
        lines = []
        try:
            while len(tc.pids_from("".join(lines))) < 8:
                line = launcher.stderr.readline()
                tc.check(line, "launcher ended early: %s" % "".join(lines))
                lines.append(line)
            pids = tc.pids_from("".join(lines))
            fault_log = os.path.join(log_dir, "rank%d.log" % fault_rank)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if os.path.exists(fault_log) and "injecting fault" in open(fault_log, errors="replace").read():
                    break
                time.sleep(0.1)
            else:
                tc.fail("the fault was never injected")

            def ftdump():
                dump = subprocess.run([args.ftdump, "--job", job], capture_output=True, text=True, timeout=30)
                tc.check(dump.returncode == 0, "ftdump exited %d: %s" % (dump.returncode, dump.stderr))
                per_rank = {}
                for b in re.split(r"\n(?=/ft\.)", dump.stdout.strip()):
                    m = re.search(r" rank=(\d+) ", b)
                    if m:
                        per_rank[int(m.group(1))] = b
                return dump.stdout, per_rank

            def ages(b):
                return [float(a) for a in re.findall(r"IN FLIGHT op=\d+ bytes=\d+ for ([0-9.]+)s", b)]
            # Every rank blocks once its peers reach the hung collective: dump until all 8 show
            # an op in flight for 1.5 s (or the limit passes and the checks below say what not).
            deadline = time.monotonic() + 30
            while True:
                text, per_rank = ftdump()
                ready = len(per_rank) == 8 and all(ages(b) and max(ages(b)) >= 1.5 for b in per_rank.values())
                if ready or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            print(text)
            tc.check(sorted(per_rank) == list(range(8)), "ftdump shows ranks %s" % sorted(per_rank))
            for r, b in per_rank.items():
                tc.check(ages(b) and max(ages(b)) >= 1.5, "rank %d: no op in flight for >= 1.5 s:\n%s" % (r, b))
            def stuck(b):  # in-flight comms: (entered, started)
                return [(int(e), int(s)) for e, s, c in
                        re.findall(r"entered=(\d+) started=(\d+) completed=(\d+) IN FLIGHT", b)]
            tc.check(all(s < e for e, s in stuck(per_rank[fault_rank])),
                     "hung rank %d: an in-flight op started on its GPU: %s" % (fault_rank, stuck(per_rank[fault_rank])))
            waiting = [r for r in per_rank if r != fault_rank and any(s == e for e, s in stuck(per_rank[r]))]
            tc.check(waiting, "no peer is waiting inside a started collective")
            print("OK: ftdump shows all 8 ranks in flight; rank %d's ops never started, ranks %s wait inside "
                  "started ones" % (fault_rank, waiting))
        finally:
            launcher.send_signal(signal.SIGTERM)
            try:
                launcher.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                launcher.kill()
                launcher.wait()
            for pid in tc.pids_from("".join(lines)).values():
                tc.kill_quietly(pid)
            time.sleep(0.2)
            for name in leftover(job):  # killed ranks cannot clean up: the worker's job, here ours
                os.unlink(os.path.join("/dev/shm", name))


def main():
    args = parse_args()
    {"trainsim": case_trainsim, "fail-open": case_fail_open, "hang": case_hang}[args.case](args)


if __name__ == "__main__":
    main()
