"""Test helpers: real ``redis-server`` processes on free loopback ports, and a tiny RESP client.

Each server runs in its own temporary directory with no persistence, is started on a port found
by binding ``127.0.0.1:0`` (retried if the port was taken meanwhile; a server counts as started
only when the one answering on its port has its process id), and is killed by PID when
stopped. Every wait is bounded in count and time. Nothing here connects anywhere but
127.0.0.1. No redis-py: the RESP client below is all the tests need to inspect a node.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Union

HOST = "127.0.0.1"

#: The key that holds a node's restart-quarantine marker (its ``run_id`` when written, and its
#: replication id after a space).
MARKER_KEY = b"redlock-marker"

_live: Dict[int, subprocess.Popen] = {}
_live_lock = threading.Lock()


def redis_server_binary() -> str:
    """The ``redis-server`` binary, or an ``AssertionError`` saying how to get it (the tests
    must fail, never skip, without it)."""
    name = os.environ.get("REDIS_SERVER", "redis-server")
    path = shutil.which(name)
    if path is None:
        raise AssertionError(
            f"`{name}` not found on PATH: these tests need a real redis-server "
            "(apt-get install redis-server, or run .ci/setup which installs it)"
        )
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class RespError(Exception):
    """An error reply (``-ERR ...``) from a node."""


def _encode(arg: Union[str, bytes, int]) -> bytes:
    if isinstance(arg, bytes):
        return arg
    return str(arg).encode("utf-8")


def _read_line(f) -> bytes:
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError(f"truncated RESP line: {line!r}")
    return line[:-2]


def _read_reply(f):
    line = _read_line(f)
    kind, rest = line[:1], line[1:]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        return RespError(rest.decode(errors="replace"))
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        if len(data) != n + 2:
            raise ConnectionError("truncated RESP bulk string")
        return data[:-2]
    if kind == b"*":
        n = int(rest)
        if n < 0:
            return None
        return [_read_reply(f) for _ in range(n)]
    raise ConnectionError(f"unexpected RESP reply: {line!r}")


@dataclass(frozen=True)
class TlsFiles:
    """How a node serves TLS (``--port 0 --tls-port P``), and what the inspection client uses:
    PEM files made by the Rust side (``examples/tls_certs.rs``; see ``conftest.tls_certs``)."""

    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    #: ``--tls-auth-clients yes``: the node requires a client certificate signed by ``ca``.
    auth_clients: bool = False

    def args(self, port: int) -> List[str]:
        return [
            "--port", "0",
            "--tls-port", str(port),
            "--tls-cert-file", self.server_cert,
            "--tls-key-file", self.server_key,
            "--tls-ca-cert-file", self.ca,
            "--tls-auth-clients", "yes" if self.auth_clients else "no",
        ]  # fmt: skip

    def context(self) -> ssl.SSLContext:
        """The inspection client's TLS: trusts ``ca``, presents the client certificate."""
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx


def resp(
    port: int,
    *args: Union[str, bytes, int],
    timeout: float = 5.0,
    tls: Optional[ssl.SSLContext] = None,
):
    """Sends one command to ``127.0.0.1:port`` (over TLS with ``tls``) and returns its decoded
    reply (an error reply is returned as a :class:`RespError` instance, not raised)."""
    parts = [_encode(a) for a in args]
    payload = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
    with socket.create_connection((HOST, port), timeout=timeout) as raw:
        s = raw if tls is None else tls.wrap_socket(raw, server_hostname=HOST)
        try:
            s.sendall(payload)
            with s.makefile("rb") as f:
                return _read_reply(f)
        finally:
            if s is not raw:
                s.close()


def _serves(port: int, pid: int, tls: Optional[ssl.SSLContext] = None) -> bool:
    """Whether the redis-server with process id ``pid`` answers on ``port``. Checked by pid, not
    by a PING: if the port was taken meanwhile (by another test run, which may be running in
    parallel), the answer comes from that other server while ours is exiting."""
    try:
        info = resp(port, "INFO", "server", timeout=0.5, tls=tls)
    except (OSError, ValueError):
        return False
    if not isinstance(info, bytes):
        return False
    return f"process_id:{pid}\r\n".encode() in info


