"""A real Redis Cluster of three primaries, and a real primary + replica watched by three sentinels, on loopback.

Locally a missing binary skips the test with the reason; under CI (CI=true) it fails
(tests/support/servers.require_binary). Sentinels run as `redis-server --sentinel`, which every
redis-server can do (Debian's redis-sentinel is the same binary under another name).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.support.processes import free_port
from tests.support.servers import require_binary, wait_for_port

MASTER_NAME = "mymaster"


def poll(condition: Callable[[], bool], *, seconds: float = 60, what: str) -> None:
    """Return once `condition()` holds; fail after `seconds` (for setup, outside an event loop)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.05)


def _cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too."""
    while True:
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


@contextmanager
def _server(workdir: Path, port: int, *options: str) -> Iterator[subprocess.Popen[bytes]]:
    binary = require_binary("redis-server")
    workdir.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir), "--protected-mode", "no", *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(10)


@dataclass
class Cluster:
    """Three primaries and no replicas; `url` names the first as the seed."""

    ports: list[int]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def node(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port)

    def node_ids(self) -> dict[int, str]:
        with self.node(self.ports[0]) as client:
            nodes = client.execute_command("CLUSTER", "NODES").decode()
        ids = {}
        for line in nodes.splitlines():
            node_id, address = line.split()[:2]
            ids[int(address.split("@")[0].rsplit(":", 1)[1])] = node_id
        return ids

    def owner(self, key: str) -> int:
        """The port of the primary that serves `key`'s slot."""
        with self.node(self.ports[0]) as client:
            slot = int(client.execute_command("CLUSTER", "KEYSLOT", key))
            for start, end, primary, *_ in client.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    return int(primary[1])
        raise AssertionError(f"no node serves slot {slot}")

    def move_slot(self, key: str, to: int) -> None:
        """Migrate `key`'s slot, keys and all, to the primary at port `to`, as `redis-cli --cluster reshard` does."""
        source = self.owner(key)
        slot = self.start_move(key, to=to)
        self.migrate_keys(slot, source=source, to=to)
        self.finish_move(slot, to=to)

    def start_move(self, key: str, *, to: int) -> int:
        """Mark `key`'s slot migrating from its owner to the primary at `to`; the slot."""
        source = self.owner(key)
        ids = self.node_ids()
        with self.node(source) as old, self.node(to) as new:
            slot = int(old.execute_command("CLUSTER", "KEYSLOT", key))
            new.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source])
            old.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to])
        return slot

    def migrate_keys(self, slot: int, *, source: int, to: int) -> None:
        """Move every key of `slot` from the primary at `source` to the one at `to`."""
        with self.node(source) as old:
            while keys := old.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
                old.execute_command("MIGRATE", "127.0.0.1", to, "", 0, 5000, "KEYS", *keys)

    def finish_move(self, slot: int, *, to: int) -> None:
        """Tell every node that the primary at `to` now owns `slot`."""
        owner = self.node_ids()[to]
        for port in [to, *(port for port in self.ports if port != to)]:  # the new owner first, as reshard does
            with self.node(port) as each:
                each.execute_command("CLUSTER", "SETSLOT", slot, "NODE", owner)


