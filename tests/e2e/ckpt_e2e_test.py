#!/usr/bin/env python3
"""Checkpoints end to end: trainsim on gpusim under libft.so registers its state, one ftworker
per simulated node keeps the copies in tiers, ftmaster verifies them across data-parallel
replicas and publishes the restore plan, a relaunched job restores and trains on. Real
processes and a real redis-server; the arenas live in a private directory under /dev/shm
(removed at the end), the local tier in one directory per node, the remote tier in one shared
directory.

  --case full-loop      dp=2 tp=2 pp=2, rank 5's kernel hangs: the healthy ranks save just in
                        time, the master verifies the step and stops the job; the relaunched
                        ranks all restore that step (rank 5 from its DP peer rank 7's arena on
                        node1) and end with the checksums of trainsim_reference
  --case sdc-majority   dp=4, FT_CKPT_EVERY, one bit of rank 3's parameters flipped: an sdc
                        incident names rank 3 on node1, the other three replicas' step is
                        verified and planned
  --case sdc-pair       dp=2, FT_CKPT_EVERY=10, rank 1 corrupted after step 10: step 20's two
                        replicas disagree, so step 20 is untrusted and the plan names step 10;
                        the relaunch restores step 10 (from the disk tiers: the arenas hold step
                        20) and ends with the reference checksums
  --case nothing-registered
                        dp=4, trainsim --ft off (under libft.so, registers nothing), rank 3's
                        kernel hangs: the save is acknowledged "nothing_registered" by the
                        healthy ranks, the job is stopped without a checkpoint and the incident
                        says so
  --case tier-fallback  dp=2, FT_CKPT_EVERY: after the step is in every tier the arenas are
                        removed, rank 0's local copy corrupted and rank 1's truncated: both
                        restore from the remote directory (each skip logged) and end with the
                        reference checksums
  --case save-now       dp=2, a running job, `ftmaster save`: both ranks save at their next
                        step boundary (acknowledged done with the step), a saved step is
                        planned; stopped and relaunched, the job resumes there and ends with the
                        reference checksums
  --case replace-node   dp=2 tp=4 (rank r and r+4 hold one shard, on node0 and node1), rank 5's
                        kernel hangs: the healthy ranks save, the job is stopped and node1
                        evicted; node1 is gone (worker stopped, its shared memory and disk
                        wiped); node2's worker starts empty with FT_NODE_RANKS=4-7, the job is
                        relaunched on node0,node2; node2's worker pulls ranks 4-7's shards from
                        node0 over TCP before they start, they restore the saved step from the
                        prefetched copies and the job ends with the reference checksums
  --case crash-teardown dp=2 tp=2 on 2 nodes, rank 3 SIGKILLed at step 30, the rest SIGTERMed 0.1 s
                        later (launch.py --teardown torchrun): the survivors' termination saves
                        commit step 30, the master verifies them after the job is gone, the
                        relaunch restores step 30 (FT_CKPT_EVERY=20 had step 20) and ends with
                        the reference checksums
  --case preemption     the same job SIGTERMed as a whole at step ~60 (--teardown slurm): every
                        rank saves the step it completed, the relaunch restores it
  --case replace-node-fallback
                        dp=3 tp=2 on three nodes (three replicas per shard), rank 3 hangs, node1
                        is evicted and replaced by node3; the worker the plan lists first for
                        rank 2's shard is SIGKILLed (its endpoint stays, its port refuses): node3
                        pulls ranks 2-3 from the other live replica over TCP, they restore from
                        the prefetched copies and end with the reference checksums
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, check, fail  # noqa: E402

# Short warm-up so the adaptive timeouts are published within seconds.
FAST = {"FT_TIMEOUT_WARMUP": "2s", "FT_TIMEOUT_MIN_SAMPLES": "5"}
# A small model: every copy is a few chunks, so a test spends its time on the protocol.
SMALL = ["--param-bytes", "256kb", "--hidden", "4096"]
CHUNK = {"FT_CKPT_CHUNK": "64kb"}
# Periodic saves further apart than ftworker's arena scan (about a second): an arena holds one
# copy, so an earlier step is kept only if the worker persisted it before the next save.
SLOW_STEP_MS = "250"


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster", "reference"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--case", required=True)
    return p.parse_args()


class CkptCluster(Cluster):
    """A Cluster whose workers keep checkpoint tiers: a local directory per node, one remote
    directory (the ranks and workers share the cluster's private arena directory)."""

    def __init__(self, paths, job, **kw):
        super().__init__(paths, job, **kw)
        self.root = tempfile.mkdtemp(prefix="ft-ckpt-e2e-")  # the disk tiers (the arenas: Cluster)
        self.remote_dir = os.path.join(self.root, "remote")
        self.runs = []  # the job logs of earlier runs (a relaunch writes a new one)

    def __exit__(self, exc_type, exc, tb):
        failed = exc_type is not None and not (exc_type is SystemExit and exc.code in (0, None))
        if failed:
            self.show_state()
            for path in self.runs:
                print("---- earlier run's job log: %s" % path, flush=True)
            for node in sorted(os.listdir(self.arena_root)):
                where = os.path.join(self.arena_root, node)
                print("---- arena dir of %s %s: %s" % (node, where, sorted(os.listdir(where))), flush=True)
                for name in sorted(os.listdir(where)):
                    if name.startswith("ft-plan."):
                        with open(os.path.join(where, name)) as f:
                            print("---- %s\n%s" % (name, f.read()), end="", flush=True)
        result = super().__exit__(exc_type, exc, tb)
        if not failed:
            shutil.rmtree(self.root, ignore_errors=True)
            for path in self.runs:
                try:
                    os.unlink(path)
                except OSError:
                    pass
        return result

    def ckpt_env(self, extra=None):
        env = dict(CHUNK)
        env.update(extra or {})
        return env

    def start_ckpt_worker(self, node, env=None):
        return self.start_worker(node, {**self.ckpt_env(env), "FT_CKPT_REMOTE_DIR": self.remote_dir},
                                 local_tier=True)

    def start_ckpt_workers(self, env=None, node_ranks=False):
        """node_ranks: each worker is told the ranks its node runs (FT_NODE_RANKS), as a
        deployment does, so it prefetches a rank's planned copy from another node."""
        for k, node in enumerate(self.node_names):
            extra = dict(env or {})
            if node_ranks:
                first = k * self.ranks_per_node
                extra["FT_NODE_RANKS"] = "%d-%d" % (first, first + self.ranks_per_node - 1)
            self.start_ckpt_worker(node, extra)

    def start_ckpt_job(self, flags, env=None, timeout=120, node_names=None, launch_args=("--keep-going",)):
        if self.job_out is not None:  # keep the earlier run's log: a relaunch reuses the name
            self.job_out.flush()
            kept = self.job_out.name.replace(".log", "-run%d.log" % (len(self.runs) + 1))
            os.rename(self.job_out.name, kept)
            self.runs.append(kept)
        return self.start_job(flags, env=self.ckpt_env(env), timeout=timeout, node_names=node_names,
                              launch_args=launch_args)

    # -- what the checkpoint machinery wrote --------------------------------------------------
    def copies(self, step):
        raw = self.db.command("HGETALL", self.key("ckpt:%d" % step)) or []
        return {int(r): json.loads(v) for r, v in zip(raw[0::2], raw[1::2])}

    def steps(self):
        return sorted(int(s) for s in self.db.command("ZRANGE", self.key("ckpt:steps"), 0, -1) or [])

    def verdict(self, step):
        return self.hash_json("ckpt:verdicts", step)

    def plan(self):
        value = self.db.command("GET", self.key("restore"))
        return json.loads(value) if value else None

    def plan_file(self, node):
        """The node plan ftworker wrote for its ranks, as {key: value} plus `ranks`."""
        path = os.path.join(self.arena_dir(node), "ft-plan.%s.%s" % (self.job, node))
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            return None
        out = {"ranks": {}}
        for line in text.splitlines():
            key, _, rest = line.partition(" ")
            if key == "rank":
                fields = rest.split()
                out["ranks"][int(fields[0])] = fields[1:]
            elif key:
                out[key] = rest
        return out if "end" in out else None

    def master_cli(self, *args):
        out = subprocess.run([self.paths.ftmaster] + list(args) + ["--job", self.job, "--redis", self.redis_url()],
                             env=self.base_env(), capture_output=True, text=True, timeout=20)
        check(out.returncode == 0, "ftmaster %s exited %d: %s" % (" ".join(args), out.returncode, out.stderr))
        return out.stdout

    def acks(self, kind=None):
        """Acknowledgements (CommandAck JSON) of commands of `kind` (save, stop, ...)."""
        ids = None
        if kind is not None:
            ids = set()
            for node in self.db.command("SMEMBERS", self.key("workers")) or []:
                for _, f in self.stream("cmd:" + node):
                    cmd = json.loads(f["json"])
                    if cmd["kind"] == kind:
                        ids.add(cmd["id"])
        return [json.loads(f["json"]) for _, f in self.stream("acks") if ids is None or f["id"] in ids]

    # -- trainsim's output ---------------------------------------------------------------------
    def checksums(self):
        """{rank: checksum line} from the current run's output ("[rank r] trainsim rank=r ... checksum=")."""
        return {int(r): line for r, line in
                re.findall(r"^\[rank (\d+)\] (trainsim rank=\d+ dp=.*checksum=[0-9a-f]+)$", self.job_output(), re.M)}

    def restored(self):
        """{rank: step} from the "trainsim rank=<r> restored step=<s>" lines of the current run."""
        return {int(r): int(s) for r, s in
                re.findall(r"trainsim rank=(\d+) restored step=(\d+)", self.job_output())}

    def rank_log(self, rank):
        prefix = "[rank %d] " % rank
        return [line[len(prefix):] for line in self.job_output().splitlines() if line.startswith(prefix)]


def reference(args, flags):
    """{rank: checksum line} trainsim_reference prints for the model flags."""
    out = subprocess.run([args.reference] + flags, capture_output=True, text=True, timeout=120)
    check(out.returncode == 0, "trainsim_reference %s: %s" % (flags, out.stderr))
    return {int(m.group(1)): m.group(0) for m in re.finditer(r"^trainsim rank=(\d+) .*$", out.stdout, re.M)}


def check_reference(c, args, flags, world):
    want = reference(args, flags)
    got = c.checksums()
    check(len(want) == world, "trainsim_reference printed %d lines, expected %d" % (len(want), world))
    bad = {r: (got.get(r), want[r]) for r in want if got.get(r) != want[r]}
    check(not bad, "checksums differ from the reference: %s" % bad)
    print("checksums of all %d ranks equal trainsim_reference %s" % (world, " ".join(flags)))


def suspects(inc):
    return sorted((s["rank"], s["node"]) for s in inc["suspects"])


def wait_job_exit(c, timeout, what):
    c.wait_for(lambda: c.job_proc.poll() is not None, timeout, what, poll=0.1)
    return c.job_proc.returncode


def wait_planned(c, step, ranks, tiers=("arena",), own=()):
    """Waits until the master's plan names `step`, with each rank having a source in one of
    `tiers`, and every node's plan file is that version of it (a worker reads the plan about
    once a second: a rank started before then reads the previous one). `own`: tiers each rank's
    own copy must be listed in (the master refreshes the planned step's tiers every few
    seconds). Returns the plan."""
    def ready():
        plan = c.plan()
        if not plan or plan.get("step") != step:
            return None
        listed = {r["rank"]: r for r in plan.get("ranks", [])}
        for rank in ranks:
            if rank not in listed or not any(set(tiers) & set(s.get("tiers", [])) for s in listed[rank]["sources"]):
                return None
            if own and not any(s["rank"] == rank and set(own) <= set(s["tiers"]) for s in listed[rank]["sources"]):
                return None
        for node in c.node_names:
            f = c.plan_file(node)
            if not f or f.get("step") != str(step) or f.get("version") != str(plan["version"]) or \
                    not set(ranks) <= set(f["ranks"]):
                return None
        return plan
    return c.wait_for(ready, 60, "a restore plan of step %d on every node (ranks %s, tiers %s)" % (step, ranks, tiers),
                      poll=0.2)


def show_checkpoints(c):
    text = c.master_cli("checkpoints")
    print("$ ftmaster checkpoints\n" + text, end="")
    return text


def case_full_loop(args):
    steps, hang_step, hung = 60, 30, 5
    model = ["--dp", "2", "--tp", "2", "--pp", "2"] + SMALL
    with CkptCluster(args, job="ck-loop") as c:
        c.start_master(["--topology", "dp=2,tp=2,pp=2", "--order", "tp-dp-pp"], FAST)
        c.start_ckpt_workers(FAST)
        # No termination save: the stop's SIGTERM would let the hung rank save its own (intact,
        # verified) copy, and this case shows a rank restored from a replica's arena.
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20", "--fault", "hang-kernel",
                                  "--fault-rank", str(hung), "--fault-step", str(hang_step)],
                         env={"FT_CKPT_ON_SIGNAL": "none"})
        inc = c.wait_for(lambda: c.incidents("hang"), 60, "hang incident")[0]
        print("incident %s: %s suspects=%s decision=%s" % (inc["id"], inc["kind"], suspects(inc), inc["decision"]))
        check(suspects(inc) == [(hung, "node1")], "suspects %s, expected rank %d on node1" % (suspects(inc), hung))
        check(inc["decision"] == "save-then-stop", "decision %s" % inc["decision"])
        rc = wait_job_exit(c, 60, "the job stopped by the master")
        check(rc != 0, "the hung job exited %d" % rc)

        # Every healthy rank saved the state after its last completed step, and said so.
        acks = c.acks("save")
        print("save acks: %s" % sorted((a["rank"], a["result"], a["message"]) for a in acks))
        saves = [a for a in acks if a["result"] == "done"]
        saved = {a["rank"]: a for a in saves}
        healthy = [r for r in range(8) if r != hung]
        check(sorted(saved) == healthy, "ranks that acknowledged a save %s, expected %s" % (sorted(saved), healthy))
        labels = {int(re.search(r"step=(\d+)", a["message"]).group(1)) for a in saves}
        check(labels == {hang_step}, "saves labelled %s, expected the last completed step %d" % (labels, hang_step))
        verdict = c.wait_for(lambda: c.verdict(hang_step), 30, "the verdict of step %d" % hang_step)
        print("verdict: %s" % verdict)
        check(verdict["state"] == "verified" and verdict["verified_shards"] == verdict["shards"] == 4,
              "step %d not verified over 4 shards: %s" % (hang_step, verdict))
        check(not verdict.get("sdc_ranks"), "sdc ranks in a clean save: %s" % verdict)
        plan = wait_planned(c, hang_step, list(range(8)))
        # node1 is evicted: every rank's sources on node1 come last. Its worker still serves, so
        # its arenas stay listed (pp=1's shards are held on node1 alone: tp-dp-pp puts both DP
        # replicas of a stage on one node), and rank 5 is offered rank 7's arena.
        evicted = c.db.command("SMEMBERS", c.key("evicted"))
        check(evicted == ["node1"], "evicted %s, expected node1" % evicted)
        for r in plan["ranks"]:
            nodes = [s["node"] for s in r["sources"]]
            check(nodes == sorted(nodes, key=lambda n: n == "node1"), "rank %d: node1 not last: %s" % (r["rank"], r))
        rank5 = next(r for r in plan["ranks"] if r["rank"] == hung)
        check(any(s["rank"] == 7 and s["node"] == "node1" and "arena" in s["tiers"] for s in rank5["sources"]),
              "the plan does not offer rank 7's arena on node1 to rank 5: %s" % rank5)
        text = show_checkpoints(c)
        check(str(hang_step) in text, "`ftmaster checkpoints` does not list step %d" % hang_step)
        print("$ ftmaster incidents\n" + c.master_cli("incidents"), end="")
        # The incident records the save's outcome: every shard saved and verified, at that step.
        recorded = [json.loads(line) for line in c.master_cli("incidents", "--json").splitlines() if line.strip()]
        outcome = next((i.get("checkpoint") for i in recorded if i["id"] == inc["id"]), None)
        print("incident's checkpoint: %s" % outcome)
        check(outcome and outcome["saved"] == outcome["verified"] == outcome["shards"] == 4 and
              outcome["step"] == hang_step, "the incident records the save as %s" % outcome)

        # Relaunch on the same nodes, workers and master: node1 is returned to service (an
        # operator who checked it removes it from the evicted set), the plan is republished with
        # each of node1's ranks' own copy first again, and every rank restores the saved step.
        version = plan["version"]
        check(c.db.command("SREM", c.key("evicted"), "node1") == 1, "node1 was not in the evicted set")
        def node1_back():
            p = c.plan()
            if not p or p["version"] <= version:
                return None
            rank6 = next(r for r in p["ranks"] if r["rank"] == 6)
            return p if rank6["sources"] and rank6["sources"][0]["rank"] == 6 else None
        plan = c.wait_for(node1_back, 30, "the plan republished with rank 6's own copy first after node1's "
                          "eviction was lifted", poll=0.2)
        print("plan %d after node1 returned: rank 6's sources %s" % (
            plan["version"], next(r for r in plan["ranks"] if r["rank"] == 6)["sources"]))
        wait_planned(c, hang_step, list(range(8)))  # every node's plan file at that version
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20"])
        rc = wait_job_exit(c, 90, "the relaunched job to finish")
        check(rc == 0, "the relaunched job exited %d" % rc)
        restored = c.restored()
        check(restored == {r: hang_step for r in range(8)},
              "restored steps %s, expected step %d on every rank" % (restored, hang_step))
        lines5 = [line for line in c.rank_log(hung) if "restor" in line.lower()]
        print("rank %d: %s" % (hung, lines5))
        check(any(re.search(r"rank 7\b", line) and "arena" in line for line in lines5),
              "rank %d's log does not say it restored from rank 7's arena: %s" % (hung, lines5))
        check_reference(c, args, model + ["--steps", str(steps)], 8)
        c.check_namespaces()
        c.check_membership()
        where = {r: v["node"] for r, v in c.copies(hang_step).items()}
        check(where == {r: c.node_of_rank(r) for r in where},
              "copies of step %d reported from the wrong nodes: %s" % (hang_step, where))
        print("OK: hang -> %d ranks saved step %d -> verified -> stopped -> relaunched -> all restored "
              "(rank %d from rank 7's arena) -> reference checksums" % (len(saved), hang_step, hung))


