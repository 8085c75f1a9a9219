#!/usr/bin/env python3
"""ft under Redis ACL users, one per role (docs/redis-schema.md, "Access control").

redis-server runs without requirepass; an admin user applies what `ftmaster acl --job J`
prints, gives each user a password, and switches the default user off. ftmaster runs as the
job's master user, every ftworker as its worker user, the read-only subcommands as its
operator user.

  --case roles  dp=2 tp=2 pp=2, rank 5's kernel hangs at step 30: the hang is named, the healthy
                ranks save just in time, the step is verified and planned, every node's worker
                writes the plan file and publishes its transfer endpoint (it read the secret) —
                with Redis's ACL LOG empty: no role was refused anything it needed. Then what
                each role must not do is refused: the worker writing the plan, the timeouts, a
                command, the secret or the master's state, reading another job's keys, KEYS,
                FLUSHALL, CONFIG, a script writing the plan; the operator reading the secret or
                writing anything (`ftmaster save` fails, naming NOPERM); the master reading
                another job's keys. A worker given the operator's user says in its log that Redis
                refused it and what to run. No password is in a log or a process's argv.
"""

import argparse
import json
import os
import secrets
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, check, fail  # noqa: E402
from redis_fixture import RedisError, RedisServer, RespClient  # noqa: E402

FAST = {"FT_TIMEOUT_WARMUP": "2s", "FT_TIMEOUT_MIN_SAMPLES": "5"}
MODEL = ["--dp", "2", "--tp", "2", "--pp", "2", "--param-bytes", "256kb", "--hidden", "4096"]
CHUNK = {"FT_CKPT_CHUNK": "64kb"}
ROLES = ("worker", "master", "operator")


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--case", required=True)
    return p.parse_args()


class AclCluster(Cluster):
    """A Cluster whose Redis has no requirepass and the default user off: the test reads
    through an admin user, each ft program runs as its role's user."""

    def __init__(self, paths, job, **kw):
        super().__init__(paths, job, **kw)
        self.admin_password = "adm-" + secrets.token_hex(12)
        self.redis = RedisServer(password="", user="admin", user_password=self.admin_password)
        self.passwords = {role: "%s-%s" % (role, secrets.token_hex(16)) for role in ROLES}

    def __enter__(self):
        super().__enter__()
        self.db.close()
        self.db = RespClient(self.redis.host, self.redis.port, self.admin_password, user="admin")
        self.apply_acl()
        return self

    def user(self, role):
        return "ft-%s-%s" % (self.job, role)

    def apply_acl(self):
        """What an operator does: `ftmaster acl --job J | redis-cli`, a password per user,
        the default user off."""
        out = subprocess.run([self.paths.ftmaster, "acl", "--job", self.job], capture_output=True,
                             text=True, timeout=20, env=self.base_env())
        check(out.returncode == 0, "ftmaster acl exited %d: %s" % (out.returncode, out.stderr))
        lines = [line for line in out.stdout.splitlines() if line.strip()]
        check(len(lines) == 3 and all(line.startswith("ACL SETUSER ") for line in lines),
              "ftmaster acl printed %r" % out.stdout)
        for line in lines:
            self.db.command(*line.split())
        for role in ROLES:
            self.db.command("ACL", "SETUSER", self.user(role), ">" + self.passwords[role])
        # Applied again (a newer ft's rules): the passwords stay.
        for line in lines:
            self.db.command(*line.split())
        self.db.command("ACL", "SETUSER", "default", "off", "resetpass")
        self.db.command("ACL", "LOG", "RESET")
        with self.client("worker") as w:
            check(w.command("PING") == "PONG", "the worker user's AUTH")
        try:
            RespClient(self.redis.host, self.redis.port).command("PING")
            fail("the default user still answers")
        except RedisError as e:
            check("NOAUTH" in str(e), "default user: %s" % e)

    def role_env(self, role, extra=None):
        env = dict(extra or {})
        env["FT_REDIS_USER"] = self.user(role)
        env["FT_REDIS_PASSWORD"] = self.passwords[role]
        return env

    def client(self, role):
        return RespClient(self.redis.host, self.redis.port, self.passwords[role], user=self.user(role))

    def acl_log(self):
        """Redis's ACL LOG entries as dicts (newest first)."""
        return [dict(zip(e[0::2], e[1::2])) for e in self.db.command("ACL", "LOG", "1000") or []]

    def cli(self, role, *args):
        return subprocess.run([self.paths.ftmaster] + list(args) + ["--job", self.job, "--redis", self.redis_url()],
                              env=self.base_env(self.role_env(role)), capture_output=True, text=True, timeout=20)

    def plan_file_step(self, node):
        path = os.path.join(self.arena_dir(node), "ft-plan.%s.%s" % (self.job, node))
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            return None
        if "\nend" not in "\n" + text:
            return None
        for line in text.splitlines():
            key, _, rest = line.partition(" ")
            if key == "step":
                return int(rest) if rest.isdigit() else None
        return None


