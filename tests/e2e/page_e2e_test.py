#!/usr/bin/env python3
"""ftmaster's live page end to end (README "The live page"): a real job under ftmaster, the page
and its JSON fetched from the metrics listener at each phase and checked from the DOM and the
JSON, and a screenshot of each phase taken with Debian's headless Chromium.

  --case hang-relaunch
        dp=4 on two nodes (2 ranks each), steps of ~200 ms, a periodic save every 10 steps;
        rank 3's kernel hangs at step 40 (as goodput_e2e_test.py's hang case).
          running    job running, 4 ranks running on node0/node1 with steps, a verified
                     checkpoint of step 10 in the checkpoints panel, the goodput panel there
          incident   the master's hang incident: rank 3 the suspect (its table row and the
                     SVG box marked data-suspect), a wait-for edge from a waiting rank to rank 3
                     (an SVG <g class="edge" data-waiter=W data-waited-on="3">) in the page and
                     in /api/incidents.json, the job stopped, goodput charging detection
          relaunch   the relaunch restores the just-in-time save and finishes: job finished,
                     the restore plan's step in the checkpoints panel, goodput's relaunch > 0
        Screenshots (PNG, 1280x2000) go to $FT_TEST_LOG_DIR/page-screens (else
        /tmp/ft-page-screens-<pid>) and are printed; a Chromium that cannot start fails the test.
"""

import argparse
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import check, fail  # noqa: E402
from ckpt_e2e_test import CkptCluster, FAST, SMALL  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser()
    for name in ("launch", "trainsim", "libft", "ftworker", "ftmaster", "reference"):
        p.add_argument("--" + name, required=name != "reference")
    p.add_argument("--case", required=True)
    return p.parse_args()