def termination_saves(c, ranks):
    """{rank: step} the ranks' logs say their termination save committed (libft.so's line)."""
    out = {}
    for r in ranks:
        for line in c.rank_log(r):
            # Its own copy, or the master's just-in-time save of the same step, joined.
            m = re.search(r"termination save committed step=(\d+) |"
                          r"step (\d+) is already committed in the arena", line)
            if m:
                out[r] = int(m.group(1) or m.group(2))
    return out


def termination_save_steps(c, ranks):
    """{rank: [steps]} every termination save each rank's log says committed, oldest first (a
    signalled rank saves the step signalled, then one step more)."""
    out = {}
    for r in ranks:
        for line in c.rank_log(r):
            m = re.search(r"termination save committed step=(\d+) |step (\d+) is already committed in the arena", line)
            if m:
                out.setdefault(r, []).append(int(m.group(1) or m.group(2)))
    return out


def relaunch_restores(c, args, model, steps, step, world):
    """Relaunches the job as it was: every rank restores `step` and ends with the reference."""
    wait_planned(c, step, list(range(world)))
    c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20"])
    rc = wait_job_exit(c, 90, "the relaunched job to finish")
    check(rc == 0, "the relaunched job exited %d" % rc)
    restored = c.restored()
    check(restored == {r: step for r in range(world)}, "restored steps %s, expected step %d on every rank" %
          (restored, step))
    check_reference(c, args, model + ["--steps", str(steps)], world)


