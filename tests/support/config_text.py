"""Config text as the loader reads it in tests: every error it gives, or the Config it makes."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import pytest

from gateway.config.loader import ConfigError, parse_config
from gateway.core.settings import Config

# A route, for configs about everything else.
MOCK = "routes: {m: {provider: mock}}\n"


def errors_of(text: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Every error of the config `text` (dedented), read with `env` (empty unless given); fails if it loads."""
    with pytest.raises(ConfigError) as caught:
        parse_config(textwrap.dedent(text), env=env or {})
    return list(caught.value.errors)


def loads(text: str, env: Mapping[str, str] | None = None) -> Config:
    """The Config of `text` (dedented), read with `env` (empty unless given)."""
    return parse_config(textwrap.dedent(text), env=env or {})