class RedisServer:
    """One ``redis-server`` process: ``--save "" --appendonly no``, bound to 127.0.0.1."""

    def __init__(self, tls: Optional[TlsFiles] = None, extra: Sequence[str] = ()) -> None:
        self.binary = redis_server_binary()
        self.extra = list(extra)
        self.tls = tls
        self._ctx = tls.context() if tls is not None else None
        self.dir = tempfile.mkdtemp(prefix="redlock-py-test-")
        self.proc: Optional[subprocess.Popen] = None
        self.paused = False
        for _ in range(20):
            self.port = free_port()
            if self._spawn():
                return
        log = self.log_tail()
        self.stop()
        raise AssertionError(
            f"could not start redis-server on a free port after 20 tries; log:\n{log}"
        )

    def _spawn(self) -> bool:
        listen = self.tls.args(self.port) if self.tls else ["--port", str(self.port)]
        args = [
            self.binary,
            *listen,
            "--bind", HOST,
            "--dir", self.dir,
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
            "--loglevel", "warning",
            "--logfile", os.path.join(self.dir, "redis.log"),
            *self.extra,
        ]  # fmt: skip
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        with _live_lock:
            _live[proc.pid] = proc
        deadline = time.monotonic() + 10.0
        for _ in range(2000):  # bounded in count and time
            if proc.poll() is not None:
                self._reap(proc)
                return False  # exited: most likely the port was taken meanwhile
            if _serves(self.port, proc.pid, self._ctx):
                self.proc = proc
                return True
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)
        self._kill(proc)
        return False

    @staticmethod
    def _reap(proc: subprocess.Popen) -> None:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        with _live_lock:
            _live.pop(proc.pid, None)

    @classmethod
    def _kill(cls, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGCONT)
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        cls._reap(proc)

    @property
    def url(self) -> str:
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{HOST}:{self.port}"

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None else None

    def kill(self) -> None:
        """SIGKILL this server (by its PID) and reap it."""
        if self.proc is not None:
            self._kill(self.proc)
            self.proc = None

    def restart(self) -> None:
        """SIGKILL this server and start a new one on the same port (no persistence: it comes
        back empty, with a new run id and an uptime of 0). Bounded; raises if the port cannot
        be had again."""
        self.kill()
        deadline = time.monotonic() + 10.0
        for _ in range(200):  # the port is normally free at once (redis sets SO_REUSEADDR)
            if self._spawn():
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        raise AssertionError(
            f"could not restart redis-server on port {self.port}; log:\n{self.log_tail()}"
        )

    def pause(self) -> None:
        """SIGSTOP: connections are still accepted, nothing is answered."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        """Kill and remove the temporary directory."""
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self) -> str:
        try:
            with open(os.path.join(self.dir, "redis.log"), "rb") as f:
                return f.read()[-2000:].decode(errors="replace")
        except OSError:
            return "(no log)"

    def command(self, *args: Union[str, bytes, int]):
        return resp(self.port, *args, tls=self._ctx)

    def get(self, key: bytes) -> Optional[bytes]:
        return self.command("GET", key)

    def info_field(self, name: str) -> str:
        """One field of ``INFO server`` (``run_id``, ``uptime_in_seconds``, …)."""
        info = self.command("INFO", "server")
        assert isinstance(info, bytes), info
        for line in info.decode().splitlines():
            key, _, value = line.partition(":")
            if key == name:
                return value.strip()
        raise AssertionError(f"INFO server has no {name!r}")

    def run_id(self) -> bytes:
        """The server process's ``run_id`` (a new one after every restart)."""
        return self.info_field("run_id").encode()

    def marker(self) -> Optional[bytes]:
        """The restart-quarantine marker (``redlock-marker``), ``None`` when absent."""
        return self.get(MARKER_KEY)

    def marker_run_id(self) -> Optional[bytes]:
        """The ``run_id`` the marker names (its value up to the first space: the replication
        id follows), ``None`` when there is no marker."""
        m = self.marker()
        return None if m is None else m.split(b" ")[0]

    def marked(self) -> bool:
        """Whether the node's marker names its current ``run_id``."""
        return self.marker_run_id() == self.run_id()

    def flushall(self) -> None:
        """``FLUSHALL``: the keyspace (marker included) is lost, the process goes on."""
        assert self.command("FLUSHALL") == "OK"

    def pttl(self, key: bytes) -> int:
        return self.command("PTTL", key)