def case_crash_teardown(args):
    """A rank SIGKILLed; the launcher tears the rest down 0.1 s later, as torchrun's agent does
    (SIGKILL 30 s after): each survivor's termination save commits the step it completed, the
    master verifies the replicas after the job is gone, and the relaunch restores that step."""
    steps, crash_step, crashed, every = 60, 30, 3, 20
    model = ["--dp", "2", "--tp", "2"] + SMALL
    with CkptCluster(args, job="ck-teardown", nodes=2, ranks_per_node=2) as c:
        c.start_master(["--topology", "dp=2,tp=2,pp=1"], FAST)
        c.start_ckpt_workers(FAST, node_ranks=True)
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20", "--fault", "crash-kill",
                                  "--fault-rank", str(crashed), "--fault-step", str(crash_step)],
                         env={"FT_CKPT_EVERY": str(every)}, launch_args=["--teardown", "torchrun"])
        rc = wait_job_exit(c, 90, "the job torn down by the launcher")
        check(rc != 0, "the crashed job exited %d" % rc)
        survivors = [r for r in range(4) if r != crashed]
        saved = termination_saves(c, survivors)
        print("termination saves: %s (the crashed rank died at step %d; last periodic save %d)" %
              (saved, crash_step, every))
        check(saved == {r: crash_step for r in survivors},
              "termination saves %s, expected step %d on every survivor" % (saved, crash_step))
        verdict = c.wait_for(lambda: c.verdict(crash_step), 30, "the verdict of step %d" % crash_step)
        print("verdict: %s" % verdict)
        check(verdict["state"] == "verified" and verdict["verified_shards"] == verdict["shards"],
              "step %d not verified: %s" % (crash_step, verdict))
        listed = json.loads(c.master_cli("checkpoints", "--json"))
        origins = next(st["origins"] for st in listed["steps"] if st["step"] == crash_step)
        print("step %d saved by %s" % (crash_step, origins))
        # The master's crash incident may ask for a just-in-time save before the teardown's
        # SIGTERM lands: the termination save then joins it (the step is already committed).
        check(origins.get("termination", 0) + origins.get("just-in-time", 0) == len(survivors),
              "`ftmaster checkpoints` says step %d was saved by %s" % (crash_step, origins))
        show_checkpoints(c)
        # The incident says what the relaunch restores and which saves took it.
        incidents = [json.loads(line) for line in c.master_cli("incidents", "--json").splitlines() if line.strip()]
        restore = c.wait_for(lambda: [json.loads(line) for line in c.master_cli("incidents", "--json").splitlines()
                                      if line.strip()][-1].get("restore"), 30, "the incident's restore line")
        print("$ ftmaster incidents (newest)\n" + c.master_cli("incidents").split("\n\n")[-1].strip())
        check(incidents and restore["step"] == crash_step and
              sum(restore["saved_by"].get(k, 0) for k in ("termination", "just-in-time")) == len(survivors),
              "the incident's restore says %s, expected step %d saved by the survivors" % (restore, crash_step))
        relaunch_restores(c, args, model, steps, crash_step, 4)
        print("OK: crash at step %d, teardown 0.1 s later -> survivors saved step %d on SIGTERM -> relaunch "
              "restored step %d (0 steps lost; the periodic save had step %d) -> reference checksums" %
              (crash_step, crash_step, crash_step, every))


