#!/usr/bin/env python3
"""trainsim's bootstrap, with ranks started by hand (no launcher), on the gpusim stand-ins.

Rank 1 starts before rank 0 and must retry its connection; rank 0 must listen on MASTER_ADDR
only (127.0.0.2 here, so a listener on the wildcard or on 127.0.0.1 is caught); rank 2 joins
last. The three then train (dp=3, a global batch that is not a power of two) and must match
trainsim_reference.
"""

import os
import socket
import subprocess
import time

import trainsim_common as tc

ADDR = "127.0.0.2"
MODEL = ["--dp", "3", "--steps", "4", "--param-bytes", "256k"]


def listeners(port):
    """Local addresses (ip, port) in LISTEN state on `port`, from /proc/net/tcp{,6}."""
    found = []
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            local, state = cols[1], cols[3]
            ip_hex, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:
                if len(ip_hex) == 8:
                    ip = socket.inet_ntoa(bytes.fromhex(ip_hex)[::-1])
                else:
                    ip = "ipv6:" + ip_hex
                found.append(ip)
    return found


def main():
    args = tc.parse_paths()
    port = 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = {}

    def start(rank):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="3", MASTER_ADDR=ADDR,
                   MASTER_PORT=str(port))
        procs[rank] = subprocess.Popen([args.trainsim] + MODEL, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)

    try:
        start(1)
        time.sleep(1.0)
        tc.check(procs[1].poll() is None, "rank 1 gave up before rank 0 started")
        start(0)
        deadline = time.monotonic() + 20
        while not listeners(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        found = listeners(port)
        tc.check(found == [ADDR], "rank 0 listens on %s, expected only %s" % (found, ADDR))
        with socket.socket() as s:
            tc.check(s.connect_ex(("127.0.0.1", port)) != 0, "127.0.0.1:%d accepted a connection" % port)
        print("OK: rank 0 listens on %s:%d only" % (ADDR, port))
        start(2)
        out = {}
        for rank, p in procs.items():
            o, e = p.communicate(timeout=60)
            tc.check(p.returncode == 0, "rank %d exited %d: %s" % (rank, p.returncode, e))
            out[rank] = o
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    got = tc.checksums("".join(out.values()))
    tc.verify_against_reference(args, got, MODEL, 3)


if __name__ == "__main__":
    main()
