"""A Redis store's connection as the file gives it (url, cluster, sentinel), checked as a whole."""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from gateway.config.governance import RateLimiting
from gateway.config.problems import Problems
from gateway.config.redis_urls import node_address, redis_url_problems
from gateway.config.schema import Memory
from gateway.config.shared_state import Breakers, Sentinel
from gateway.core.stores import SentinelSettings

# what a section that may share memory's Redis does without a url of its own
_SHARING: Final = {"breakers": "breakers connect as memory does", "limits": "limits are counted in memory's Redis"}


def check_redis(section: Memory | Breakers | RateLimiting, *, at: str, problems: Problems) -> SentinelSettings | None:
    """Add what is wrong with `section`'s Redis connection to `problems`; its Sentinel settings, if any.

    A url is checked against the client; a Cluster has only database 0; Sentinel names the primary
    in place of a url, and no Cluster has one.
    """
    for problem in redis_url_problems(section.url) if section.url else ():
        problems.add((at, "url"), problem)
    if section.cluster and section.url and _database(section.url) not in ("", "0"):
        problems.add(
            (at, "url"), f"a Redis Cluster has only database 0, got /{_database(section.url)}"
        )
    if isinstance(section, Memory) and section.cluster and section.wait_replicas:
        problems.add(
            (at, "waitReplicas"), "must be 0 with cluster: true (a Cluster's WAIT would need each conversation's node)"
        )
    if not isinstance(section, Memory) and section.cluster and not section.url:
        problems.add((at, "cluster"), f"needs {at}.url (without one, {_SHARING[at]})")
    if section.sentinel is None:
        return None
    if section.url:
        problems.add((at, "sentinel"), f"give either {at}.url or {at}.sentinel, not both")
    if section.cluster:
        problems.add((at, "sentinel"), "a Redis Cluster has no Sentinel: give cluster or sentinel, not both")
    return _sentinel(section.sentinel)


def _database(url: str) -> str:
    return urlsplit(url).path.strip("/")


def _sentinel(sentinel: Sentinel) -> SentinelSettings:
    return SentinelSettings(
        master_name=sentinel.master_name or "",
        nodes=tuple(map(node_address, sentinel.nodes or ())),
        password=sentinel.password,
        sentinel_password=sentinel.sentinel_password,
        db=sentinel.db,
    )
