"""SIGHUP: read the config file again; new requests take the new configuration, requests in flight keep theirs.

The file is read and checked as `gateway check-config` checks it. A file that does not load
changes nothing: every error is logged and the configuration served so far stays. One that
loads becomes an application of its own (`server.app.reloaded_app`: its routes, keys, CORS,
metrics, breakers, providers and dispatcher), sharing the process's upstream session and memory
store, and the front door hands it every request that arrives from then on. Requests under way
finish on the application they started on; once its last one has ended, what it alone owned
(breakers, the session for clients' own targets) is closed.

What a running process cannot change (RESTART_ONLY: the address it listens on, the memory store,
the metrics mode, ...) keeps its value, and each such setting the file changed is logged as
taking effect at the next restart.

Under `--workers` the parent checks the file and a worker reloads the parent's copy of the text
it accepted (gateway.cli.workers.AcceptedConfig), never the file itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import random
import signal
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from aiohttp import web

from gateway.config.loader import ConfigError, load_config
from gateway.core.routing import Random
from gateway.core.settings import Config
from gateway.server.app import commit_reload, reloaded_app
from gateway.server.frontdoor import FRONT_DOOR
from gateway.server.keys import CONFIG, INFLIGHT, LIFECYCLE, UPSTREAMS

log = logging.getLogger("gateway")

# Settings a running process keeps: (the name as the file spells it, the attributes that reach it in a Config).
RESTART_ONLY: Final[Sequence[tuple[str, tuple[str, ...]]]] = (
    ("server.host", ("server", "host")),
    ("server.port", ("server", "port")),
    ("server.backlog", ("server", "backlog")),
    ("server.drainSeconds", ("server", "drain_seconds")),
    ("server.maxBodyBytes", ("server", "max_body_bytes")),  # aiohttp's own limit, set on the listening server
    ("server.maxResponseBytes", ("server", "max_response_bytes")),  # also bounds the memory's replies
    ("server.maxConnections", ("server", "max_connections")),
    ("memory.store", ("memory", "store")),
    ("memory.path", ("memory", "path")),
    ("memory.url", ("memory", "url")),
    ("memory.cluster", ("memory", "cluster")),
    ("memory.sentinel", ("memory", "sentinel")),
    ("memory.waitReplicas", ("memory", "wait_replicas")),
    ("memory.waitTimeoutSeconds", ("memory", "wait_timeout_seconds")),
    ("memory.ttlSeconds", ("memory", "ttl_seconds")),
    ("memory.maxStoredMessages", ("memory", "max_stored_messages")),
    ("memory.lockTimeoutSeconds", ("memory", "lock_timeout_seconds")),
    ("memory.limits.maxTokens", ("memory", "limits", "max_tokens")),  # the memory's token counting cap
    ("metrics.enabled", ("metrics", "enabled")),  # with workers, the shared metrics directory is made at start
)


def _get(config: Config, attributes: Sequence[str]) -> Any:
    value: Any = config
    for name in attributes:
        value = getattr(value, name)
    return value


def _replaced(value: Any, attributes: Sequence[str], new: Any) -> Any:
    """`value` (a frozen dataclass) with the attribute at `attributes` set to `new`."""
    head, *rest = attributes
    inner = new if not rest else _replaced(getattr(value, head), rest, new)
    return dataclasses.replace(value, **{head: inner})


def keep_restart_only(served: Config, loaded: Config) -> tuple[Config, list[str]]:
    """`loaded` with every RESTART_ONLY setting as `served` has it, and the names of those `loaded` changed."""
    kept = loaded
    changed: list[str] = []
    for name, attributes in RESTART_ONLY:
        old = _get(served, attributes)
        if _get(loaded, attributes) != old:
            changed.append(name)
            kept = _replaced(kept, attributes, old)
    return kept, changed


def log_refused(path: str, refused: ConfigError, keeping: str = "still serving the configuration loaded before") -> None:
    """Log each error of the config file at `path` that a reload refused; `keeping` says what goes on meanwhile."""
    log.error("reload of %s failed with %d errors; %s", path, len(refused.errors), keeping)
    for error in refused.errors:
        log.error("reload of %s: %s", path, error)


def load_or_log(path: str) -> Config | None:
    """The configuration in the file at `path`; None, each error logged, when it does not load."""
    try:
        return load_config(path)
    except ConfigError as exc:
        log_refused(path, exc)
        return None


class Reloader:
    """Reloads the served application's config file on SIGHUP (or `reload()`), one reload at a time.

    `app` is the application the server runs (create_app's, with a FrontDoor); every reloaded
    application shares its process-wide resources. `path` is the file read; `shown_as`, the one
    log lines name (a worker reads its parent's copy of the operator's file).
    """

    def __init__(self, app: web.Application, path: str, *, shown_as: str | None = None, rng: Random | None = None) -> None:
        self._app = app
        self._source = path
        self._path = os.path.abspath(shown_as or path)  # as the start-up line names it
        self._rng = rng or random.Random()
        self._serving = app
        self._replaced: list[web.Application] = []  # replaced, with requests maybe still under way
        self._retiring: set[asyncio.Task[None]] = set()
        self._asked: asyncio.Task[None] | None = None
        self._again = False

    @property
    def serving(self) -> web.Application:
        """The application new requests go to."""
        return self._serving

    async def listen(self, app: web.Application) -> AsyncIterator[None]:
        """A cleanup context: reload on SIGHUP while the server runs; on the way out, close what reloads made.

        SIGHUP is unblocked here, once it reloads: `gateway serve` blocks it from its start, so that
        one sent while the process starts waits for this instead of ending the process.
        """
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, self.request)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGHUP)
            await self.close()

    def request(self) -> asyncio.Task[None] | None:
        """Reload now, or after the reload under way: signals that come meanwhile make one reload more.

        Returns the task that reloads (None while the gateway stops).
        """
        if self._app[LIFECYCLE].draining:  # stopping: nothing new will be served
            log.info("reload of %s not done: the gateway is stopping", self._path)
            return None
        if self._asked is not None and not self._asked.done():
            self._again = True
            return self._asked
        self._asked = asyncio.create_task(self._reload_while_asked())
        return self._asked

    async def _reload_while_asked(self) -> None:
        self._again = True
        while self._again:
            self._again = False
            try:
                await self.reload()
            except Exception as exc:  # a task's error would otherwise be seen by no one
                log.error("reload of %s failed (%s); still serving the configuration loaded before", self._path, type(exc).__name__)

    async def reload(self) -> bool:
        """Serve the config file as it is now; False (and the errors logged) when it cannot be."""
        door = self._app.get(FRONT_DOOR)
        if door is None:  # an aiohttp whose internals the door does not know: it serves one application
            log.error("reload of %s is not possible with this aiohttp version; restart the gateway to apply it", self._path)
            return False
        loaded = await asyncio.to_thread(load_or_log, self._source)  # YAML of any size: off the loop
        if loaded is None:
            return False
        config, kept = keep_restart_only(self._serving[CONFIG], loaded)
        try:
            app = await reloaded_app(self._app, config, rng=self._rng)
        except Exception as exc:  # only its type: the text of a client's error may carry a URL with a secret
            log.error(
                "reload of %s failed setting up its upstreams (%s); still serving the configuration loaded before",
                self._path, type(exc).__name__,
            )  # fmt: skip
            return False
        door.serve(app)
        replaced, self._serving = self._serving, app
        commit_reload(app, replaced)
        self._replaced.append(replaced)
        retiring = asyncio.create_task(self._retire(replaced))
        self._retiring.add(retiring)
        retiring.add_done_callback(self._retiring.discard)
        for name in kept:
            log.warning("reload of %s: %s changed; it takes effect at the next restart", self._path, name)
        log.info("gateway %d reloaded %s: %d routes", os.getpid(), self._path, len(config.routes))
        return True

    async def _retire(self, app: web.Application) -> None:
        """Close what `app` alone owns once its last request has ended."""
        await app[INFLIGHT].drained()
        self._replaced.remove(app)
        try:
            await app[UPSTREAMS].aclose()
        except Exception as exc:  # a shared store gone, say: nothing is left to serve with them anyway
            log.warning("closing the upstreams of the configuration replaced failed (%s)", type(exc).__name__)

    async def retired(self) -> None:
        """Return once every configuration replaced so far has drained and been closed."""
        await asyncio.gather(*self._retiring)

    async def close(self) -> None:
        """Stop reloading and close what every application made by a reload owns (the server has drained)."""
        pending = [*self._retiring, *([self._asked] if self._asked is not None else [])]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for app in [*self._replaced, self._serving]:
            if app is not self._app:  # the first application's are closed by its own cleanup context
                await app[UPSTREAMS].aclose()
        self._replaced.clear()
