#!/usr/bin/env python3
"""Hardware evidence end to end: trainsim on gpusim under libft.so, two ftworkers reading their
node's signals from stand-ins the test writes (gpusim's libnvidia-ml.so.1 through
GPUSIM_NVML_STATE, a sysfs tree with RDMA port counters through FT_SYSFS_ROOT, a kernel log
through FT_KMSG_PATH), ftmaster, a real redis-server. dp=2 tp=4 on 2 nodes: rank 5 is node1's
local rank 1, GPU 1 (gpusim's bus 0x2a), whose nearest NIC in the test's PCI tree is mlx5_0.

  --case gpu       uncorrectable ECC on node0's GPU 0 while the job runs: a hardware incident
                   names rank 0 on node0 before anything hangs, nothing is evicted; then Xid 79
                   on rank 5's GPU and rank 5 SIGKILLed: the crash incident carries the Xid,
                   node1 is evicted with it as the reason (node0 is not)
  --case app-xid   Xid 13 (an application's) in node1's kernel log, then rank 5 SIGKILLed: the
                   crash incident carries the Xid as evidence, no hardware incident, nothing
                   evicted: a software crash restarts in place
  --case link      link_downed rises on node1's mlx5_0 (rank 5's NIC), then the DP
                   communicator of ranks 1 and 5 hangs in transfer: the transport hang names the
                   link and evicts node1 alone
  --case none      rank 5 SIGKILLed with nothing reported by any signal: the incident says
                   "none found", nothing evicted
  --case stack     rank 3 stops in a host function (trainsim --fault hang-host): the hang
                   incident's suspect stack, taken by its worker (eu-stack), names that
                   function, beside the healthy ranks' stacks, within 10 s of the verdict

Each prints `RESULT health case=... evidence_s=...` (the verdict to its evidence being in Redis).
"""

import json
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import check  # noqa: E402
from ckpt_e2e_test import CkptCluster, parse_args, suspects  # noqa: E402

# Progress tables refreshed every second: wait_running sees the ranks move.
FAST = {"FT_TIMEOUT_WARMUP": "2s", "FT_TIMEOUT_MIN_SAMPLES": "5", "FT_HEALTH_INTERVAL": "250ms", "FT_PROGRESS_REFRESH": "1s"}
MODEL = ["--dp", "2", "--tp", "4", "--param-bytes", "64kb", "--compute-ms", "20", "--steps", "100000"]
TOPOLOGY = ["--topology", "dp=2,tp=4,pp=1", "--order", "tp-dp-pp"]
# gpusim's PCI bus of GPU k (tests/gpusim/cudart/device.cc).
BUS = [0x18, 0x2a, 0x3a, 0x5d]
RANK = 5  # node1, local rank 1: GPU 1 (0000:2a:00.0)


