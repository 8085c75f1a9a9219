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
  --case master-textfile
                      ftmaster alone with FT_METRICS_TEXTFILE (no HTTP listener): the file
                      holds ft_master_leader 1 once it leads, then the incident counter of an
                      incident put into the job's incident stream (one by hand: this case is
                      about the file, the prometheus case about real incidents), rewritten in
                      place with nothing else left in its directory, and a last time at exit.

Prometheus comes from scripts/install-deps.sh (Debian's package); without it the test fails
saying so.
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
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, check, fail  # noqa: E402

FAST = {"FT_TIMEOUT_WARMUP": "2s", "FT_TIMEOUT_MIN_SAMPLES": "5"}
# Each daemon on a free loopback port (several workers share this host), figures refreshed
# every 200 ms so that a 1 s scrape sees them at once.
METRICS = {"FT_METRICS_LISTEN": "127.0.0.1:0", "FT_METRICS_INTERVAL": "200ms"}
SMALL = ["--param-bytes", "256kb", "--hidden", "4096"]


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--prometheus", default=shutil.which("prometheus") or "/usr/bin/prometheus")
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
    def __init__(self, binary, targets, log_dir):
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="ft-prometheus-")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    # honor_labels: ft's own `job` label (the training job) is kept; without
                    # it Prometheus renames it exported_job in favour of the scrape job's name.
                    "scrape_configs:\n  - job_name: ft\n    honor_labels: true\n    static_configs:\n"
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
            check(sorted(os.listdir(textdir)) == ["ftworker.prom"], "textfile dir holds %s" % os.listdir(textdir))
            failed = False
            print("OK: prometheus read the hang incident and the verified checkpoint of step %d" % step)
    finally:
        if prom is not None:
            prom.stop(failed)
        shutil.rmtree(textdir, ignore_errors=True)


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
            check(sorted(os.listdir(textdir)) == ["ftmaster.prom"], "textfile dir holds %s" % os.listdir(textdir))

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
    cases = {"prometheus": case_prometheus, "master-textfile": case_master_textfile}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
