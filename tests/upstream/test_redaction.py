"""redact masks a secret in every form a URL gives it, not only as written.

A secret in a baseUrl's path or userinfo reaches the upstream percent-encoded (as yarl and
aiohttp send it), and comes back that way in an upstream's echo of its URL or in an error
about it; other code and other upstreams encode with urllib.parse.quote or quote_plus, in
either hex case. Each token below has characters some encoder escapes (reserved ones,
non-ASCII, spaces, `%`), and each spelling of it, inside a text, is masked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote, quote_plus, unquote

import pytest
from yarl import URL

from gateway.config.loader import parse_config
from gateway.core.tree import Target
from gateway.upstream.redaction import redact

TOKENS = [
    "pathSECRETdé[x]",  # the review's: non-ASCII and brackets
    "tok SECRET x",  # spaces: %20 or +
    "a+SECRET&b=c;d",  # sub-delimiters a path keeps and quote escapes
    "at@SECRET:c",  # what userinfo escapes
    "50%SECRET",  # a percent sign that is no escape
    "x%41SECRETy",  # one that is: yarl sends it as the letter
    "日本SECRET語",  # no ASCII around the marker
    'q"SECRET<>\\`{|}^',  # what a path always escapes
    "sl/SECRET/ash?#",
]

Spelling = Callable[[str], str]


def in_a_path(token: str) -> str:
    return URL("http://h").with_path(f"/v1/{token}/chat/completions").raw_path


def as_user(token: str) -> str:
    return URL.build(scheme="http", user=token, host="h").raw_user or ""


def as_password(token: str) -> str:
    return URL.build(scheme="http", user="u", password=token, host="h").raw_password or ""


def lower_hex(token: str) -> str:
    return re.sub("%[0-9A-F]{2}", lambda escape: escape[0].lower(), quote(token, safe=""))


SPELLINGS: dict[str, Spelling] = {
    "as-written": str,
    "yarl-path": in_a_path,
    "yarl-user": as_user,
    "yarl-password": as_password,
    "quote": quote,
    "quote-nothing-safe": lambda token: quote(token, safe=""),
    "quote_plus": quote_plus,
    "lower-hex": lower_hex,
    "decoded": unquote,
}


def loaded_with(token: str) -> Target:
    """A target whose baseUrl path holds `token` from the environment, as the loader records it."""
    config = parse_config('routes:\n  chat: {provider: openai, baseUrl: "http://127.0.0.1:9/v1/${T}", apiKey: key-0}\n',
                          {"T": token})  # fmt: skip
    return config.routes["chat"].first_target


def with_userinfo(token: str) -> Target:
    """A target built by hand (the loader refuses credentials in a baseUrl): the token is its user and password."""
    base = str(URL.build(scheme="http", user=token, password=token, host="127.0.0.1", port=9, path="/v1"))
    return Target(name="t", provider="openai", base_url=base, api_key="key-0")


@pytest.mark.parametrize("spell", list(SPELLINGS.values()), ids=list(SPELLINGS))
@pytest.mark.parametrize("token", TOKENS)
def test_every_spelling_of_an_environment_value_is_masked(token: str, spell: Spelling) -> None:
    targets = [with_userinfo(token)]
    if " " not in token and "?" not in token:  # what the loader takes in a path (spaces and queries it refuses)
        targets.append(loaded_with(token))
    text = f"Invalid URL (POST {spell(token)}): not found"
    for target in targets:
        masked = redact(text, target)
        assert "SECRET" not in masked, (target, masked)
        assert masked.startswith("Invalid URL (POST ") and masked.endswith("): not found"), masked


def test_text_without_a_secret_is_left_as_it_is() -> None:
    target = loaded_with("pathSECRETdé[x]")
    text = "pathSECRET d%C3%A9 [x] path%20SECRET 100% done: a+b"
    assert redact(text, target) == text


def test_the_key_and_the_base_url_are_masked_encoded_too() -> None:
    target = Target(name="t", provider="openai", base_url="http://127.0.0.1:9/v1/é", api_key="sk-key/with+slash")
    text = f"key {quote('sk-key/with+slash', safe='')} at {URL('http://127.0.0.1:9/v1/é/chat')}"
    assert redact(text, target) == "key *** at ***/chat"
