#!/usr/bin/env python3
"""Metrics end to end: Debian's `prometheus` scrapes two ftworkers and ftmaster (FT_METRICS_LISTEN
on a free loopback port each, as the log line "metrics: serving http://..." names it, every 1 s)
during a faulted trainsim job, and the incident and the checkpoint are read back through
Prometheus' HTTP API — what a Grafana panel over ft would show.

  --case prometheus   dp=4 on 2 nodes, rank 3's kernel hangs at step 20: Prometheus reports
                      every target up, ft_worker_ops_total growing while the job runs, then
                      ft_master_incidents_total{kind="hang",decision="save-then-stop"} = 1,
                      ft_worker_events_total{kind="timeout"} on the hung rank's peers,
                      ft_master_ckpt_verdicts_total{state="verified"} and
                      ft_master_ckpt_verified_step at the verified step Redis holds, and
                      ft_worker_ckpt_copies_total{tier="arena"} = the three saves; node0's
                      FT_METRICS_TEXTFILE (node_exporter's textfile collector) holds the same
                      figures.
  --case dashboard     deploy/grafana/ft-dashboard.json proven against real figures: its structure
                      (every panel titled, on the ${datasource} variable, with targets; only
                      template variables it defines; only metric names ftworker and ftmaster
                      declare), then dp=4 on 2 nodes with periodic saves (FT_CKPT_EVERY=10), a
                      local tier and buddy copies (FT_CKPT_REPLICATE_EVERY=10), rank 3's kernel
                      hanging at step 60, under a prometheus that also evaluates
                      deploy/prometheus/ft-alerts.yml every second. Once the incident, the
                      eviction and a verified step are in Prometheus, the `job` and `node`
                      variables list the job and its nodes, and every panel target's expr (the
                      variables substituted, $__rate_interval 10s) answers a non-empty result
                      within a bounded wait; a failure names the panel. The alert rules
                      evaluate without error and FtNodeEvicted fires for the job.
  --case promtool-rules
                      `promtool check rules` and `promtool test rules` on deploy/prometheus/
                      (ft-alerts.test.yml makes each alert fire on synthetic series and stay
                      quiet on healthy ones), and the rules' metric names are ones ftworker and
                      ftmaster declare. No process but promtool.
  --case master-textfile
                      ftmaster alone with FT_METRICS_TEXTFILE (no HTTP listener): the file
                      holds ft_master_leader 1 once it leads, then the incident counter of an
                      incident put into the job's incident stream (one by hand: this case is
                      about the file, the prometheus case about real incidents), rewritten in
                      place with nothing else left in its directory, and a last time at exit.

Prometheus and promtool come from scripts/install-deps.sh (Debian's package); without them the
test fails saying so.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, check, fail  # noqa: E402

FAST = {"FT_TIMEOUT_WARMUP": "2s", "FT_TIMEOUT_MIN_SAMPLES": "5"}
# Each daemon on a free loopback port (several workers share this host), figures refreshed
# every 200 ms so that a 1 s scrape sees them at once.
METRICS = {"FT_METRICS_LISTEN": "127.0.0.1:0", "FT_METRICS_INTERVAL": "200ms"}
SMALL = ["--param-bytes", "256kb", "--hidden", "4096"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "ft-dashboard.json")
ALERTS = os.path.join(ROOT, "deploy", "prometheus", "ft-alerts.yml")
ALERT_TESTS = os.path.join(ROOT, "deploy", "prometheus", "ft-alerts.test.yml")


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--prometheus", default=shutil.which("prometheus") or "/usr/bin/prometheus")
    p.add_argument("--promtool", default=shutil.which("promtool") or "/usr/bin/promtool")
    p.add_argument("--case", required=True)
    return p.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics_address(c, read_log, what):
    """host:port from the daemon's log line 'metrics: serving http://<addr>/metrics'."""
    def found():
        m = re.search(r"metrics: serving http://([0-9.:]+)/metrics", read_log())
        return m.group(1) if m else None
    return c.wait_for(found, 30, "the metrics address of " + what)


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


