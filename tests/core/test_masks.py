"""How secrets are shown (gateway.core.masks): values from the environment as their `${VAR}`, URL passwords as ***."""

from __future__ import annotations

import pytest

from gateway.core.masks import mask_password, mask_userinfo, show_references


def test_each_value_from_the_environment_is_shown_as_its_reference_in_the_order_given() -> None:
    refs = {"tok-123456": "${LONG}", "tok": "${SHORT}"}  # longest first, as the loader orders them
    assert show_references("a tok-123456 and a tok", refs) == "a ${LONG} and a ${SHORT}"
    assert show_references("nothing here", refs) == "nothing here"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pw@h.example/v1", "https://***@h.example/v1"),
        ("redis://:pw@h:6379/0", "redis://***@h:6379/0"),
        ("https://h.example/v1?next=a@b", "https://h.example/v1?next=a@b"),  # an @ past the host is no userinfo
        ("https://h.example/v1", "https://h.example/v1"),
        ("not a url user:pw@h", "not a url user:pw@h"),
    ],
)
def test_userinfo_is_shown_as_stars(url: str, shown: str) -> None:
    assert mask_userinfo(url) == shown


def test_a_password_is_masked_as_written_and_percent_decoded() -> None:
    url = "redis://user:p%40ss@h:6379/0"
    assert mask_password("refused p%40ss and p@ss", url) == "refused *** and ***"
    assert mask_password("no password in redis://h:6379", "redis://h:6379") == "no password in redis://h:6379"
    assert mask_password("user:secret", "redis://user:secret@h/0?x=y") == "user:***"