@contextmanager
def redis_cluster(workdir: Path) -> Iterator[Cluster]:
    """Three `redis-server --cluster-enabled yes` made one cluster by `redis-cli --cluster create`, stopped on exit."""
    cli = require_binary("redis-cli")
    cluster = Cluster([_cluster_port() for _ in range(3)])
    with ExitStack() as stack:
        # a node is taken for failed after cluster-node-timeout without an answer, which (no replicas) takes the
        # cluster down: no test fails a node, so it is long enough that a loaded machine's stall is not one
        for port in cluster.ports:
            stack.enter_context(_server(
                workdir / str(port), port, "--cluster-enabled", "yes",
                "--cluster-config-file", str(workdir / str(port) / "nodes.conf"), "--cluster-node-timeout", "15000",
            ))  # fmt: skip
        subprocess.run(
            [cli, "--cluster", "create", *[f"127.0.0.1:{port}" for port in cluster.ports],
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

        def ready() -> bool:
            for port in cluster.ports:
                with cluster.node(port) as client:
                    if b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                        return False
            return True

        poll(ready, what="the cluster's state is ok on every node")
        yield cluster


@dataclass
class Watched:
    """A primary and its replica, watched by three sentinels as MASTER_NAME."""

    primary: int
    replica: int
    sentinels: list[int]
    nodes: list[str] = field(default_factory=list)
    password: str | None = None  # the primary's and the replica's
    sentinel_password: str | None = None

    def sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, password=self.sentinel_password)

    def server(self, port: int) -> redis.Redis:
        """A client of the primary or the replica."""
        return redis.Redis(host="127.0.0.1", port=port, password=self.password)

    def primary_port(self) -> int:
        """The port the sentinels now name as the primary."""
        with self.sentinel(self.sentinels[0]) as sentinel:
            _, port = sentinel.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
        return int(port)

    def fail_over(self) -> int:
        """Have the sentinels promote the replica; the port of the primary before."""
        before = self.primary_port()
        with self.sentinel(self.sentinels[0]) as sentinel:
            sentinel.execute_command("SENTINEL", "FAILOVER", MASTER_NAME)
        return before

    def demoted(self, old: int) -> bool:
        """Whether every sentinel names another primary than `old`, and `old` has become a replica."""
        for port in self.sentinels:
            with self.sentinel(port) as sentinel:
                _, named = sentinel.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
            if int(named) == old:
                return False
        with self.server(old) as server:
            return bool(server.info("replication")["role"] == "slave")


@contextmanager
def redis_sentinels(
    workdir: Path, *, password: str | None = None, sentinel_password: str | None = None
) -> Iterator[Watched]:
    """A primary, a replica of it and three sentinels (`redis-server --sentinel`), all stopped on exit.

    With `password`, the primary and the replica require it; with `sentinel_password`, the sentinels.
    """
    watched = Watched(
        primary=free_port(), replica=free_port(), sentinels=[free_port() for _ in range(3)],
        password=password, sentinel_password=sentinel_password,
    )  # fmt: skip
    watched.nodes = [f"127.0.0.1:{port}" for port in watched.sentinels]
    with ExitStack() as stack:
        stack.enter_context(redis_replicated(workdir, primary=watched.primary, replica=watched.replica, password=password))
        for port in watched.sentinels:
            conf = workdir / f"sentinel-{port}.conf"  # sentinels rewrite their config: one file each
            # tests fail over on purpose (SENTINEL FAILOVER): a primary silent for 1 s on a loaded machine must
            # not be failed over as well, so down-after is long
            lines = [
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {watched.primary} 2",
                f"sentinel down-after-milliseconds {MASTER_NAME} 15000",
                f"sentinel failover-timeout {MASTER_NAME} 5000",
            ]
            if password:
                lines.append(f"sentinel auth-pass {MASTER_NAME} {password}")
            if sentinel_password:  # asked of clients, and given to the other sentinels
                lines += [f"requirepass {sentinel_password}", f"sentinel sentinel-pass {sentinel_password}"]
            conf.write_text("\n".join(lines) + "\n")
            stack.enter_context(_sentinel(workdir, port, conf))

        def ready() -> bool:
            for port in watched.sentinels:
                with watched.sentinel(port) as sentinel:
                    master = sentinel.sentinel_master(MASTER_NAME)
                    if int(master["num-slaves"]) < 1 or int(master["num-other-sentinels"]) < 2:
                        return False
            return True

        poll(ready, what="every sentinel sees the replica and the other sentinels")
        yield watched


@contextmanager
def redis_replicated(workdir: Path, *, primary: int, replica: int, password: str | None = None) -> Iterator[None]:
    """A redis-server on port `primary` and its replica on `replica`, linked, stopped on exit; both require `password`."""
    auth = ["--requirepass", password, "--masterauth", password] if password else []
    # no wait before a replica's first full copy (diskless sync waits 5 s by default, for more replicas)
    with _server(workdir / "primary", primary, "--repl-diskless-sync-delay", "0", *auth), _server(
        workdir / "replica", replica, "--replicaof", "127.0.0.1", str(primary), *auth
    ):
        def linked() -> bool:
            with redis.Redis(host="127.0.0.1", port=replica, password=password) as client:
                return bool(client.info("replication").get("master_link_status") == "up")

        poll(linked, what="the replica is linked to its primary")
        yield


@contextmanager
def _sentinel(workdir: Path, port: int, conf: Path) -> Iterator[subprocess.Popen[bytes]]:
    binary = require_binary("redis-server")
    process = subprocess.Popen(
        [binary, str(conf), "--sentinel", "--port", str(port), "--bind", "127.0.0.1", "--protected-mode", "no",
         "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(10)
