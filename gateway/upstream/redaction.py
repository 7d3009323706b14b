"""A target's secrets masked in any text an upstream sends back or an error shows about it."""

from __future__ import annotations

import functools
import re
from typing import Final
from urllib.parse import unquote

from yarl import URL

from gateway.core.tree import Target


@functools.lru_cache(maxsize=1024)
def _secrets(target: Target) -> tuple[str, ...]:
    """A target's configured secrets, each long enough to be one, the longest first.

    Its key, header values and secret providerParams; every value that came from the
    environment; its baseUrl (error texts name the target, never its URL) and the password
    in the baseUrl's userinfo. A value with percent-escapes in it is listed decoded too, as a
    URL's parser shows it.
    """
    values = (target.api_key, *target.headers.values(), *target.param_secrets, *target.env_values, target.base_url)
    # isinstance: a Target built by hand (not loaded) may hold a header that is not text
    given = [v for v in (*values, *_userinfo(target.base_url)) if isinstance(v, str)]
    found = {v for v in (*given, *map(unquote, given)) if len(v) >= 4}
    return tuple(sorted(found, key=len, reverse=True))


def _userinfo(base_url: str) -> tuple[str, ...]:
    """The user and password a URL carries (as written and decoded), if any."""
    try:
        url = URL(base_url)
    except ValueError:  # yarl refuses it: it is masked whole, as the baseUrl
        return ()
    return tuple(v for v in (url.raw_user, url.user, url.raw_password, url.password) if v)


# What no URL encoder escapes (RFC 3986's unreserved characters): matched only as they are.
_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _any_spelling(character: str) -> str:
    """A pattern for `character` as a text may carry it: as it is, or percent-encoded in a URL.

    Encoded, it is its UTF-8 bytes as %XX, hex digits in either case (yarl and aiohttp write
    upper case, some encoders lower); a space may also be a `+` (quote_plus, forms).
    """
    spellings = [re.escape(character)]
    if character not in _UNRESERVED:
        encoded = "".join(f"%{byte:02X}" for byte in character.encode(errors="surrogatepass"))
        spellings.append("".join(f"[{c}{c.lower()}]" if c.isalpha() else c for c in encoded))
    if character == " ":
        spellings.append(r"\+")
    return spellings[0] if len(spellings) == 1 else f"(?:{'|'.join(spellings)})"


@functools.lru_cache(maxsize=1024)
def _masks(target: Target) -> re.Pattern[str] | None:
    """One pattern for every spelling of the target's secrets (see _any_spelling), the longest first; None: none."""
    secrets = _secrets(target)
    if not secrets:
        return None
    return re.compile("|".join("".join(map(_any_spelling, secret)) for secret in secrets))


def redact(text: str, target: Target) -> str:
    """`text` (from an upstream, or about the target) with the target's secrets masked.

    Masked as written and as a URL carries them: a secret in a baseUrl's path or userinfo comes
    back percent-encoded in an upstream's echo of its URL (`/v1/t%C3%A9%5Bx%5D`), or in the text
    of an error about it.
    """
    masks = _masks(target)
    return text if masks is None else masks.sub("***", text)