class Dom(html.parser.HTMLParser):
    """The page's elements as (tag, attrs, text up to the next tag), in document order."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.elements = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append([tag, dict(attrs), ""])

    def handle_data(self, data):
        if self.elements:
            self.elements[-1][2] += data

    def find(self, tag=None, **attrs):
        out = []
        for t, a, text in self.elements:
            if tag is not None and t != tag:
                continue
            if all(a.get(k.replace("_", "-")) == v for k, v in attrs.items()):
                out.append((t, a, text))
        return out


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode("utf-8")


def page_address(c):
    def found():
        m = re.search(r"page: serving http://([0-9.:]+)/", c.master_log())
        return m.group(1) if m else None
    return c.wait_for(found, 30, "the page's address in ftmaster's log")


class Page:
    def __init__(self, address, screens):
        self.base = "http://%s" % address
        self.screens = screens

    def api(self, panel):
        status, ctype, body = get("%s/api/%s.json" % (self.base, panel))
        check(status == 200 and ctype == "application/json", "/api/%s.json: %s %s" % (panel, status, ctype))
        return json.loads(body)

    def dom(self):
        status, ctype, body = get(self.base + "/")
        check(status == 200 and ctype.startswith("text/html"), "/: %s %s" % (status, ctype))
        check("<script" not in body, "the page carries a script")
        check(not re.search(r"""(src|href)=["']?https?://""", body), "the page loads an external asset")
        return Dom(body), body

    def screenshot(self, phase):
        """chromium --headless --screenshot; fails the test when Chromium cannot start."""
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        check(chromium, "no chromium on PATH: run scripts/install-deps.sh (Debian's package 'chromium')")
        path = os.path.join(self.screens, "page-%s.png" % phase)
        if os.path.exists(path):
            os.unlink(path)
        profile = tempfile.mkdtemp(prefix="ft-page-chromium-")
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--hide-scrollbars", "--user-data-dir=" + profile,
               "--window-size=1280,2000", "--screenshot=" + path, self.base + "/"]
        t0 = time.time()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        except subprocess.TimeoutExpired:
            fail("chromium did not finish the %s screenshot in 60 s" % phase)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        out = p.stdout.decode(errors="replace")
        check(p.returncode == 0 and os.path.exists(path) and os.path.getsize(path) > 5000,
              "chromium could not take the %s screenshot (exit %d):\n%s" % (phase, p.returncode, out[-3000:]))
        with open(path, "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % path)
        print("screenshot %-9s %s (%d bytes, %.1f s)" % (phase, path, os.path.getsize(path), time.time() - t0))
        return path


def run_hang_relaunch(args):
    # The hang 6 s after the periodic step 10: time for the running phase's checks and screenshot.
    steps, hang_step, hung, every = 48, 40, 3, 10
    model = ["--dp", "4"] + SMALL + ["--steps", str(steps), "--compute-ms", "200"]
    log_dir = os.environ.get("FT_TEST_LOG_DIR")
    screens = os.path.join(log_dir, "page-screens") if log_dir else "/tmp/ft-page-screens-%d" % os.getpid()
    os.makedirs(screens, exist_ok=True)
    t_start = time.time()
    with CkptCluster(args, job="page-hang", nodes=2, ranks_per_node=2) as c:
        c.start_master([], FAST)
        page = Page(page_address(c), screens)
        # Before any rank: the page is up and says so.
        check(page.api("ranks")["ranks"] == 0, "ranks before the job: %s" % page.api("ranks"))
        c.start_ckpt_workers(FAST)
        c.start_ckpt_job(model + ["--fault", "hang-kernel", "--fault-rank", str(hung), "--fault-step", str(hang_step)],
                         env={"FT_CKPT_EVERY": str(every)})

        # --- running: every rank running with a step, the periodic step verified.
        def running():
            r = page.api("ranks")
            ck = page.api("checkpoints")
            verified = [s for s in ck["steps"] if s["verdict"] == "verified"]
            ok = (r["ranks"] == 4 and r["states"] == {"running": 4} and
                  all(x["step"] >= 1 for x in r.get("list", [])) and verified)
            return (r, ck) if ok else None
        ranks, ck = c.wait_for(running, 60, "the page showing 4 running ranks and a verified step", poll=0.3)
        job = page.api("job")
        check(job["state"] == "running" and job["redis_up"] and job["leader"] == c.db.command("GET", c.key("leader")),
              "job panel while running: %s" % job)
        check(sorted(g["first_node"] for g in ranks["groups"]) == sorted(c.node_names) and
              all(g["ranks"] == 2 for g in ranks["groups"]), "ranks by node: %s" % ranks["groups"])
        dom, body = page.dom()
        rank_rows = sorted(int(a["data-rank"]) for t, a, _ in dom.elements if t == "tr" and "data-rank" in a)
        check(rank_rows == [0, 1, 2, 3], "the page's rank rows: %s" % rank_rows)
        check(dom.find("td", data_state="running"), "the job state cell is not 'running'")
        check(dom.find("section", id="goodput") and dom.find("section", id="checkpoints"), "a panel is missing")
        check(any(int(a["data-step"]) == every for t, a, _ in dom.elements if t == "tr" and "data-step" in a),
              "checkpoint step %d not in the page" % every)
        check(not c.redis.password or c.redis.password not in body, "the Redis password is in the page")
        page.screenshot("running")
        check(page.api("job")["state"] == "running", "the job left 'running' before its screenshot was taken: "
              "the running phase is too short for this machine")

        # --- incident: the hang decided, rank 3 the suspect, the wait-for edges drawn.
        c.wait_for(lambda: page.api("job")["state"] == "stopped", 90, "the page showing the job stopped", poll=0.3)
        incs = c.wait_for(lambda: page.api("incidents")["incidents"] or None, 10, "an incident on the page")
        hangs = [i for i in incs if i["kind"] == "hang"]
        check(len(hangs) == 1, "incidents on the page: %s" % [(i["kind"], i["id"]) for i in incs])
        inc = hangs[0]
        stream = [i["id"] for i in c.incidents()]
        check(inc["id"] in stream, "incident %s is not in the stream %s" % (inc["id"], stream))
        check([s["rank"] for s in inc["suspects"]] == [hung], "suspects %s, expected rank %d" % (inc["suspects"], hung))
        edges = [(e["waiter"], e["waited_on"]) for e in inc["wait_for"]["edges"]]
        check(edges and all(w != hung and on == hung for w, on in edges),
              "wait-for edges %s: expected waiting ranks -> rank %d (evidence: %s)" % (edges, hung, inc["evidence"]))
        dom, body = page.dom()
        svg_edges = [(a["data-waiter"], a["data-waited-on"]) for t, a, _ in dom.elements
                     if t == "g" and "edge" in a.get("class", "").split() and a.get("data-waiter") != "more"]
        check(sorted(svg_edges) == sorted((str(w), str(on)) for w, on in edges),
              "the SVG's edges %s, the JSON's %s" % (svg_edges, edges))
        more = dom.find("g", data_waiter="more")
        unnamed = inc["wait_for"]["unnamed_waiters"]
        check(len(more) == len(unnamed), "the 'more waiting' edges %s against %s" % (more, unnamed))
        suspect_boxes = [a for t, a, _ in dom.elements if t == "g" and a.get("data-suspect") == "1"]
        check([a["data-rank"] for a in suspect_boxes] == [str(hung)], "the SVG's suspect boxes %s" % suspect_boxes)
        suspect_rows = [a for t, a, _ in dom.elements if t == "tr" and a.get("class") == "suspect"]
        check([a["data-rank"] for a in suspect_rows] == [str(hung)], "the suspect rows %s" % suspect_rows)
        check(dom.find("div", data_incident=inc["id"], data_kind="hang"), "the incident's block is not in the page")
        g = page.api("goodput")
        check(g["ettr"] is not None and 0 < g["ettr"] < 1, "goodput while stopped: %s" % g)
        check(g["rank_s"]["productive"] > 0 and g["rank_s"]["detection"] + g["rank_s"]["save-stop"] > 0,
              "goodput charges nothing to the hang: %s" % g)
        ettr = [a for t, a, _ in dom.elements if t == "b" and "data-ettr" in a]
        check(ettr and abs(float(ettr[0]["data-ettr"]) - g["ettr"]) < 0.05, "the page's ETTR %s, JSON %s" % (ettr, g))
        causes = {a["data-cause"] for t, a, _ in dom.elements if t == "rect" and "data-cause" in a}
        check(causes == set(g["rank_s"]), "the goodput bar's causes %s" % causes)
        page.screenshot("incident")
        print("incident %s: suspect rank %d, wait-for edges %s, unnamed waiters %s; ETTR %.3f" %
              (inc["id"], hung, edges, unnamed, g["ettr"]))

        # --- relaunch: restores the just-in-time save and finishes.
        c.wait_for(lambda: c.job_proc.poll() is not None, 60, "the first launch gone", poll=0.1)
        restore = c.wait_for(lambda: (c.plan() or {}).get("step", -1) >= hang_step - 1 and c.plan()["step"], 30,
                             "a restore plan of the hang's step")
        c.start_ckpt_job(model, env={"FT_CKPT_EVERY": str(every)})
        c.wait_for(lambda: c.job_proc.poll() is not None, 90, "the relaunch finished", poll=0.2)
        check(c.job_proc.returncode == 0, "the relaunch exited %d" % c.job_proc.returncode)
        c.wait_for(lambda: page.api("job")["state"] == "finished", 30, "the page showing the job finished", poll=0.3)
        check(set(c.restored().values()) == {restore}, "the relaunch restored %s, expected step %d" %
              (c.restored(), restore))
        # The plan as Redis has it now (the relaunch's own periodic save may be newer), on the page.
        ck = c.wait_for(lambda: (lambda ck: ck if ck["restore_plan"] and c.plan() and
                                 ck["restore_plan"]["version"] == c.plan()["version"] else None)(page.api("checkpoints")),
                        10, "the page's restore plan matching Redis's", poll=0.3)
        plan_step = ck["restore_plan"]["step"]
        check(plan_step >= restore, "the page's plan step %d, before the restored %d" % (plan_step, restore))
        dom, body = page.dom()
        check(dom.find("p", data_plan_step=str(plan_step)), "the page's restore plan is not step %d" % plan_step)
        verdicts = {s["step"]: s["verdict"] for s in ck["steps"]}
        check(verdicts.get(plan_step) == "verified", "the plan's step %d on the page: %s" % (plan_step, verdicts))
        g = c.wait_for(lambda: (lambda g: g if g["rank_s"]["relaunch"] > 0 else None)(page.api("goodput")), 10,
                       "goodput charging the relaunch")
        check(dom.find("div", data_incident=inc["id"]), "the incident left the page after the relaunch")
        page.screenshot("relaunch")
        print("relaunch: restored step %d, finished, plan step %d; ETTR %.3f, relaunch %.1f rank-s" %
              (restore, plan_step, g["ettr"], g["rank_s"]["relaunch"]))
    print("OK: the live page through running, the hang and the relaunch in %.1f s; screenshots in %s" %
          (time.time() - t_start, screens))


def main():
    args = parse_args()
    cases = {"hang-relaunch": run_hang_relaunch}
    if args.case not in cases:
        fail("unknown case %s" % args.case)
    cases[args.case](args)


if __name__ == "__main__":
    main()
