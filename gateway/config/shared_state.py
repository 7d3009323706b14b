"""The config's sections about state the gateway's processes share: breakers, and a Sentinel-watched Redis."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator
from pydantic_core import InitErrorDetails, ValidationError

from gateway.config.fields import AsEntry, Chosen, Count, Flag, ListOf, PositiveSeconds, Setting, Text, holds
from gateway.config.redis_urls import node_problem
from gateway.config.section import Section, refusal
from gateway.core.settings import BreakersConfig

BreakerStore = Literal["local", "redis"]
_BREAKERS = BreakersConfig()


SentinelNode = Annotated[str, AsEntry(), holds(node_problem)]


class Sentinel(Section):
    """A Redis primary found through Redis Sentinel, in place of a url."""

    model_config = ConfigDict(json_schema_extra={"required": ["masterName", "nodes"]})

    master_name: Text | None = Field(default=None, description="The name the sentinels know the primary by.")
    nodes: Annotated[tuple[SentinelNode, ...], ListOf("host:port strings", non_empty=True)] | None = Field(
        default=None, description="The sentinels to ask, host:port each."
    )
    password: Setting | None = Field(
        default=None, description="The password of the primary and its replicas; write it as ${VAR}."
    )
    sentinel_password: Setting | None = Field(
        default=None, description="The sentinels' own password; write it as ${VAR}."
    )
    db: Count = Field(default=0, description="The database number.")

    @model_validator(mode="after")
    def _whole(self) -> Sentinel:
        problems: list[InitErrorDetails] = [
            {"type": refusal("is required"), "loc": (key,), "input": None}
            for key, value in (("masterName", self.master_name), ("nodes", self.nodes))
            if value is None
        ]
        if problems:
            raise ValidationError.from_exception_data(type(self).__name__, problems)
        return self


class Breakers(Section):
    """Where circuit-breaker state lives."""

    store: Annotated[BreakerStore, Chosen()] | None = Field(
        default=None,
        description="local (per process) or redis (shared); default: redis when memory.store is redis.",
    )
    url: Setting | None = Field(
        default=None,
        description="The Redis URL of a redis store; default: memory's connection (url, cluster, sentinel).",
    )
    cluster: Flag = Field(default=False, description="url is any node of a Redis Cluster.")
    sentinel: Sentinel | None = Field(default=None, description="The primary Redis Sentinel names, instead of url.")
    timeout_seconds: PositiveSeconds = Field(
        default=_BREAKERS.timeout_seconds,
        description="How long a call waits on the breakers' Redis before deciding on this process's view alone.",
    )