class Node:
    """The files a node's worker reads its signals from."""

    def __init__(self, root, name):
        self.dir = os.path.join(root, name)
        self.nvml = os.path.join(self.dir, "nvml-state")
        self.kmsg = os.path.join(self.dir, "kmsg")
        self.sys = os.path.join(self.dir, "sys")
        os.makedirs(self.dir)
        open(self.nvml, "w").close()
        open(self.kmsg, "w").close()
        # The PCI tree: GPUs 0, 1 and mlx5_0 under one switch, GPUs 2, 3 and mlx5_1 under another.
        for gpu, bus in enumerate(BUS):
            switch = "0000:00:01.0" if gpu < 2 else "0000:00:02.0"
            self.pci_device("%04x:%02x:00.0" % (0, bus), switch)
        for nic, switch in (("mlx5_0", "0000:00:01.0"), ("mlx5_1", "0000:00:02.0")):
            real = self.pci_device("0000:%s:00.0" % ("05" if nic == "mlx5_0" else "85"), switch)
            port = os.path.join(self.sys, "class", "infiniband", nic, "ports", "1")
            for sub in ("counters", "hw_counters"):
                os.makedirs(os.path.join(port, sub))
            for name in ("link_downed", "link_error_recovery", "symbol_error", "port_rcv_errors",
                         "port_xmit_discards", "port_xmit_wait"):
                self.write(os.path.join(port, "counters", name), "0\n")
            for name in ("local_ack_timeout_err", "out_of_sequence"):
                self.write(os.path.join(port, "hw_counters", name), "0\n")
            self.write(os.path.join(port, "state"), "4: ACTIVE\n")
            os.symlink(real, os.path.join(self.sys, "class", "infiniband", nic, "device"))

    def pci_device(self, bus_id, switch):
        real = os.path.join(self.sys, "devices", "pci0000:00", switch, bus_id)
        os.makedirs(real, exist_ok=True)
        link = os.path.join(self.sys, "bus", "pci", "devices", bus_id)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(real, link)
        return real

    @staticmethod
    def write(path, text):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, path)

    def nvml_line(self, line):
        with open(self.nvml, "a") as f:
            f.write(line + "\n")

    def kmsg_line(self, message):
        usec = int(time.monotonic() * 1e6)
        with open(self.kmsg, "a") as f:
            f.write("3,%d,%d,-;%s\n" % (usec % 100000, usec, message))

    def counter(self, nic, name, value):
        self.write(os.path.join(self.sys, "class", "infiniband", nic, "ports", "1", "counters", name),
                   "%d\n" % value)

    def env(self):
        return {"GPUSIM_NVML_STATE": self.nvml, "FT_KMSG_PATH": self.kmsg, "FT_SYSFS_ROOT": self.sys}


class HealthCluster(CkptCluster):
    def __enter__(self):
        super().__enter__()
        self.signal_root = tempfile.mkdtemp(prefix="ft-e2e-health-")
        self.sig = {n: Node(self.signal_root, n) for n in self.node_names}
        return self

    def start(self, env=None):
        self.start_master(TOPOLOGY, FAST)
        for node in self.node_names:
            self.start_worker(node, self.ckpt_env({**FAST, **self.sig[node].env(), **(env or {})}))

    def wait_running(self, ops=30):
        """Every rank has completed `ops` collectives on a communicator: its poller has timed
        ops, so its segment names its GPU, and the timeouts are past their warm-up."""
        def past():
            rows = [(self.progress(r) or {}).get("comms", []) for r in range(8)]
            return all(any(row.get("completed", 0) >= ops for row in comms) for comms in rows)
        self.wait_for(past, 90, "every rank past %d collectives" % ops, poll=0.2)

    def __exit__(self, exc_type, exc, tb):
        failed = exc_type is not None and not (exc_type is SystemExit and exc.code in (0, None))
        result = super().__exit__(exc_type, exc, tb)
        if not failed:
            shutil.rmtree(self.signal_root, ignore_errors=True)
        return result

    def kill_rank(self, rank):
        pid = self.rank_pids()[rank]
        os.kill(pid, signal.SIGKILL)
        return time.time()

    def hardware_events(self, kind=None):
        return [e for e in self.events("hardware") if kind is None or e["hw"]["kind"] == kind]

    def evicted(self):
        return sorted(self.db.command("SMEMBERS", self.key("evicted")) or [])


def show(inc):
    print("incident %s: %s suspects=%s decision=%s\n  %s\n  evidence: %s" %
          (inc["id"], inc["kind"], suspects(inc), inc.get("decision"), inc.get("message"),
           json.dumps(inc.get("evidence"), indent=1)), flush=True)


def evidence_lag(inc):
    return max(0.0, (inc["decided_unix_ms"] - inc["first_event_unix_ms"]) / 1000.0)


