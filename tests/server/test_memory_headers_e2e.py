"""Memory headers as raw bytes on the wire reach the lookups in aiohttp's request headers as sent.

The SDK never repeats a header or sends bytes outside ASCII: these requests are written by hand.
"""

from __future__ import annotations

import pytest

from tests.support.gateway import Gateway
from tests.support.openai_errors import assert_error
from tests.support.raw_http import AUTH, address, exchange, request


@pytest.mark.parametrize(
    ("lines", "memory_id"),
    [
        (b"memoryId: first\r\nmemoryId: second\r\n", "first"),
        (b"MEMORYID: first\r\nmemoryid: second\r\n", "first"),
        (b"memoryId: first\r\nmemoryId: \r\n", "first"),
        (b"x-memory-id: kebab\r\nmemoryId: plain\r\nmemoryId: again\r\n", "plain"),
        (b"memoryId: conv\r\nmaxTokens: 5\r\nmaxTokens: bad\r\nMAXTOKENS: \xc2\xb2\r\n", "conv"),  # the first maxTokens
    ],
    ids=["twice", "twice-odd-case", "then-empty", "kebab-then-plain-twice", "window-twice"],
)
async def test_of_a_repeated_memory_header_the_first_counts(gateway: Gateway, lines: bytes, memory_id: str) -> None:
    status, headers, body = await exchange(await address(gateway), request(AUTH + lines))
    assert status == 200, body
    assert headers["x-memory-id"] == memory_id


@pytest.mark.parametrize(
    ("lines", "param"),
    [
        (b"memoryId: \r\n", "memoryId"),
        (b"memoryId: \r\nmemoryId: second\r\n", "memoryId"),
        (b"memoryId: c\xc3\xb6nv\r\n", "memoryId"),
        (b"x-memory-id: ok\r\nX-MEMORY-MAX-TOKENS: \xd9\xa3\r\n", "x-memory-max-tokens"),
        (b"memoryId: ok\r\nmemoryType: t\xc3\xb6ken_window\r\n", "memoryType"),
        (b"memoryId: ok\r\nmaxChars: \r\nmaxChars: 5\r\n", "maxChars"),
    ],
    ids=["empty-id", "empty-id-first", "non-ascii-id", "non-ascii-window", "non-ascii-type", "empty-window-first"],
)
async def test_an_empty_or_non_ascii_memory_header_is_a_400(gateway: Gateway, lines: bytes, param: str) -> None:
    status, _, body = await exchange(await address(gateway), request(AUTH + lines))
    assert status == 400, body
    assert_error(body, param=param, code="invalid_header")
