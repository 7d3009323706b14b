"""How secrets are shown: values from the environment as their `${VAR}`, URL passwords as ***."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final
from urllib.parse import unquote


def show_references(text: str, refs: Mapping[str, str]) -> str:
    """`text` with every value from the environment (`refs`, longest first) shown as its `${VAR}` reference."""
    for value, reference in refs.items():
        text = text.replace(value, reference)
    return text


_USERINFO: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")


def mask_userinfo(url: str) -> str:
    """`url` with its userinfo (user:password@) shown as `***@`."""
    return _USERINFO.sub(r"\1***@", url)


def mask_password(text: str, url: str) -> str:
    """`text` with the password of `url`'s userinfo (as written and percent-decoded) shown as ***."""
    authority = url.partition("://")[2]
    authority = re.split(r"[/?#]", authority, maxsplit=1)[0]
    password = authority.rpartition("@")[0].partition(":")[2]
    for form in sorted({password, unquote(password)} - {""}, key=len, reverse=True):
        text = text.replace(form, "***")
    return text