def case_gpu(args):
    with HealthCluster(args, job="hw-gpu") as c:
        c.start()
        c.start_ckpt_job(MODEL)
        c.wait_running()
        t_ecc = time.time()
        c.sig["node0"].nvml_line("ecc 0 2")
        inc = c.wait_for(lambda: c.incidents("hardware"), 30, "a hardware incident for the ECC errors")[0]
        show(inc)
        print("hardware incident %.1f s after the ECC errors" % (inc["decided_unix_ms"] / 1000.0 - t_ecc))
        check(suspects(inc) == [(0, "node0")], "suspects %s, expected rank 0 on node0" % suspects(inc))
        check(inc["decision"] == "none", "a hardware signal alone decided %s" % inc["decision"])
        check(inc["hardware"][0]["kind"] == "ecc-uncorrected" and inc["hardware"][0]["critical"],
              "the incident's hardware: %s" % inc["hardware"])
        check(not c.incidents("crash") and not c.incidents("hang"), "something failed before the signal")
        check(c.evicted() == [], "evicted %s for a signal alone" % c.evicted())

        c.sig["node1"].nvml_line("xid 1 79")
        c.wait_for(lambda: c.hardware_events("xid"), 30, "the Xid reported")
        xid = c.hardware_events("xid")[0]
        check(xid["rank"] == RANK and xid["hw"]["device"] == "0000:2a:00.0",
              "the Xid names rank %s on %s, expected rank 5 on 0000:2a:00.0" % (xid["rank"], xid["hw"]["device"]))
        c.kill_rank(RANK)
        crash = c.wait_for(lambda: c.incidents("crash"), 60, "the crash incident")[0]
        show(crash)
        check(suspects(crash) == [(RANK, "node1")], "crash suspects %s" % suspects(crash))
        hw = crash.get("hardware") or []
        check(hw and hw[0]["kind"] == "xid" and hw[0]["value"] == 79 and hw[0]["node"] == "node1",
              "the crash incident's hardware starts with %s, expected Xid 79 on node1" % hw[:1])
        c.wait_for(lambda: c.evicted(), 30, "an eviction")
        check(c.evicted() == ["node1"], "evicted %s, expected node1 alone" % c.evicted())
        why = c.db.command("HGET", c.key("master"), "evicted_why:node1") or ""
        print("node1 evicted: %s" % why)
        check("Xid 79" in why, "the eviction's reason does not name the Xid: %r" % why)
        listed = c.master_cli("evicted")
        check("node1" in listed and "Xid 79" in listed, "`ftmaster evicted` says %r" % listed)
        print("RESULT health case=gpu evidence_s=%.1f evicted=%s" % (evidence_lag(crash), ",".join(c.evicted())))


def case_app_xid(args):
    with HealthCluster(args, job="hw-appxid") as c:
        c.start()
        c.start_ckpt_job(MODEL)
        c.wait_running()
        c.sig["node1"].kmsg_line("NVRM: Xid (PCI:0000:2a:00): 13, pid=%d, name=trainsim, Graphics "
                                 "Exception: ESR 0x405848=0x3100000" % c.rank_pids()[RANK])
        c.wait_for(lambda: c.hardware_events("xid"), 30, "the kernel log's Xid reported")
        xid = c.hardware_events("xid")[0]
        check(xid["hw"]["source"] == "kmsg" and not xid["hw"]["critical"] and xid["rank"] == RANK,
              "Xid 13 reported as %s" % xid)
        c.kill_rank(RANK)
        crash = c.wait_for(lambda: c.incidents("crash"), 60, "the crash incident")[0]
        show(crash)
        hw = crash.get("hardware") or []
        check(any(h["kind"] == "xid" and h["value"] == 13 for h in hw), "the crash carries no Xid 13: %s" % hw)
        check("restarts in place" in crash["message"], "the decision does not say it restarts in place: %s"
              % crash["message"])
        check(not c.incidents("hardware"), "an application's Xid raised a hardware incident")
        time.sleep(2)  # the eviction, if any, is written with the incident
        check(c.evicted() == [], "evicted %s for an application's Xid" % c.evicted())
        print("RESULT health case=app-xid evidence_s=%.1f evicted=none" % evidence_lag(crash))