def case_preemption(args):
    """Every rank SIGTERMed mid-run (a preemption, scancel, a pod eviction; SIGKILL 30 s later):
    each saves the step it completed and then one step more, every shard holds the newer step,
    and the relaunch restores it."""
    steps, every = 200, 50
    model = ["--dp", "2", "--tp", "2"] + SMALL
    with CkptCluster(args, job="ck-preempt", nodes=2, ranks_per_node=2) as c:
        c.start_master(["--topology", "dp=2,tp=2,pp=1"], FAST)
        c.start_ckpt_workers(FAST, node_ranks=True)
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20", "--verbose"],
                         env={"FT_CKPT_EVERY": str(every)}, launch_args=["--teardown", "slurm"])
        c.wait_for(lambda: re.search(r"trainsim rank=\d+ step=60 ", c.job_output()), 90, "step 60")
        c.job_proc.send_signal(signal.SIGTERM)  # srun/kubelet forward it to every rank
        rc = wait_job_exit(c, 60, "the preempted job")
        check(rc == 128 + signal.SIGTERM, "the preempted job exited %d, expected %d" % (rc, 128 + signal.SIGTERM))
        reached = {}
        for r, st in re.findall(r"trainsim rank=(\d+) step=(\d+) ", c.job_output()):
            reached[int(r)] = max(reached.get(int(r), 0), int(st) + 1)
        saves = termination_save_steps(c, range(4))
        saved = {r: st[-1] for r, st in saves.items()}
        print("termination saves %s; steps reached %s; last periodic save %d" % (saves, reached, every))
        missing = {r: [l for l in c.rank_log(r) if "ft[ckpt]" in l][-3:] + c.rank_log(r)[-4:] +
                   [l for l in c.job_output().splitlines() if l.startswith("[launch] rank %d " % r)]
                   for r in range(4) if r not in saves}
        check(not missing, "ranks without a termination save, their last checkpoint lines: %s" % missing)
        # A rank saves the step it completed, or the one before when its update had not reached
        # the device (the copy is then that step's, and the rank completed one more after it).
        # With TRAINSIM_STEP_SYNC=0 the host's ft_step_done runs up to trainsim's run-ahead (2
        # steps) before its device: the copy is the device's step.
        behind = 1 + (2 if os.environ.get("TRAINSIM_STEP_SYNC") == "0" else 0)
        check(all(reached[r] - behind <= st <= reached[r] for r in saves for st in saves[r]),
              "a save is not the step its rank completed: saves %s, reached %s" % (saves, reached))
        # Ranks are at most a step apart when the signal lands; each saves the step it holds and
        # then one step more, so the newer of the two is held by every shard (tp-dp-pp: shard =
        # rank % 2), as a rank's first or second copy (both slots of its arena are reported).
        held = lambda st: all(any(st in saves[r] for r in range(4) if r % 2 == shard) for shard in (0, 1))
        step = max([st for st in set(s for v in saves.values() for s in v) if held(st)], default=None)
        check(step is not None, "no step held by every shard: termination saves %s" % saves)
        check(step >= max(reached.values()) - behind, "step %d held by every shard, but ranks reached %s" %
              (step, reached))
        verdict = c.wait_for(lambda: c.verdict(step), 30, "the verdict of step %d" % step)
        check(verdict["state"] == "verified", "step %d not verified: %s" % (step, verdict))
        if step in saved.values():
            listed = json.loads(c.master_cli("checkpoints", "--json"))
            origins = next(st["origins"] for st in listed["steps"] if st["step"] == step)
            holders = sum(1 for v in saves.values() if step in v)
            check(origins == {"termination": holders},
                  "`ftmaster checkpoints` says step %d was saved by %s, not %d termination saves" %
                  (step, origins, holders))
            check("termination %d" % holders in show_checkpoints(c), "the table does not say SAVED BY termination")
        relaunch_restores(c, args, model, steps, step, 4)
        print("OK: preempted at steps %s -> saved %s on SIGTERM -> relaunch restored step %d, %d step(s) "
              "lost (the periodic save had step %d) -> reference checksums" %
              (reached, saved, step, max(reached.values()) - step, every * (step // every)))


def case_sdc_majority(args):
    corrupt, every, steps = 3, 10, 20
    model = ["--dp", "4"] + SMALL
    with CkptCluster(args, job="ck-sdc3", nodes=2, ranks_per_node=2) as c:
        c.start_master(["--topology", "dp=4,tp=1,pp=1"], FAST)
        c.start_ckpt_workers(FAST)
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", SLOW_STEP_MS, "--fault", "sdc",
                                  "--fault-rank", str(corrupt), "--fault-step", "5"],
                         env={"FT_CKPT_EVERY": str(every)})
        rc = wait_job_exit(c, 90, "the job to finish")
        check(rc == 0, "the job exited %d" % rc)
        inc = c.wait_for(lambda: c.incidents("sdc"), 30, "an sdc incident")[0]
        print("incident %s: %s suspects=%s decision=%s message=%s" % (inc["id"], inc["kind"], suspects(inc),
                                                                      inc["decision"], inc.get("message")))
        for line in inc.get("evidence", [])[:5]:
            print("  evidence: " + line)
        check(suspects(inc) == [(corrupt, "node1")], "sdc suspects %s, expected rank %d on node1" % (suspects(inc), corrupt))
        named = {s["rank"] for i in c.incidents("sdc") for s in i["suspects"]}
        check(named == {corrupt}, "sdc incidents name %s, expected only rank %d" % (named, corrupt))
        for step in (every, steps):
            v = c.wait_for(lambda: c.verdict(step), 30, "the verdict of step %d" % step)
            print("verdict of step %d: %s" % (step, v))
            check(v["state"] == "verified" and v["verified_shards"] == v["shards"] == 1,
                  "step %d: the majority's copy is not verified: %s" % (step, v))
            check(v["sdc_ranks"] == [corrupt], "step %d: sdc ranks %s, expected [%d]" % (step, v["sdc_ranks"], corrupt))
        plan = wait_planned(c, steps, list(range(4)))
        digests = {c.copies(steps)[r]["digest"] for r in range(4) if r != corrupt}
        check(len(digests) == 1, "the healthy replicas' digests differ: %s" % digests)
        planned = {r["digest"] for r in plan["ranks"]}
        check(planned == digests, "the plan's digest %s is not the majority's %s" % (planned, digests))
        odd = c.copies(steps)[corrupt]["digest"]
        check(odd not in planned, "the plan offers rank %d's corrupted copy" % corrupt)
        src = {s["rank"] for r in plan["ranks"] for s in r["sources"]}
        check(corrupt not in src, "the plan lists rank %d's corrupted copy as a source: %s" % (corrupt, plan))
        show_checkpoints(c)
        print("OK: rank %d's flipped bit named in an sdc incident (node1); the majority's step %d planned"
              % (corrupt, steps))


def case_sdc_pair(args):
    corrupt, every, steps = 1, 10, 20
    model = ["--dp", "2"] + SMALL
    with CkptCluster(args, job="ck-sdc2", nodes=2, ranks_per_node=1) as c:
        c.start_master(["--topology", "dp=2,tp=1,pp=1"], FAST)
        c.start_ckpt_workers(FAST)
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", SLOW_STEP_MS, "--fault", "sdc",
                                  "--fault-rank", str(corrupt), "--fault-step", "15"],
                         env={"FT_CKPT_EVERY": str(every)})
        rc = wait_job_exit(c, 90, "the job to finish")
        check(rc == 0, "the job exited %d" % rc)
        good = c.wait_for(lambda: c.verdict(every), 30, "the verdict of step %d" % every)
        bad = c.wait_for(lambda: c.verdict(steps), 30, "the verdict of step %d" % steps)
        print("verdict of step %d: %s\nverdict of step %d: %s" % (every, good, steps, bad))
        check(good["state"] == "verified", "step %d (before the corruption) is %s" % (every, good["state"]))
        check(bad["state"] == "untrusted", "step %d (two replicas disagree) is %s, not untrusted" % (steps, bad["state"]))
        check(not bad.get("sdc_ranks"), "two replicas cannot outvote each other, yet sdc ranks %s" % bad["sdc_ranks"])
        # Step 20's copies are in the arenas; step 10's only on disk now.
        plan = wait_planned(c, every, [0, 1], tiers=("remote",))  # readable from either node
        print("plan: step %d version %d" % (plan["step"], plan["version"]))
        text = show_checkpoints(c)
        check("untrusted" in text, "`ftmaster checkpoints` does not show step %d untrusted" % steps)

        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "10"])
        rc = wait_job_exit(c, 90, "the relaunched job to finish")
        check(rc == 0, "the relaunched job exited %d" % rc)
        restored = c.restored()
        check(restored == {0: every, 1: every}, "restored %s, expected step %d on both ranks" % (restored, every))
        check_reference(c, args, model + ["--steps", str(steps)], 2)
        print("OK: step %d untrusted (replicas disagree), step %d planned and restored, reference checksums"
              % (steps, every))


