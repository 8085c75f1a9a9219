"""A real Redis Cluster for end-to-end tests: 3 masters with one replica each, every node a
redis-server on a free loopback port with --cluster-enabled yes and one password (requirepass
and masterauth), formed by `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`
as an operator would, and waited for until every node says cluster_state:ok and every
replica's link is up. Standard library only.

    with RedisCluster() as rc:
        rc.url                        # redis+cluster://127.0.0.1:p1,...  (password: rc.password)
        db = rc.client()              # ClusterRespClient: routes by slot, follows MOVED/ASK
        old = rc.kill_master_of(slot)      # SIGKILL the shard's master
        rc.wait_new_master(slot, old, 30)  # its replica promoted

Cluster (tests/e2e/cluster.py) takes one in place of its RedisServer. The C++ twin is
redis/tests/redis_cluster.h. Run this file with --self-test to check it against the installed
redis-server and redis-cli.
"""

import os
import secrets
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redis_fixture import RedisError, RedisServer, RespClient  # noqa: E402

SLOTS = 16384


def crc16(data):
    """CRC16/XMODEM, Redis Cluster's key hash."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def key_slot(key):
    data = key.encode() if isinstance(key, str) else key
    start = data.find(b"{")
    if start >= 0:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1:end]
    return crc16(data) % SLOTS


KEYLESS = {"PING", "INFO", "CLUSTER", "ACL", "CONFIG", "WAIT", "DBSIZE", "SCRIPT", "FLUSHALL", "TIME"}


class ClusterRespClient:
    """command(*args) as RespClient's, routed to the master of the first key's slot (EVAL: its
    first KEY); MOVED refreshes the map, ASK is followed once with ASKING, a dead node makes it
    reload the map from the others (a failover) and retry for up to `retry_s` seconds."""

    def __init__(self, cluster, timeout=5.0, retry_s=10.0):
        self.cluster = cluster
        self.timeout = timeout
        self.retry_s = retry_s
        self.conns = {}
        self.owner = {}
        self.refresh()

    def close(self):
        for c in self.conns.values():
            c.close()
        self.conns = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _conn(self, addr):
        if addr not in self.conns or self.conns[addr]._sock is None:
            host, port = addr.rsplit(":", 1)
            self.conns[addr] = RespClient(host, int(port), self.cluster.password, timeout=self.timeout)
        return self.conns[addr]

    def refresh(self):
        last = None
        for server in self.cluster.servers:
            if not server.running():
                continue
            try:
                with server.client(timeout=self.timeout) as c:
                    ranges = c.command("CLUSTER", "SLOTS")
            except (OSError, ConnectionError, RedisError) as e:
                last = e
                continue
            owner = {}
            for r in ranges:
                host = r[2][0] or server.host
                for slot in range(r[0], r[1] + 1):
                    owner[slot] = "%s:%d" % (host, r[2][1])
            self.owner = owner
            return
        raise ConnectionError("no Redis Cluster node answered CLUSTER SLOTS: %s" % last)

    def _route(self, args):
        name = str(args[0]).upper()
        if name in KEYLESS or len(args) < 2:
            return self.owner.get(0) or next(iter(self.owner.values()))
        key = args[3] if name in ("EVAL", "EVALSHA") and int(args[2]) > 0 else args[1]
        return self.owner[key_slot(str(key))]

    def command(self, *args):
        deadline = time.monotonic() + self.retry_s
        addr = self._route(args)
        asking = False
        while True:
            try:
                conn = self._conn(addr)
                if asking:
                    conn.command("ASKING")
                return conn.command(*args)
            except RedisError as e:
                word = str(e).split(" ", 1)[0]
                if word in ("MOVED", "ASK"):
                    addr = str(e).split()[2]
                    asking = word == "ASK"
                    if word == "MOVED":
                        self.refresh()
                    continue
                if word in ("CLUSTERDOWN", "TRYAGAIN") and time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                raise
            except (OSError, ConnectionError):
                self.conns.pop(addr, None)
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
                try:
                    self.refresh()
                except (OSError, ConnectionError):
                    continue
                addr = self._route(args)
                asking = False


class RedisCluster:
    def __init__(self, masters=3, node_timeout_ms=1000):
        self.password = "pw-" + secrets.token_hex(12)
        self.masters = masters
        args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(node_timeout_ms), "--masterauth", self.password,
                "--cluster-replica-validity-factor", "0"]
        self.servers = [RedisServer(password=self.password, extra_args=args,
                                    cluster_bus=True) for _ in range(2 * masters)]
        self.host = "127.0.0.1"

    @property
    def url(self):
        """redis+cluster://127.0.0.1:<port>,... (every node a seed); the password goes in
        FT_REDIS_PASSWORD."""
        return "redis+cluster://" + ",".join("%s:%d" % (s.host, s.port) for s in self.servers)

    @property
    def port(self):  # for code that prints the server's port
        return self.servers[0].port

    def addr(self, server):
        return "%s:%d" % (server.host, server.port)

    def start(self, timeout=60.0):
        for s in self.servers:
            s.start()
        env = dict(os.environ, REDISCLI_AUTH=self.password)
        out = subprocess.run(["redis-cli", "--cluster", "create"] + [self.addr(s) for s in self.servers]
                             + ["--cluster-replicas", "1", "--cluster-yes"],
                             env=env, capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError("redis-cli --cluster create failed (%d): %s %s"
                               % (out.returncode, out.stdout[-2000:], out.stderr[-2000:]))
        deadline = time.monotonic() + timeout
        while not self._healthy():
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster is not ok within %.0f s" % timeout)
            time.sleep(0.05)
        return self

    def _info(self, server, section):
        with server.client(timeout=2.0) as c:
            if section == "cluster":
                return c.command("CLUSTER", "INFO")
            return c.command("INFO", section)

    def _healthy(self):
        try:
            for s in self.servers:
                if not s.running():
                    continue
                if "cluster_state:ok" not in self._info(s, "cluster"):
                    return False
                repl = self._info(s, "replication")
                if "role:slave" in repl and "master_link_status:up" not in repl:
                    return False
            return True
        except (OSError, ConnectionError, RedisError):
            return False

    def client(self, timeout=5.0):
        return ClusterRespClient(self, timeout=timeout)

    def server_at(self, addr):
        for s in self.servers:
            if self.addr(s) == addr:
                return s
        return None

    def master_of(self, slot):
        """The server that masters `slot` now, as a live node says."""
        return self.server_at(ClusterRespClient(self).owner[slot])

    def kill_master_of(self, slot):
        """SIGKILLs the shard's master (after its replica acknowledged every write: WAIT), and
        returns its address."""
        master = self.master_of(slot)
        with master.client() as c:
            c.command("WAIT", "1", "2000")
        addr = self.addr(master)
        master.stop()
        return addr

    def wait_new_master(self, slot, old_addr, timeout=30.0):
        """Waits until a live node reports another master for `slot` and the cluster is ok;
        returns the new master's address."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                new = ClusterRespClient(self).owner.get(slot)
                if new and new != old_addr and "cluster_state:ok" in self._info(self.server_at(new), "cluster"):
                    return new
            except (OSError, ConnectionError, RedisError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("slot %d still on %s after %.0f s" % (slot, old_addr, timeout))
            time.sleep(0.05)

    def stop(self):
        for s in self.servers:
            s.close()

    def close(self):
        self.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


def _self_test():
    def check(cond, what):
        if not cond:
            print("FAIL: " + what, flush=True)
            sys.exit(1)

    check(crc16(b"123456789") == 0x31C3, "CRC16/XMODEM check value")
    check(key_slot("foo{hash_tag}") == 2515 and key_slot("somekey") == 11058, "documented slots")
    with RedisCluster() as rc:
        db = rc.client()
        seen = set()
        for i in range(30):
            key = "t:{k%d}" % i
            db.command("SET", key, i)
            check(db.command("GET", key) == str(i), "GET %s" % key)
            with rc.server_at(db.owner[key_slot(key)]).client() as direct:
                check(direct.command("CLUSTER", "KEYSLOT", key) == key_slot(key), "slot of %s" % key)
                check(direct.command("GET", key) == str(i), "%s on its slot's master" % key)
            seen.add(db.owner[key_slot(key)])
        check(len(seen) == 3, "keys on all three masters: %s" % seen)
        slot = key_slot("t:{k0}")
        old = rc.kill_master_of(slot)
        new = rc.wait_new_master(slot, old)
        check(new != old, "a replica took over")
        check(db.command("GET", "t:{k0}") == "0", "the key survived the failover")
    print("redis_cluster_fixture self-test: OK", flush=True)


if __name__ == "__main__":
    if "--self-test" in sys.argv[1:]:
        _self_test()
    else:
        print(__doc__)