class Prometheus:
    def __init__(self, binary, targets, log_dir, rule_files=()):
        """rule_files: alerting rules it loads and evaluates every second."""
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="ft-prometheus-")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n")
            if rule_files:
                f.write("  evaluation_interval: 1s\nrule_files: [%s]\n" % ", ".join("'%s'" % r for r in rule_files))
            # honor_labels: ft's own `job` label (the training job) is kept; without it
            # Prometheus renames it exported_job in favour of the scrape job's name.
            f.write("scrape_configs:\n  - job_name: ft\n    honor_labels: true\n    static_configs:\n"
                    "      - targets: [%s]\n" % ", ".join("'%s'" % t for t in targets))
        self.log = open(os.path.join(log_dir, "prometheus-%d.log" % os.getpid()), "w")
        self.proc = None

    def start(self, c):
        self.proc = subprocess.Popen([self.binary, "--config.file=" + self.config,
                                      "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
                                      "--web.listen-address=127.0.0.1:%d" % self.port],
                                     stdout=self.log, stderr=subprocess.STDOUT)

        def ready():
            check(self.proc.poll() is None, "prometheus exited %s: %s" % (self.proc.returncode, self.tail()))
            try:
                return http_get(self.url + "/-/ready", timeout=1)[0] == 200
            except OSError:
                return False
        c.wait_for(ready, 60, "prometheus ready", poll=0.2)

    def tail(self):
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return "".join(f.readlines()[-20:])

    def query(self, expr):
        """The instant vector of `expr`: [(labels, value)]."""
        status, _, body = http_get(self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        reply = json.loads(body)
        check(status == 200 and reply["status"] == "success", "query %s: %s" % (expr, body))
        return [(r["metric"], float(r["value"][1])) for r in reply["data"]["result"]]

    def api(self, path, **params):
        """The `data` of a GET /api/v1/<path>; a reply other than success fails the test."""
        url = self.url + "/api/v1/" + path + ("?" + urllib.parse.urlencode(params) if params else "")
        status, _, body = http_get(url)
        reply = json.loads(body)
        check(status == 200 and reply["status"] == "success", "GET %s: %s" % (url, body[:500]))
        return reply["data"]

    def wait_value(self, c, expr, predicate, what, timeout=60):
        """Polls `expr` until predicate(vector) holds; returns the vector."""
        last = []

        def ok():
            nonlocal last
            last = self.query(expr)
            return last if predicate(last) else None
        try:
            return c.wait_for(ok, timeout, what, poll=0.5)
        except SystemExit:
            print("last answer to %s: %s" % (expr, last), flush=True)
            raise

    def stop(self, failed):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if failed:
            print("---- prometheus log (%s)\n%s" % (self.log.name, self.tail()), flush=True)
        else:
            os.unlink(self.log.name)
        shutil.rmtree(self.dir, ignore_errors=True)


def total(vector):
    return sum(v for _, v in vector)


def case_prometheus(args):
    if not os.access(args.prometheus, os.X_OK):
        fail("no prometheus at %s: scripts/install-deps.sh installs Debian's package" % args.prometheus)
    hung, hang_step = 3, 20
    textdir = tempfile.mkdtemp(prefix="ft-textfile-")
    textfile = os.path.join(textdir, "ftworker.prom")
    prom = None
    failed = True
    try:
        with Cluster(args, job="metrics", nodes=2, ranks_per_node=2) as c:
            c.start_master(["--topology", "dp=4"], {**FAST, **METRICS})
            c.start_worker("node0", {**FAST, **METRICS, "FT_METRICS_TEXTFILE": textfile})
            c.start_worker("node1", {**FAST, **METRICS})
            master = metrics_address(c, c.master_log, "ftmaster")
            workers = [metrics_address(c, lambda n=n: c.worker_log(n), "ftworker " + n) for n in ("node0", "node1")]
            print("metrics: master %s, workers %s" % (master, workers))
            for addr in [master] + workers:
                check(addr.startswith("127.0.0.1:"), "%s is not on loopback" % addr)
                status, ctype, body = http_get("http://%s/metrics" % addr)
                check(status == 200 and ctype.startswith("text/plain; version=0.0.4"),
                      "GET http://%s/metrics: %s %s" % (addr, status, ctype))
                check("# TYPE ft_" in body, "no ft_ metric at %s:\n%s" % (addr, body[:500]))

            prom = Prometheus(args.prometheus, [master] + workers, c.log_dir)
            prom.start(c)
            prom.wait_value(c, 'up{job="ft"}', lambda v: len(v) == 3 and all(x == 1 for _, x in v),
                            "prometheus scraping the 3 targets")

            c.start_job(["--dp", "4"] + SMALL + ["--steps", "100000", "--compute-ms", "20",
                                                 "--fault", "hang-kernel", "--fault-rank", str(hung),
                                                 "--fault-step", str(hang_step)],
                        # No termination save: the arena copies are the healthy ranks' three.
                        env={"FT_CKPT_ON_SIGNAL": "none"})
            ops = prom.wait_value(c, 'sum by (rank) (ft_worker_ops_total{job="%s"})' % c.job,
                                  lambda v: len(v) == 4 and all(x > 0 for _, x in v),
                                  "ops of the 4 ranks in prometheus")
            print("ops by rank: %s" % sorted((m["rank"], x) for m, x in ops))

            inc = c.wait_for(lambda: c.incidents("hang"), 90, "the hang incident in Redis")[0]
            check(inc["decision"] == "save-then-stop", "decision %s" % inc["decision"])
            incidents = prom.wait_value(c, 'ft_master_incidents_total{job="%s"}' % c.job,
                                        lambda v: total(v) >= 1, "the incident in prometheus")
            print("incidents: %s" % incidents)
            check(len(incidents) == 1 and incidents[0][0]["kind"] == "hang" and
                  incidents[0][0]["decision"] == "save-then-stop" and incidents[0][1] == 1,
                  "prometheus shows %s, expected one hang incident decided save-then-stop" % incidents)
            decided = prom.query('ft_master_incident_decide_seconds_count{job="%s",kind="hang"}' % c.job)
            check(total(decided) == 1, "decide-time histogram count %s" % decided)
            timeouts = prom.wait_value(c, 'ft_worker_events_total{job="%s",kind="timeout"}' % c.job,
                                       lambda v: total(v) >= 1, "timeout events in prometheus")
            check(all(m["rank"] != str(hung) for m, _ in timeouts),
                  "the hung rank %d raised a timeout itself: %s" % (hung, timeouts))

            # The checkpoint: the healthy ranks' saves, verified by the master.
            def verified_step():
                steps = [json.loads(v) for v in c.db.command("HVALS", c.key("ckpt:verdicts"))]
                good = [v["step"] for v in steps if v["state"] == "verified"]
                return max(good) if good else None
            step = c.wait_for(verified_step, 60, "a verified step in Redis")
            prom.wait_value(c, 'ft_master_ckpt_verified_step{job="%s"}' % c.job,
                            lambda v: len(v) == 1 and v[0][1] == step, "verified step %d in prometheus" % step)
            verdicts = prom.wait_value(c, 'ft_master_ckpt_verdicts_total{job="%s",state="verified"}' % c.job,
                                       lambda v: total(v) >= 1, "a verified verdict in prometheus")
            copies = prom.wait_value(c, 'sum(ft_worker_ckpt_copies_total{job="%s",tier="arena"})' % c.job,
                                     lambda v: total(v) >= 3, "the 3 saved copies in prometheus")
            check(total(copies) == 3, "arena copies %s, expected the 3 healthy ranks' saves" % copies)
            newest = prom.query('ft_worker_ckpt_newest_step{job="%s"}' % c.job)
            check(sorted(m["rank"] for m, _ in newest) == ["0", "1", "2"] and all(x == step for _, x in newest),
                  "newest committed steps %s, expected step %d of ranks 0-2" % (newest, step))
            print("step %d verified: verdicts %s, copies %s" % (step, verdicts, copies))
            # The arenas' page size, per node: this test's arenas are in /dev/shm (or the tmpfs
            # FT_TEST_ARENA_ROOT names), whose mount table entry says which.
            with open("/proc/self/mountinfo") as f:
                mounts = [l.split() for l in f]
            root = os.path.realpath(c.arena_root)
            holding = max((m for m in mounts if root == m[4] or root.startswith(m[4].rstrip("/") + "/")),
                          key=lambda m: len(m[4]))
            opts = holding[holding.index("-") + 3].split(",")
            huge = holding[holding.index("-") + 1] == "tmpfs" and any(
                o in ("huge=always", "huge=within_size", "huge=advise") for o in opts)
            pages = prom.wait_value(c, 'ft_worker_arena_huge_pages{job="%s"}' % c.job, lambda v: len(v) == 2,
                                    "both nodes' arena page size in prometheus")
            check(all(v == (1 if huge else 0) for _, v in pages),
                  "ft_worker_arena_huge_pages %s, expected %d (%s at %s)" % (pages, huge, opts, holding[4]))

            # node_exporter's textfile: node0's figures, rewritten in place atomically.
            def textfile_has():
                try:
                    with open(textfile) as f:
                        text = f.read()
                except OSError:
                    return None
                m = re.search(r'ft_worker_ckpt_copies_total\{job="%s",node="node0",tier="arena"\} (\d+)' %
                              re.escape(c.job), text)
                return text if m and int(m.group(1)) == 2 else None
            c.wait_for(textfile_has, 30, "node0's 2 arena copies in FT_METRICS_TEXTFILE")
            # Nothing left beside it: a rewrite in flight has its temporary for a moment, never for long.
            c.wait_for(lambda: sorted(os.listdir(textdir)) == ["ftworker.prom"], 10, "no temporary left beside ftworker.prom")
            failed = False
            print("OK: prometheus read the hang incident and the verified checkpoint of step %d" % step)
    finally:
        if prom is not None:
            prom.stop(failed)
        shutil.rmtree(textdir, ignore_errors=True)


# -- the shipped dashboard and alert rules --------------------------------------------------------

# Grafana's own variables a panel may use besides the dashboard's, and what the test puts in
# their place: Prometheus scrapes every second here, so a 10 s window holds ten samples.
BUILTINS = {"__rate_interval": "10s", "__interval": "2s", "__range": "5m"}
VARIABLE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
METRIC_NAME = re.compile(r"\bft_[a-z0-9_]+\b")


def declared_metrics():
    """{name: kind} of every metric ftworker and ftmaster declare (a constant `kName = "ft_..."`
    passed to Registry::Declare in ftworker/ or ftmaster/), histograms with their _bucket, _sum
    and _count series."""
    names = {}
    for top in ("ftworker", "ftmaster"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            texts = []
            for name in files:
                if name.endswith((".cc", ".h")):
                    with open(os.path.join(folder, name)) as f:
                        texts.append(f.read())
            consts = {}
            for text in texts:
                consts.update(re.findall(r'constexpr const char\* (k\w+) = "(ft_[a-z0-9_]+)"', text))
            for text in texts:
                for const, kind in re.findall(r"Declare\(\s*(k\w+),\s*Kind::k(\w+)", text):
                    if const in consts:
                        names[consts[const]] = kind.lower()
    out = {}
    for metric, kind in names.items():
        out[metric] = kind
        if kind == "histogram":
            for suffix in ("_bucket", "_sum", "_count"):
                out[metric + suffix] = kind
    check(len(out) > 20, "only %d metric names found under ftworker/ and ftmaster/: %s" % (len(out), sorted(out)))
    return out


def check_metric_names(exprs, known, where):
    """Every ft_ name in the expressions is declared by ftworker or ftmaster."""
    unknown = {}
    for what, expr in exprs:
        for name in METRIC_NAME.findall(expr):
            if name not in known:
                unknown.setdefault(what, set()).add(name)
    check(not unknown, "%s uses metric names that neither ftworker nor ftmaster declares: %s" %
          (where, "; ".join("%s: %s" % (w, ", ".join(sorted(n))) for w, n in unknown.items())))


def dashboard_targets(dash, known):
    """Checks the dashboard's structure; returns [(panel title, refId, expr)] of every target."""
    check(dash.get("title") and dash.get("uid"), "the dashboard has no title or uid")
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    check(ds is not None and ds.get("type") == "datasource" and ds.get("query") == "prometheus",
          "no `datasource` variable of type datasource for prometheus: %s" % ds)
    job = variables.get("job")
    check(job is not None and job.get("type") == "query" and
          re.match(r"label_values\(.*,\s*job\)$", job.get("query", "")),
          "no `job` variable listing label_values(..., job): %s" % job)
    for v in variables.values():
        if v.get("type") == "query":
            check(v.get("datasource") == {"type": "prometheus", "uid": "${datasource}"},
                  "variable %s is not on ${datasource}: %s" % (v["name"], v.get("datasource")))
    panels = list(dash.get("panels", []))
    for p in list(panels):
        panels += p.get("panels", [])  # a collapsed row's
    check(panels, "the dashboard has no panels")
    ids = [p.get("id") for p in panels]
    check(len(ids) == len(set(ids)) and None not in ids, "panel ids missing or repeated: %s" % ids)
    out = []
    for p in panels:
        title = p.get("title", "").strip()
        check(title, "a panel without a title: id %s" % p.get("id"))
        check(isinstance(p.get("gridPos"), dict), "panel %r has no gridPos" % title)
        if p.get("type") == "row":
            check(not p.get("targets"), "row %r has targets" % title)
            continue
        check(p.get("datasource") == {"type": "prometheus", "uid": "${datasource}"},
              "panel %r is not on the ${datasource} variable: %s" % (title, p.get("datasource")))
        targets = p.get("targets") or []
        check(targets, "panel %r has no target" % title)
        refs = [t.get("refId") for t in targets]
        check(len(refs) == len(set(refs)) and None not in refs, "panel %r: refIds %s" % (title, refs))
        for t in targets:
            expr = (t.get("expr") or "").strip()
            check(expr, "panel %r target %s has no expr" % (title, t.get("refId")))
            check(t.get("datasource", p["datasource"]) == p["datasource"],
                  "panel %r target %s is on another datasource: %s" % (title, t.get("refId"), t.get("datasource")))
            for a, b in VARIABLE.findall(expr):
                name = a or b
                check(name in variables or name in BUILTINS,
                      "panel %r target %s uses $%s, which the dashboard does not define" % (title, t["refId"], name))
            out.append((title, t["refId"], expr))
    check_metric_names([("panel %r %s" % (title, ref), expr) for title, ref, expr in out], known,
                       "the dashboard")
    return variables, out


def substitute(expr, values):
    """The expression as Grafana sends it: $var and ${var} replaced."""
    return VARIABLE.sub(lambda m: values[m.group(1) or m.group(2)], expr)


def label_values(prom, query, values):
    """What Grafana's label_values(selector, label) variable query lists."""
    m = re.match(r"label_values\((.*),\s*(\w+)\)$", query)
    check(m, "not a label_values query: %s" % query)
    return prom.api("label/%s/values" % m.group(2), **{"match[]": substitute(m.group(1), values)})


def instant(prom, expr):
    """(vector, None) or (None, error) for an instant query, as Grafana's /api/v1/query."""
    url = prom.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        status, _, body = http_get(url)
    except urllib.error.HTTPError as e:  # 400 bad_data, 422 execution error
        return None, "%s %s" % (e.code, e.read().decode(errors="replace")[:500])
    reply = json.loads(body)
    if status != 200 or reply.get("status") != "success":
        return None, body[:500]
    return reply["data"]["result"], None


def check_rules_loaded(c, prom):
    """Every rule of ft-alerts.yml loaded and evaluated without an error."""
    with open(ALERTS) as f:
        want = set(re.findall(r"^\s*- alert: (\w+)", f.read(), re.M))
    check(want, "no alert in %s" % ALERTS)
    last = []

    def evaluated():
        nonlocal last
        last = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
        bad = [(r["name"], r.get("lastError")) for r in last if r.get("health") == "err"]
        check(not bad, "alert rules failing in prometheus: %s" % bad)
        return {r["name"] for r in last if r.get("health") == "ok"} >= want
    try:
        c.wait_for(evaluated, 30, "the alert rules %s evaluated by prometheus" % sorted(want), poll=0.5)
    except SystemExit:
        print("rules as prometheus last showed them: %s" % last, flush=True)
        raise


def case_dashboard(args):
    if not os.access(args.prometheus, os.X_OK):
        fail("no prometheus at %s: scripts/install-deps.sh installs Debian's package" % args.prometheus)
    with open(DASHBOARD) as f:
        dash = json.load(f)
    variables, targets = dashboard_targets(dash, declared_metrics())
    print("dashboard: %d panel targets" % len(targets), flush=True)
    hung, hang_step = 3, 60
    prom = None
    failed = True
    try:
        with Cluster(args, job="dash", nodes=2, ranks_per_node=2) as c:
            c.start_master(["--topology", "dp=4"], {**FAST, **METRICS})
            # A local tier (persists) and buddy copies of the other node's ranks on every worker.
            for node in ("node0", "node1"):
                c.start_worker(node, {**FAST, **METRICS, "FT_CKPT_REPLICATE_EVERY": "10"}, local_tier=True)
            master = metrics_address(c, c.master_log, "ftmaster")
            workers = [metrics_address(c, lambda n=n: c.worker_log(n), "ftworker " + n) for n in ("node0", "node1")]
            prom = Prometheus(args.prometheus, [master] + workers, c.log_dir, rule_files=[ALERTS])
            prom.start(c)
            prom.wait_value(c, 'up{job="ft"}', lambda v: len(v) == 3 and all(x == 1 for _, x in v),
                            "prometheus scraping the 3 targets")
            check_rules_loaded(c, prom)

            c.start_job(["--dp", "4"] + SMALL + ["--steps", "100000", "--compute-ms", "50",
                                                 "--fault", "hang-kernel", "--fault-rank", str(hung),
                                                 "--fault-step", str(hang_step)],
                        env={"FT_CKPT_EVERY": "10", "FT_CKPT_ON_SIGNAL": "none"})
            job = 'job="%s"' % c.job
            inc = c.wait_for(lambda: c.incidents("hang"), 90, "the hang incident in Redis")[0]
            check(inc["decision"] == "save-then-stop", "decision %s" % inc["decision"])
            prom.wait_value(c, "ft_master_incidents_total{%s}" % job, lambda v: total(v) >= 1,
                            "the incident in prometheus")
            prom.wait_value(c, "ft_master_evicted_nodes{%s}" % job, lambda v: total(v) >= 1,
                            "the evicted node in prometheus")
            prom.wait_value(c, "ft_master_ckpt_verified_step{%s}" % job, lambda v: v and v[0][1] >= 0,
                            "a verified step in prometheus")

            # The variables, as Grafana's variable queries list them.
            # `node` as "All" (its allValue); the panels' datasource is never in an expr.
            values = {"datasource": "prometheus", "job": c.job,
                      "node": variables.get("node", {}).get("allValue") or ".*", **BUILTINS}
            check(set(variables) <= set(values), "no test value for the variables %s" % (set(variables) - set(values)))
            jobs = label_values(prom, variables["job"]["query"], values)
            check(c.job in jobs, "the job variable lists %s, not %s" % (jobs, c.job))
            if "node" in variables:
                nodes = label_values(prom, variables["node"]["query"], values)
                check(sorted(nodes) == ["node0", "node1"], "the node variable lists %s" % nodes)

            # Every target answers; rates and copies may take a few scrapes more.
            pending = {(title, ref): substitute(expr, values) for title, ref, expr in targets}
            answers = {}
            deadline = time.monotonic() + 45
            while pending:
                for key, expr in list(pending.items()):
                    result, error = instant(prom, expr)
                    check(error is None, "panel %r target %s: the query fails: %s\n  %s" %
                          (key[0], key[1], error, expr))
                    if result:
                        answers[key] = result
                        del pending[key]
                if not pending or time.monotonic() > deadline:
                    break
                time.sleep(1)
            check(not pending, "%d panel target(s) have no data after 45 s:\n%s" % (len(pending), "\n".join(
                "  panel %r target %s: %s" % (t, r, e) for (t, r), e in sorted(pending.items()))))
            for (title, ref), result in sorted(answers.items()):
                shown = ", ".join("%s=%s" % (",".join("%s:%s" % kv for kv in sorted(r["metric"].items())) or "{}",
                                             r["value"][1]) for r in result[:4])
                print("  %-55s %s  %s%s" % (title[:55], ref, shown[:100], " ..." if len(result) > 4 else ""))

            # The alert rules under the same figures: the eviction fires.
            evicted = c.wait_for(lambda: [a for a in prom.api("alerts")["alerts"]
                                          if a["labels"].get("alertname") == "FtNodeEvicted" and
                                          a["labels"].get("job") == c.job and a["state"] == "firing"],
                                 30, "FtNodeEvicted firing for %s" % c.job, poll=0.5)
            print("alert: %s" % evicted[0]["annotations"].get("description"))
            check_rules_loaded(c, prom)
            failed = False
            print("OK: %d targets of %d panels answered, FtNodeEvicted fired" %
                  (len(answers), len({t for t, _ in answers})))
    finally:
        if prom is not None:
            prom.stop(failed)


def case_promtool_rules(args):
    if not os.access(args.promtool, os.X_OK):
        fail("no promtool at %s: scripts/install-deps.sh installs Debian's prometheus package" % args.promtool)
    for cmd in ([args.promtool, "check", "rules", ALERTS], [args.promtool, "test", "rules", ALERT_TESTS]):
        run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                             timeout=120)
        print("$ %s\n%s" % (" ".join(cmd), run.stdout), flush=True)
        check(run.returncode == 0, "%s failed (exit %d)" % (" ".join(cmd), run.returncode))
    with open(ALERTS) as f:
        text = f.read()
    exprs = re.findall(r"^\s*- alert: (\w+)\n\s*expr: \|\n((?:\s{10}.*\n)+)", text, re.M)
    check(len(exprs) == len(re.findall(r"^\s*- alert:", text, re.M)),
          "could not read every alert's expr from %s" % ALERTS)
    check_metric_names(exprs, declared_metrics(), ALERTS)
    # Each alert has a test that expects it to fire.
    with open(ALERT_TESTS) as f:
        tests = f.read()
    untested = [name for name, _ in exprs if not re.search(
        r"alertname: %s\n\s*eval_time: \S+\n\s*exp_alerts:\n\s*- exp_labels" % name, tests)]
    check(not untested, "alerts no test expects to fire: %s" % untested)
    print("OK: %d alert rules pass promtool's check and unit tests" % len(exprs))


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def case_master_textfile(args):
    textdir = tempfile.mkdtemp(prefix="ft-textfile-")
    textfile = os.path.join(textdir, "ftmaster.prom")
    try:
        with Cluster(args, job="mtext", nodes=1, ranks_per_node=1) as c:
            job = re.escape(c.job)
            c.start_master([], {"FT_METRICS_LISTEN": "", "FT_METRICS_TEXTFILE": textfile,
                                "FT_METRICS_INTERVAL": "200ms"})

            def leader():
                text = read_text(textfile)
                return text if text and re.search(
                    r'^ft_master_leader\{job="%s",node="[^"]+"\} 1$' % job, text, re.M) else None
            c.wait_for(leader, 30, "ft_master_leader 1 in the master's FT_METRICS_TEXTFILE")
            check("serving http" not in c.master_log(), "FT_METRICS_LISTEN='' still served:\n%s" % c.master_log())

            incident = {"v": 1, "id": "inc-textfile-1", "kind": "hang", "decision": "stop",
                        "first_event_unix_ms": int(time.time() * 1000) - 900,
                        "window_closed_unix_ms": int(time.time() * 1000) - 400, "decide_ms": 500}
            c.db.command("XADD", c.key("incidents"), "*", "json", json.dumps(incident))
            counted = r'^ft_master_incidents_total\{job="%s",kind="hang",decision="stop"\} 1$' % job
            c.wait_for(lambda: re.search(counted, read_text(textfile) or "", re.M), 30,
                       "ft_master_incidents_total{kind=hang,decision=stop} 1 in the textfile")
            # Nothing left beside it: a rewrite in flight has its temporary for a moment, never for long.
            c.wait_for(lambda: sorted(os.listdir(textdir)) == ["ftmaster.prom"], 10, "no temporary left beside ftmaster.prom")

            c.master.terminate()
            check(c.master.wait(timeout=30) == 0, "ftmaster exited with %s" % c.master.returncode)
            text = read_text(textfile) or ""
            check(re.search(counted, text, re.M) and "# TYPE ft_master_leader gauge" in text,
                  "the textfile after exit:\n%s" % text[:1000])
            print("OK: the master's textfile holds ft_master_leader 1 and the incident counter")
    finally:
        shutil.rmtree(textdir, ignore_errors=True)


def main():
    args = parse_args()
    cases = {"prometheus": case_prometheus, "master-textfile": case_master_textfile,
             "dashboard": case_dashboard, "promtool-rules": case_promtool_rules}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