def case_nothing_registered(args):
    hung = 3
    with CkptCluster(args, job="ck-none", nodes=2, ranks_per_node=2) as c:
        c.start_master(["--topology", "dp=4,tp=1,pp=1"], FAST)
        c.start_ckpt_workers(FAST)
        # --ft off: under libft.so, but trainsim never calls ft_register (an app that did not
        # opt in to checkpoints).
        c.start_ckpt_job(["--dp", "4", "--ft", "off", "--steps", "100000", "--compute-ms", "20",
                          "--fault", "hang-kernel", "--fault-rank", str(hung), "--fault-step", "30"])
        inc = c.wait_for(lambda: c.incidents("hang"), 60, "hang incident")[0]
        print("incident %s: kind=%s suspects=%s decision=%s" % (inc["id"], inc["kind"], suspects(inc), inc["decision"]))
        check(inc["decision"] == "save-then-stop", "decision %s, expected save-then-stop" % inc["decision"])
        rc = wait_job_exit(c, 60, "the job stopped by the master")
        check(rc != 0, "the job exited %d" % rc)
        acks = c.acks("save")
        print("save acks: %s" % sorted((a["rank"], a["result"], a["message"]) for a in acks))
        answered = sorted(a["rank"] for a in acks if a["result"] == "nothing_registered")
        check(answered == [0, 1, 2] and len(acks) == 3,
              "save acks %s: expected nothing_registered from the healthy ranks 0, 1, 2" % acks)
        check(c.steps() == [], "checkpoint steps recorded without a save: %s" % c.steps())
        plan = c.plan()
        check(plan is None or plan.get("step", -1) == -1, "a restore plan names a step: %s" % plan)
        outcome = c.db.command("HGET", c.key("master"), "checkpoint")
        print("save outcome: %s" % outcome)
        check(outcome and json.loads(outcome)["saved"] == 0, "the save outcome %s" % outcome)
        text = c.master_cli("incidents")
        print("$ ftmaster incidents\n" + text, end="")
        check("nothing" in text and "regist" in text,
              "`ftmaster incidents` does not say nothing was registered:\n%s" % text)
        js = c.master_cli("incidents", "--json")
        check("nothing_registered" in js or "nothing is registered" in js or "nothing registered" in js,
              "`ftmaster incidents --json` does not record the nothing-registered outcome:\n%s" % js)
        print("OK: nothing registered -> acked nothing_registered, stopped without a checkpoint, said so")


