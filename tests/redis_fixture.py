"""A real redis-server for end-to-end tests, and a minimal RESP client. Standard library only.

    server = RedisServer()            # a free loopback port and a random password
    server.start()
    db = server.client()              # RespClient, authenticated
    db.command("XADD", "s", "*", "k", "v")
    server.stop()                     # an outage (SIGKILL; no persistence: data is gone)
    server.restart()                  # the same port and password
    db = server.client()

The C++ twin is redis/tests/redis_server.h. Run this file with --self-test to check both
classes against the installed redis-server.
"""

import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


class RedisError(Exception):
    """An error reply from the server (the message is the server's, e.g. 'WRONGTYPE ...')."""


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CLUSTER_BUS_OFFSET = 10000


def _port_is_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_cluster_port():
    """A cluster node's port: it and its bus port (+10000) are free, and it is at most 55535,
    the highest Redis accepts with --cluster-enabled. Port 0 draws from the ephemeral range
    (32768-60999), a fifth of which is too high, so draw below it: both ports then stay clear
    of outgoing connections. The C++ twin is UnusedPortWithClusterBus."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randint(10000, 32767 - CLUSTER_BUS_OFFSET)
        if _port_is_free(port) and _port_is_free(port + CLUSTER_BUS_OFFSET):
            return port
    raise RuntimeError("no free port pair (port, port + %d) for a Redis Cluster node"
                       % CLUSTER_BUS_OFFSET)


class RespClient:
    """A blocking RESP2 client: command(*args) returns str (bulk strings, decoded as UTF-8
    with undecodable bytes escaped), int, None (nil) or a list of those; status replies come
    back as str ('OK'). Error replies raise RedisError; a dead connection raises
    ConnectionError (an OSError), so callers can catch (OSError, ConnectionError)."""

    def __init__(self, host="127.0.0.1", port=6379, password=None, user=None, timeout=5.0):
        self.host = host
        self.port = port
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._buf = b""
        if password:
            if user:
                self.command("AUTH", user, password)
            else:
                self.command("AUTH", password)

    def close(self):
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def command(self, *args):
        if self._sock is None:
            raise ConnectionError("RespClient to %s:%d is closed" % (self.host, self.port))
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, bytes):
                data = a
            else:
                data = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))
        try:
            self._sock.sendall(b"".join(out))
            reply = self._read()
        except (OSError, ConnectionError):
            self.close()
            raise
        if isinstance(reply, RedisError):
            raise reply
        return reply

    def _fill(self):
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionError("Redis at %s:%d closed the connection" % (self.host, self.port))
        self._buf += chunk

    def _line(self):
        while True:
            i = self._buf.find(b"\r\n")
            if i >= 0:
                line, self._buf = self._buf[:i], self._buf[i + 2:]
                return line
            self._fill()

    def _exact(self, n):
        while len(self._buf) < n + 2:
            self._fill()
        data, self._buf = self._buf[:n], self._buf[n + 2:]
        return data

    def _read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode(errors="surrogateescape")
        if kind == b"-":
            return RedisError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            return self._exact(n).decode(errors="surrogateescape")
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            items = [self._read() for _ in range(n)]
            for item in items:  # an error inside an array (EXEC) is raised like any other
                if isinstance(item, RedisError):
                    raise item
            return items
        raise ConnectionError("protocol error from %s:%d: %r" % (self.host, self.port, line[:80]))


class RedisServer:
    """redis-server on 127.0.0.1: a free port, a random password, no persistence, its files in
    a temporary directory. start() waits until it answers PING."""

    def __init__(self, password=None, port=None, user=None, user_password=None,
                 binary="redis-server", extra_args=(), cluster_bus=False):
        self.host = "127.0.0.1"
        self.port = port or 0
        self.password = password if password is not None else "pw-" + secrets.token_hex(12)
        self.user = user
        self.user_password = user_password
        self.binary = binary
        self.extra_args = list(extra_args)  # more redis-server options (--cluster-enabled yes)
        self.cluster_bus = cluster_bus  # a cluster node: its port + 10000 must be free too
        self.proc = None
        self.dir = tempfile.mkdtemp(prefix="ft-redis-")

    @property
    def url(self):
        """redis://127.0.0.1:<port>; the password goes in FT_REDIS_PASSWORD."""
        return "redis://%s:%d" % (self.host, self.port)

    def start(self, timeout=10.0):
        if self.proc is not None:
            return self
        fixed = self.port != 0
        last = None
        for _ in range(1 if fixed else 5):
            if not fixed:
                self.port = free_cluster_port() if self.cluster_bus else free_port()
            try:
                self._launch(timeout)
                return self
            except RuntimeError as e:  # the port was taken meanwhile: another one
                last = e
        raise last

    def _launch(self, timeout):
        args = [self.binary, "--port", str(self.port), "--bind", self.host, "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--dir", self.dir,
                "--logfile", os.path.join(self.dir, "redis.log")]
        if self.password:
            args += ["--requirepass", self.password]
        else:
            args += ["--protected-mode", "no"]
        if self.user:
            args += ["--user", self.user, "on", ">" + (self.user_password or ""), "~*", "&*",
                     "+@all"]
        args += self.extra_args
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.proc = None
                raise RuntimeError("redis-server on port %d exited at start: %s"
                                   % (self.port, self.log_tail()))
            try:
                with self.client(timeout=1.0) as c:
                    if c.command("PING") == "PONG":
                        return
            except (OSError, RedisError):
                time.sleep(0.02)
        self.stop()
        raise RuntimeError("redis-server on port %d did not answer PING within %.0f s"
                           % (self.port, timeout))

    def client(self, timeout=5.0):
        return RespClient(self.host, self.port, self.password, timeout=timeout)

    def stop(self):
        """SIGKILL: an outage, not a shutdown."""
        if self.proc is None:
            return
        try:
            self.proc.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.proc = None

    def restart(self, timeout=10.0):
        """Stops (if running) and starts again on the same port with the same password."""
        self.stop()
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._launch(timeout)
                return self
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def pause(self):
        """SIGSTOP: accepts nothing, answers nothing (a hung host)."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n=2000):
        try:
            with open(os.path.join(self.dir, "redis.log"), errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _self_test():
    def check(cond, what):
        if not cond:
            print("FAIL: " + what, flush=True)
            sys.exit(1)

    with RedisServer() as server:
        db = server.client()
        check(db.command("PING") == "PONG", "PING")
        check(db.command("SET", "k", "v") == "OK", "SET")
        check(db.command("GET", "k") == "v", "GET")
        check(db.command("GET", "missing") is None, "nil")
        check(db.command("INCRBY", "n", 41) == 41, "integer")
        db.command("XADD", "ft:{t}:events", "*", "kind", "timeout", "json", '{"v":1}')
        entries = db.command("XRANGE", "ft:{t}:events", "-", "+")
        check(len(entries) == 1 and entries[0][1] == ["kind", "timeout", "json", '{"v":1}'],
              "XRANGE: %r" % (entries,))
        try:
            db.command("HSET", "k", "f", "v")
            check(False, "WRONGTYPE raises")
        except RedisError as e:
            check(str(e).startswith("WRONGTYPE"), "error text: %s" % e)
        try:
            RespClient(server.host, server.port, "wrong-password")
            check(False, "wrong password raises")
        except RedisError as e:
            check("WRONGPASS" in str(e), "WRONGPASS: %s" % e)

        port = server.port
        server.stop()
        try:
            db.command("PING")
            check(False, "a dead server raises")
        except (OSError, ConnectionError):
            pass
        server.restart()
        check(server.port == port, "restart keeps the port")
        db = server.client()
        check(db.command("GET", "k") is None, "restart starts empty")
        db.close()

    with RedisServer(user="ftuser", user_password="ftpass") as server:
        with RespClient(server.host, server.port, "ftpass", user="ftuser") as db:
            check(db.command("ACL", "WHOAMI") == "ftuser", "ACL user")
    print("redis_fixture self-test: OK", flush=True)


if __name__ == "__main__":
    if "--self-test" in sys.argv[1:]:
        _self_test()
    else:
        print(__doc__)
