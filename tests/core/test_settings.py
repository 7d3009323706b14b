"""The gateway's settings (gateway.core.settings): what their defaults say and what their repr never shows."""

from __future__ import annotations

import hashlib

from gateway.core.settings import ApiKey, BreakersConfig, Config, CorsConfig


def test_cors_is_on_once_an_origin_is_allowed() -> None:
    assert not CorsConfig().enabled
    assert CorsConfig(allow_origins=("https://app.example",)).enabled


def test_neither_a_redis_url_nor_a_keys_digest_is_shown_in_a_repr() -> None:
    breakers = BreakersConfig(store="redis", url="redis://:hunter2@h:6379/0")
    key = ApiKey("ops", hashlib.sha256(b"gw-key").digest())
    config = Config(routes={}, api_keys=(key,), breakers=breakers)
    shown = repr(config)
    assert "hunter2" not in shown and key.sha256.hex() not in shown and repr(key.sha256) not in shown
    assert "name='ops'" in shown and "store='redis'" in shown