def corrupt_file(path):
    with open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0x40]))


def case_tier_fallback(args):
    every, steps, more = 10, 20, 30
    model = ["--dp", "2"] + SMALL
    with CkptCluster(args, job="ck-tiers", nodes=2, ranks_per_node=1) as c:
        c.start_master(["--topology", "dp=2,tp=1,pp=1"], FAST)
        c.start_ckpt_workers(FAST)
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "10"], env={"FT_CKPT_EVERY": str(every)})
        rc = wait_job_exit(c, 90, "the job to finish")
        check(rc == 0, "the job exited %d" % rc)

        def in_every_tier():
            copies = c.copies(steps)
            return len(copies) == 2 and all({"arena", "local", "remote"} <= set(v["tiers"]) for v in copies.values())
        c.wait_for(in_every_tier, 60, "step %d's copies in the arena, local and remote tiers" % steps, poll=0.2)
        wait_planned(c, steps, [0, 1], tiers=("remote",), own=("local", "remote"))
        for node in c.node_names:  # the nodes lost their memory (a reboot)
            for name in os.listdir(c.arena_dir(node)):
                if name.startswith("ft-ckpt."):
                    os.unlink(os.path.join(c.arena_dir(node), name))
        step_dir = "step-%012d" % steps
        data = {r: os.path.join(c.local_dir("node%d" % r), c.job, step_dir, "rank-%06d.data" % r) for r in (0, 1)}
        for r, path in data.items():
            check(os.path.exists(path), "no local copy of rank %d at %s: %s" % (r, path, os.listdir(os.path.dirname(path))))
        corrupt_file(data[0])
        os.truncate(data[1], os.path.getsize(data[1]) // 2)
        print("removed the arenas, corrupted %s and truncated %s" % (data[0], data[1]))

        c.start_ckpt_job(model + ["--steps", str(more), "--compute-ms", "10"])
        rc = wait_job_exit(c, 90, "the relaunched job to finish")
        check(rc == 0, "the relaunched job exited %d" % rc)
        restored = c.restored()
        check(restored == {0: steps, 1: steps}, "restored %s, expected step %d on both ranks" % (restored, steps))
        for r in (0, 1):
            lines = [line for line in c.rank_log(r) if "local" in line.lower() or "remote" in line.lower()]
            print("rank %d: %s" % (r, lines))
            check(any("local" in line and ("corrupt" in line.lower() or "checksum" in line.lower() or
                                           "short" in line.lower() or "trunc" in line.lower() or
                                           "read" in line.lower()) for line in lines),
                  "rank %d's log does not say why its local copy was skipped" % r)
            check(any("remote" in line and "restor" in line.lower() for line in lines),
                  "rank %d's log does not say it restored from the remote dir" % r)
        check_reference(c, args, model + ["--steps", str(more)], 2)
        print("OK: a corrupted and a truncated local copy skipped (logged), remote copies restored, "
              "reference checksums")


def case_save_now(args):
    model = ["--dp", "2"] + SMALL
    with CkptCluster(args, job="ck-savenow", nodes=2, ranks_per_node=1) as c:
        c.start_master(["--topology", "dp=2,tp=1,pp=1"], FAST)
        c.start_ckpt_workers(FAST)
        # The operator's stop below must not save (that is the termination save's case,
        # ckpt.e2e_crash-teardown / preemption): a newer step verified before the relaunch reads
        # its plan would be restored instead, and the relaunch's --steps was sized for this one.
        c.start_ckpt_job(model + ["--steps", "100000", "--compute-ms", "20"], env={"FT_CKPT_ON_SIGNAL": "none"})
        c.wait_for(lambda: c.db.command("HLEN", c.key("ranks")) == 2, 60, "both ranks running")
        # And registered: a rank is a member from its first CUDA call, and a save asked before its
        # ft_register_end is refused ("nothing registered"), as it was once under make test's load.
        c.wait_for(lambda: len(set(re.findall(r"^\[rank (\d+)\] .*host arena .* prepared in", c.job_output(), re.M))) == 2,
                   60, "both ranks' state registered")
        check(c.steps() == [], "a checkpoint before any was asked for: %s" % c.steps())
        print("$ ftmaster save\n" + c.master_cli("save"), end="")
        # Each rank saves at its next step boundary and acknowledges with the step it saved.
        def saved():
            acks = [a for a in c.acks("save-at-step") if a["result"] == "done"]
            return acks if sorted(a["rank"] for a in acks) == [0, 1] else None
        acks = c.wait_for(saved, 60, "both ranks' acknowledgements of the save")
        print("save-at-step acks: %s" % sorted((a["rank"], a["result"], a["message"]) for a in acks))
        acked = {int(re.search(r"step=(\d+)", a["message"]).group(1)) for a in acks}
        if len(acked) > 1:  # the two workers delivered the request on either side of a step boundary
            print("note: the replicas saved different steps %s: no step of this request is cross-checked"
                  % sorted(acked))
        for s in sorted(acked):  # every copy reported and judged: the plan has settled
            c.wait_for(lambda: c.verdict(s), 30, "the verdict of step %d" % s)
        step = c.wait_for(lambda: (c.plan() or {}).get("step", -1) >= 0 and c.plan(), 30, "a restore plan")["step"]
        check(step == max(acked), "the plan names step %d, not the newest the request saved (%s)" % (step, sorted(acked)))
        verdict = c.verdict(step)
        print("step %d: %s" % (step, verdict))
        check(verdict["state"] == "verified", "step %d: %s" % (step, verdict))
        wait_planned(c, step, [0, 1], tiers=("remote",))  # what the relaunch reads on either node
        show_checkpoints(c)
        c.stop_job()  # the operator stops the job; the next launch resumes at the saved step
        more = step + 10
        c.start_ckpt_job(model + ["--steps", str(more), "--compute-ms", "20"])
        rc = wait_job_exit(c, 90, "the relaunched job to finish")
        check(rc == 0, "the relaunched job exited %d" % rc)
        check(c.restored() == {0: step, 1: step}, "restored %s, expected step %d" % (c.restored(), step))
        check_reference(c, args, model + ["--steps", str(more)], 2)
        print("OK: `ftmaster save` -> the ranks saved at a step boundary (%s) -> step %d verified -> "
              "restored -> reference checksums" % (sorted(acked), step))


def prefetch_report(c, node):
    value = c.db.command("HGET", c.key("prefetch"), node)
    return json.loads(value) if value else None


def hang_save_evict(c, model, hung, hang_step, steps, topology, evicted_node):
    """Run 1 of a replacement loop: rank `hung` hangs, the healthy ranks save, the master
    verifies the step, stops the job and evicts the rank's node. Returns the plan once it names
    the step with a remote copy for every rank (what the variants fall back on)."""
    c.start_master(["--topology", topology, "--order", "tp-dp-pp"], FAST)
    c.start_ckpt_workers(FAST)
    c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20", "--fault", "hang-kernel",
                              "--fault-rank", str(hung), "--fault-step", str(hang_step)])
    inc = c.wait_for(lambda: c.incidents("hang"), 60, "hang incident")[0]
    print("incident %s: %s suspects=%s decision=%s" % (inc["id"], inc["kind"], suspects(inc), inc["decision"]))
    check(suspects(inc) == [(hung, evicted_node)], "suspects %s, expected rank %d on %s" %
          (suspects(inc), hung, evicted_node))
    check(inc["decision"] == "save-then-stop", "decision %s" % inc["decision"])
    rc = wait_job_exit(c, 60, "the job stopped by the master")
    check(rc != 0, "the hung job exited %d" % rc)
    verdict = c.wait_for(lambda: c.verdict(hang_step), 30, "the verdict of step %d" % hang_step)
    check(verdict["state"] == "verified" and verdict["verified_shards"] == verdict["shards"],
          "step %d not verified: %s" % (hang_step, verdict))
    evicted = c.wait_for(lambda: c.db.command("SMEMBERS", c.key("evicted")), 30, "an evicted node")
    check(sorted(evicted) == [evicted_node], "evicted %s, expected %s" % (sorted(evicted), evicted_node))
    plan = wait_planned(c, hang_step, list(range(c.nodes * c.ranks_per_node)), tiers=("remote",))
    c.check_namespaces()
    return plan