class Cluster:
    """N servers, started in parallel."""

    def __init__(self, n: int, tls: Optional[TlsFiles] = None) -> None:
        self.servers: List[RedisServer] = []
        errors: List[BaseException] = []
        lock = threading.Lock()

        def start() -> None:
            try:
                s = RedisServer(tls)
            except BaseException as e:  # noqa: BLE001 - reported below
                with lock:
                    errors.append(e)
                return
            with lock:
                self.servers.append(s)

        threads = [threading.Thread(target=start) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        if errors or len(self.servers) != n:
            self.stop()
            raise errors[0] if errors else AssertionError("redis-server start timed out")

    @property
    def urls(self) -> List[str]:
        return [s.url for s in self.servers]

    def holding(self, key: bytes, value: Union[str, bytes]) -> int:
        """How many live nodes hold ``key`` with exactly ``value``."""
        want = _encode(value)
        return sum(1 for s in self.servers if s.proc is not None and s.get(key) == want)

    def present(self, key: bytes) -> int:
        """How many live nodes have ``key`` at all."""
        return sum(1 for s in self.servers if s.proc is not None and s.command("EXISTS", key) == 1)

    def markers(self) -> List[Optional[bytes]]:
        """Each live node's restart-quarantine marker (``None`` where absent or down)."""
        return [s.marker() if s.proc is not None else None for s in self.servers]

    def wait_marked(self, timeout: float = 10.0) -> None:
        """Waits until every live node's marker holds its ``run_id`` (the library writes it
        right after it trusts the node, without waiting for the reply)."""
        wait_until(
            lambda: all(s.marked() for s in self.servers if s.proc is not None),
            timeout=timeout,
            what="every node's marker to hold its run_id",
        )

    def released(self, key: bytes, timeout: float = 5.0) -> None:
        """Asserts that ``key`` is released: at once on all but a minority of the nodes (the
        library returns as soon as a quorum confirmed), then on every node (bounded wait)."""
        assert self.present(key) < len(self.servers) // 2 + 1, "still held on a quorum"
        wait_until(lambda: self.present(key) == 0, timeout=timeout, what=f"{key!r} released")

    def stop(self) -> None:
        for s in self.servers:
            s.stop()


class OneShardCluster(RedisServer):
    """A Redis Cluster of one primary that serves every slot (``--cluster-enabled yes``,
    ``CLUSTER ADDSLOTSRANGE 0 16383``): one cluster node of the quorum."""

    def __init__(self) -> None:
        super().__init__(extra=["--cluster-enabled", "yes", "--cluster-port", str(free_port())])
        assert self.command("CLUSTER", "ADDSLOTSRANGE", "0", "16383") == "OK"
        wait_until(
            lambda: b"cluster_state:ok" in self.command("CLUSTER", "INFO"),
            timeout=30.0,
            what="cluster_state:ok",
        )

    @property
    def cluster_url(self) -> str:
        return f"redis+cluster://{HOST}:{self.port}"


class Sentinel:
    """One ``redis-server --sentinel`` process watching ``service`` at
    ``127.0.0.1:master_port`` (quorum 1), in its own temporary directory; with ``password``
    its clients must ``AUTH`` (``requirepass``)."""

    def __init__(self, service: str, master_port: int, password: Optional[str] = None) -> None:
        self.binary = redis_server_binary()
        self.dir = tempfile.mkdtemp(prefix="redlock-py-sentinel-")
        self.proc: Optional[subprocess.Popen] = None
        for _ in range(20):
            self.port = free_port()
            conf = os.path.join(self.dir, "sentinel.conf")
            with open(conf, "w") as f:
                f.write(
                    f"port {self.port}\nbind {HOST}\ndaemonize no\ndir {self.dir}\n"
                    f"logfile {self.dir}/sentinel.log\n"
                    f"sentinel monitor {service} {HOST} {master_port} 1\n"
                    + (f"requirepass {password}\n" if password else "")
                )
            proc = subprocess.Popen(
                [self.binary, conf, "--sentinel"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            with _live_lock:
                _live[proc.pid] = proc
            if self._answers(proc):
                self.proc = proc
                return
            RedisServer._kill(proc)
        self.stop()
        raise AssertionError("could not start a sentinel on a free port after 20 tries")

    def _answers(self, proc: subprocess.Popen) -> bool:
        deadline = time.monotonic() + 10.0
        for _ in range(2000):  # bounded in count and time
            if proc.poll() is not None or time.monotonic() > deadline:
                return False
            try:
                info = resp(self.port, "INFO", "server", timeout=0.5)
            except (OSError, ValueError):
                info = None
            if isinstance(info, bytes) and f"process_id:{proc.pid}\r\n".encode() in info:
                return True
            if isinstance(info, RespError) and str(info).startswith("NOAUTH"):
                return True  # a password is required: our process answers
            time.sleep(0.005)
        return False

    def url(self, service: str) -> str:
        """The failover group's URL through this sentinel."""
        return f"redis+sentinel://{HOST}:{self.port}/{service}"

    def stop(self) -> None:
        if self.proc is not None:
            RedisServer._kill(self.proc)
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)


def key_of(resource: Union[str, bytes]) -> bytes:
    """The Redis key of a resource: ``redlock:`` followed by its bytes."""
    return b"redlock:" + _encode(resource)


@atexit.register
def _kill_leftovers() -> None:
    """Safety net: a server whose fixture never tore down is killed by PID at exit."""
    with _live_lock:
        procs = list(_live.values())
    for p in procs:
        RedisServer._kill(p)


def wait_until(predicate, timeout: float = 5.0, interval: float = 0.01, what: str = "condition"):
    """Polls ``predicate`` until it is true; bounded in time and in count. Returns its value."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / interval) + 2):
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