def case_link(args):
    with HealthCluster(args, job="hw-link") as c:
        c.start()
        # The DP communicator of ranks 1 and 5 stops transferring at its 300th collective.
        c.start_job(MODEL, env=c.ckpt_env(), rank_env={RANK: {"GPUSIM_NCCL_STALL": "dp:300"}})
        c.wait_running()
        c.sig["node1"].counter("mlx5_0", "link_downed", 1)
        c.wait_for(lambda: c.hardware_events("link-downed"), 30, "link_downed reported")
        ev = c.hardware_events("link-downed")[0]
        check(ev["hw"]["device"] == "mlx5_0/1" and sorted(ev["hw"]["ranks"]) == [4, RANK],
              "link_downed on %s for ranks %s, expected mlx5_0/1 of ranks 4 and 5" % (ev["hw"]["device"], ev["hw"]["ranks"]))
        inc = c.wait_for(lambda: c.incidents("transport-hang"), 90, "the transport hang")[0]
        show(inc)
        check(sorted(r for r, _ in suspects(inc)) == [1, RANK], "transport hang suspects %s" % suspects(inc))
        c.wait_for(lambda: c.evicted(), 30, "an eviction")
        why = c.db.command("HGET", c.key("master"), "evicted_why:node1") or ""
        print("evicted %s: %s" % (c.evicted(), why))
        check(c.evicted() == ["node1"], "evicted %s, expected node1 alone" % c.evicted())
        check("mlx5_0/1" in why and "link-downed" in why, "the reason does not name the link: %r" % why)
        print("RESULT health case=link evidence_s=%.1f evicted=node1" % evidence_lag(inc))


def case_none(args):
    with HealthCluster(args, job="hw-none") as c:
        c.start()
        c.start_ckpt_job(MODEL)
        c.wait_running()
        c.kill_rank(RANK)
        crash = c.wait_for(lambda: c.incidents("crash"), 60, "the crash incident")[0]
        show(crash)
        check(crash.get("hardware_checked") and not crash.get("hardware"), "hardware %s" % crash.get("hardware"))
        check(any("none found on node1" in e for e in crash["evidence"]), "no 'none found': %s" % crash["evidence"])
        time.sleep(2)
        check(c.evicted() == [], "evicted %s for a crash with no evidence" % c.evicted())
        print("RESULT health case=none evidence_s=%.1f evicted=none" % evidence_lag(crash))


def case_stack(args):
    with HealthCluster(args, job="hw-stack") as c:
        c.start()
        c.start_ckpt_job(MODEL[:-2] + ["--steps", "100000", "--fault", "hang-host", "--fault-rank", "3",
                                       "--fault-step", "60"])
        inc = c.wait_for(lambda: c.incidents("hang"), 90, "the hang incident")[0]
        show(inc)
        check(suspects(inc) == [(3, "node0")], "suspects %s, expected rank 3 on node0" % suspects(inc))

        def shown():
            out = c.master_cli("incidents")
            return out if "stack of rank 3 (suspect" in out and "stack of healthy" in out else None
        text = c.wait_for(shown, 30, "the suspect's and the healthy ranks' stacks in `ftmaster incidents`", poll=0.5)
        took = time.time() - inc["decided_unix_ms"] / 1000.0
        print("$ ftmaster incidents\n" + text)
        line = next(l for l in text.splitlines() if "stack of rank 3 (suspect" in l)
        check("InjectHostFault" in line and "pause" in line,
              "the suspect's stack does not name the host function it waits in: %s" % line)
        listed = [json.loads(l) for l in c.master_cli("incidents", "--json").splitlines() if l.strip()]
        stacks = next(i["stacks"] for i in listed if i["id"] == inc["id"])
        check(sorted(s["rank"] for s in stacks) == [0, 1, 3], "stacks of ranks %s, expected 3 and two healthy"
              % sorted(s["rank"] for s in stacks))
        check(took <= 10, "the stacks were shown %.1f s after the verdict" % took)
        print("RESULT health case=stack stack_s=%.1f" % took)


CASES = {"gpu": case_gpu, "app-xid": case_app_xid, "link": case_link, "none": case_none, "stack": case_stack}


def main():
    args = parse_args()
    CASES[args.case](args)
    print("OK")


if __name__ == "__main__":
    main()