def prefetched(c, node, moved, hang_step):
    """Checks every rank in `moved` restored from the copy `node`'s worker prefetched, and
    returns {rank: PrefetchRank} of the node's report."""
    for r in moved:
        lines = [line for line in c.rank_log(r) if "restored" in line and "ft[" in line]
        print("rank %d: %s" % (r, lines))
        check(any("prefetched" in line for line in lines),
              "rank %d (on %s) did not restore from the prefetched copy: %s" % (r, node, lines))
    report = c.wait_for(lambda: prefetch_report(c, node), 10, "%s's prefetch report" % node)
    print("%s's prefetch: %s" % (node, json.dumps(report)))
    check(report["state"] == "done" and report["step"] == hang_step,
          "%s's prefetch is %s at step %s, expected done at step %d" % (node, report["state"], report["step"],
                                                                       hang_step))
    check(report["pull_s"] > 0, "%s's pull_s %s" % (node, report["pull_s"]))
    pulled = {x["rank"]: x for x in report["ranks"]}
    check(sorted(pulled) == moved, "%s prefetched ranks %s, expected %s" % (node, sorted(pulled), moved))
    for r, x in sorted(pulled.items()):
        check(x["outcome"] == "pulled" and x["ok"] and x["bytes"] > 0,
              "rank %d's prefetch: %s, expected pulled, ok, bytes > 0" % (r, x))
    return pulled