def refused(client, *cmd):
    try:
        reply = client.command(*cmd)
    except RedisError as e:
        return str(e)
    return None if reply is None else "answered %r" % (reply,)


def must_refuse(client, role, *cmd):
    try:
        reply = client.command(*cmd)
    except RedisError as e:
        msg = str(e)
        check("NOPERM" in msg or "can't access" in msg or "no permissions" in msg,
              "%s %s: refused with an unexpected error: %s" % (role, " ".join(map(str, cmd[:3])), msg))
        return msg
    fail("the %s user may %s (answered %r)" % (role, " ".join(map(str, cmd[:3])), reply))


def case_roles(args):
    hang_step, hung = 30, 5
    with AclCluster(args, job="acl-roles") as c:
        c.start_master(["--topology", "dp=2,tp=2,pp=2", "--order", "tp-dp-pp"], c.role_env("master", FAST))
        c.start_workers(c.role_env("worker", {**FAST, **CHUNK}))
        c.start_job(MODEL + ["--steps", "60", "--compute-ms", "20", "--fault", "hang-kernel",
                             "--fault-rank", str(hung), "--fault-step", str(hang_step)],
                    env={**CHUNK, "FT_CKPT_ON_SIGNAL": "none"})

        # Detection, decision, the just-in-time save, the verdict and the plan: the whole loop.
        inc = c.wait_for(lambda: c.incidents("hang"), 60, "a hang incident")[0]
        suspects = sorted((s["rank"], s["node"]) for s in inc["suspects"])
        print("incident %s: suspects %s decision %s" % (inc["id"], suspects, inc["decision"]))
        check(suspects == [(hung, "node1")], "suspects %s, expected rank %d on node1" % (suspects, hung))
        check(inc["decision"] == "save-then-stop", "decision %s" % inc["decision"])
        c.wait_for(lambda: c.job_proc.poll() is not None, 60, "the job stopped by the master", poll=0.1)

        def saved():
            acks = [json.loads(f["json"]) for _, f in c.stream("acks")]
            done = {a["rank"] for a in acks if a["result"] == "done" and a["id"].find("-save-") >= 0}
            return done if len(done) == 7 else None
        done = c.wait_for(saved, 30, "save acknowledgements from the 7 healthy ranks")
        check(done == set(range(8)) - {hung}, "saved ranks %s" % sorted(done))
        verdict = c.wait_for(lambda: c.hash_json("ckpt:verdicts", hang_step), 30, "the verdict of step %d" % hang_step)
        check(verdict["state"] == "verified", "step %d: %s" % (hang_step, verdict))

        def planned():
            raw = c.db.command("GET", c.key("restore"))
            plan = json.loads(raw) if raw else None
            if not plan or plan["step"] != hang_step or len(plan["ranks"]) != 8:
                return None
            return plan if all(c.plan_file_step(n) == hang_step for n in c.node_names) else None
        plan = c.wait_for(planned, 60, "the plan of step %d in Redis and in every node's plan file" % hang_step, poll=0.2)
        print("plan version %d: step %d for %d ranks" % (plan["version"], plan["step"], len(plan["ranks"])))
        endpoints = c.wait_for(lambda: (lambda h: h if len(h) == 4 else None)(c.db.command("HGETALL", c.key("endpoints")) or []),
                               30, "both workers' transfer endpoints (they read the secret)")
        check(sorted(endpoints[0::2]) == c.node_names, "endpoints of %s" % endpoints[0::2])

        # Nothing the loop needed was refused.
        c.wait_for(c.master_caught_up, 30, "the master caught up with the events")
        log = c.acl_log()
        check(not log, "Redis refused the ft programs %d times during the run: %s" % (len(log), log[:3]))

        # The operator reads everything the read-only subcommands show.
        for sub in (["status"], ["incidents"], ["checkpoints"], ["timeouts"], ["evicted"], ["checkpoints", "--json"]):
            out = c.cli("operator", *sub)
            check(out.returncode == 0, "ftmaster %s as the operator exited %d: %s" % (" ".join(sub), out.returncode, out.stderr))
        check(str(hang_step) in c.cli("operator", "checkpoints").stdout, "`ftmaster checkpoints` does not show step %d" % hang_step)
        check(inc["id"] in c.cli("operator", "incidents").stdout, "`ftmaster incidents` does not show %s" % inc["id"])
        log = c.acl_log()
        check(not log, "Redis refused the read-only subcommands: %s" % log[:3])
        # `save` writes commands: not the operator's to send.
        out = c.cli("operator", "save")
        check(out.returncode != 0 and "NOPERM" in out.stderr, "`ftmaster save` as the operator: exit %d, %r"
              % (out.returncode, out.stderr))
        print("ftmaster save as the operator: %s" % out.stderr.strip().splitlines()[-1])

        # What each role must not do.
        plan_before = c.db.command("GET", c.key("restore"))
        other = "ft:{other-job}:"
        c.db.command("SET", other + "transfer:secret", "ab" * 32)
        c.db.command("SET", other + "restore", '{"v":1}')
        with c.client("worker") as w:
            check(len(w.command("GET", c.key("transfer:secret")) or "") == 64, "the worker reads its job's secret")
            # What removing host arenas needs: whether the job finished, which steps are verified.
            check(w.command("HGET", c.key("master"), "job_state") is not None, "the worker reads the job's state")
            check(str(hang_step) in (w.command("HGETALL", c.key("ckpt:verdicts")) or []),
                  "the worker reads the verdicts")
            for cmd in (("SET", c.key("restore"), '{"v":1,"version":99,"step":1,"unix_ms":1}'),
                        ("SET", c.key("restore:version"), "99"),
                        ("SET", c.key("timeouts"), "{}"),
                        ("XADD", c.key("cmd:node0"), "*", "kind", "stop", "json", "{}"),
                        ("SET", c.key("transfer:secret"), "cd" * 32),
                        ("HSET", c.key("master"), "job_state", "stopped"),
                        ("HSET", c.key("ckpt:verdicts"), str(hang_step), "{}"),
                        ("XADD", c.key("incidents"), "*", "kind", "hang"),
                        ("SADD", c.key("evicted"), "node0"),
                        ("GET", other + "transfer:secret"),
                        ("GET", other + "restore"),
                        ("HGET", other + "master", "job_state"),
                        ("KEYS", "*"),
                        ("SCAN", "0"),
                        ("FLUSHALL",),
                        ("CONFIG", "GET", "requirepass"),
                        ("SUBSCRIBE", "x"),
                        ("EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", c.key("restore")),
                        ("EVAL", "return redis.call('SET', '%srestore', 'x')" % c.key(""), "0")):
                must_refuse(w, "worker", *cmd)
        with c.client("operator") as o:
            for cmd in (("GET", c.key("transfer:secret")),
                        ("STRLEN", c.key("transfer:secret")),
                        ("HSET", c.key("master"), "job_state", "stopped"),
                        ("XADD", c.key("events"), "*", "kind", "exit"),
                        ("GET", other + "restore"),
                        ("KEYS", "*"),
                        ("EVAL", "return 1", "0")):
                must_refuse(o, "operator", *cmd)
        with c.client("master") as m:
            check(m.command("STRLEN", c.key("transfer:secret")) == 64, "the master sees its secret")
            for cmd in (("GET", other + "transfer:secret"), ("SET", other + "restore", "x"), ("KEYS", "*"),
                        ("FLUSHDB",), ("CONFIG", "SET", "appendonly", "no")):
                must_refuse(m, "master", *cmd)
        check(c.db.command("GET", c.key("restore")) == plan_before, "the plan changed under the refusals")
        check(c.db.command("GET", other + "restore") == '{"v":1}', "another job's plan changed")
        users = {e.get("username") for e in c.acl_log()}
        check(users == {c.user(r) for r in ROLES}, "refusals logged by Redis for users %s" % users)

        # A worker given the wrong user degrades clearly: it says Redis refused it and what to do.
        c.start_worker("node9", c.role_env("operator", FAST))
        line = c.wait_for(lambda: next((l for l in c.worker_log("node9").splitlines()
                                        if "NOPERM" in l and "ftmaster acl" in l), None),
                          30, "the worker with the operator's user logging the refusal and the fix")
        print("worker node9 (operator's user): %s" % line.strip()[:300])
        c.stop_worker("node9")

        # Nor was anything refused to the daemons meanwhile (the client logs each refused command).
        for label, text in [("ftmaster", c.master_log())] + [("ftworker " + n, c.worker_log(n)) for n in c.node_names]:
            bad = [l for l in text.splitlines() if "NOPERM" in l or "refused" in l and "user" in l]
            check(not bad, "%s was refused: %s" % (label, bad[:2]))

        # No password in a log line or in any ft program's argv.
        procs = [c.master] + list(c.workers.values())
        for p in procs:
            with open("/proc/%d/cmdline" % p.pid, "rb") as f:
                argv = f.read().decode(errors="replace")
            for role, pw in c.passwords.items():
                check(pw not in argv, "the %s password is in pid %d's argv" % (role, p.pid))
        texts = [c.master_log()] + [c.worker_log(n) for n in c.worker_logs]
        for text in texts:
            for role, pw in c.passwords.items():
                check(pw not in text, "the %s password is in a log" % role)
            check(c.db.command("GET", c.key("transfer:secret")) not in text, "the transfer secret is in a log")
        print("OK: hang -> incident -> 7 ranks saved step %d -> verified -> planned on every node, all under "
              "per-role ACL users with nothing refused; each role refused what it must not do" % hang_step)


def main():
    args = parse_args()
    cases = {"roles": case_roles}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