def case_replace_node(args):
    steps, hang_step, hung = 60, 30, 5
    model = ["--dp", "2", "--tp", "4"] + SMALL  # tp-dp-pp: rank r and r+4 hold one shard
    moved = [4, 5, 6, 7]  # node1's ranks, node2's after the relaunch
    with CkptCluster(args, job="ck-replace") as c:
        plan = hang_save_evict(c, model, hung, hang_step, steps, "dp=2,tp=4,pp=1", "node1")
        for r in moved:
            line = next(x for x in plan["ranks"] if x["rank"] == r)
            check(any(s["node"] == "node0" and "arena" in s["tiers"] for s in line["sources"]),
                  "the plan offers rank %d no arena on node0: %s" % (r, line))
        # node1 is gone; node2 replaces it with nothing in its memory or on its disk.
        c.drop_node("node1")
        c.start_ckpt_worker("node2", {**FAST, "FT_NODE_RANKS": "4-7"})
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20"], node_names=["node0", "node2"])
        rc = wait_job_exit(c, 120, "the relaunched job to finish")
        check(rc == 0, "the relaunched job exited %d" % rc)
        restored = c.restored()
        check(restored == {r: hang_step for r in range(8)},
              "restored steps %s, expected step %d on every rank" % (restored, hang_step))
        pulled = prefetched(c, "node2", moved, hang_step)
        for r, x in sorted(pulled.items()):
            check(x["source"] == "node0" and x["source_rank"] == r - 4 and x["transport"] == "tcp",
                  "rank %d pulled from %s rank %s over %s, expected node0 rank %d over tcp" %
                  (r, x["source"], x["source_rank"], x["transport"], r - 4))
        # node2 saw nothing of node1's: its arenas are its ranks' own and the prefetched copies.
        spaces = c.check_namespaces()
        check("node1" not in spaces, "node1's namespace came back: %s" % spaces)
        print("ranks adopted by: %s" % c.check_membership())
        check_reference(c, args, model + ["--steps", str(steps)], 8)
        print("OK: hang on rank %d -> saved step %d -> node1 evicted and wiped -> node2 pulled ranks %s from "
              "node0 over tcp (%d bytes, %.3f s) -> restored from the prefetched copies -> reference checksums"
              % (hung, hang_step, moved, sum(x["bytes"] for x in pulled.values()),
                 prefetch_report(c, "node2")["pull_s"]))


def case_replace_node_fallback(args):
    """Three replicas per shard (dp=3 tp=2 on three nodes of two ranks: rank r, r+2, r+4 hold
    one shard). Rank 3 hangs, node1 is evicted and node3 takes its place; the worker of the
    node the plan lists first for rank 2's shard is killed (SIGKILL: its endpoint stays in
    Redis, its port refuses), so node3's pull of rank 2 must fall back to the other replica."""
    steps, hang_step, hung = 60, 30, 3
    model = ["--dp", "3", "--tp", "2"] + SMALL
    moved = [2, 3]
    with CkptCluster(args, job="ck-replace-fb", nodes=3, ranks_per_node=2) as c:
        plan = hang_save_evict(c, model, hung, hang_step, steps, "dp=3,tp=2,pp=1", "node1")
        line = next(x for x in plan["ranks"] if x["rank"] == 2)
        order = [s["node"] for s in line["sources"] if s["node"] in ("node0", "node2") and "arena" in s["tiers"]]
        check(sorted(set(order)) == ["node0", "node2"], "rank 2's plan lacks arenas on node0 and node2: %s" % line)
        dead, alive = order[0], ("node2" if order[0] == "node0" else "node0")
        print("rank 2's sources in the plan: %s; killing %s's worker (SIGKILL)" % (order, dead))
        c.drop_node("node1")
        c.stop_worker(dead, sig=signal.SIGKILL)
        c.start_ckpt_worker("node3", {**FAST, "FT_NODE_RANKS": "2-3"})
        c.wait_for(lambda: (prefetch_report(c, "node3") or {}).get("state") == "done", 60,
                   "node3's prefetch to end", poll=0.2)
        c.start_ckpt_worker(dead, FAST)  # back for its own ranks in the relaunch
        c.start_ckpt_job(model + ["--steps", str(steps), "--compute-ms", "20"], node_names=["node0", "node3", "node2"])
        rc = wait_job_exit(c, 120, "the relaunched job to finish")
        check(rc == 0, "the relaunched job exited %d" % rc)
        restored = c.restored()
        check(restored == {r: hang_step for r in range(6)},
              "restored steps %s, expected step %d on every rank" % (restored, hang_step))
        pulled = prefetched(c, "node3", moved, hang_step)
        for r, x in sorted(pulled.items()):
            check(x["source"] == alive and x["transport"] == "tcp",
                  "rank %d pulled from %s over %s, expected the live replica on %s over tcp (%s's worker is dead)"
                  % (r, x["source"], x["transport"], alive, dead))
        tried = [line for line in c.worker_log("node3").splitlines() if "rank 2:" in line and dead in line]
        print("node3's worker on rank 2's first source: %s" % tried)
        check(any("not used" in line for line in tried),
              "node3's worker does not say it tried %s's copy of rank 2 first and could not use it" % dead)
        check_reference(c, args, model + ["--steps", str(steps)], 6)
        print("OK: %s's worker dead (listed first for rank 2) -> node3 pulled ranks %s from %s over tcp -> "
              "restored from the prefetched copies -> reference checksums" % (dead, moved, alive))


def main():
    args = parse_args()
    cases = {
        "full-loop": case_full_loop, "sdc-majority": case_sdc_majority, "sdc-pair": case_sdc_pair,
        "nothing-registered": case_nothing_registered, "tier-fallback": case_tier_fallback,
        "save-now": case_save_now, "replace-node": case_replace_node,
        "replace-node-fallback": case_replace_node_fallback,
        "crash-teardown": case_crash_teardown, "preemption": case_preemption,
    }
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
