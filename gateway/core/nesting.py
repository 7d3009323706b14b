"""How deep JSON nests: checked before orjson writes again what a client or an upstream sent."""

from __future__ import annotations

from typing import Any, Final

# How deep arrays and objects may nest in a request body. orjson 3.13.0 reads 1,024 levels and
# refuses to write past 254, but writes past its buffer on some structures nested 211-252 deep
# (seen under valgrind from 211, none at 205 or less; the process dies of SIGABRT), and the
# gateway writes a body again for memory, overrideParams and translations. Far below that, far
# above real requests (JSON schemas in tools nest 10-30).
MAX_JSON_DEPTH: Final = 128


def too_deep(raw: bytes | str, parsed: Any) -> bool:
    """Whether the JSON text `raw` (parsed as `parsed`) nests deeper than MAX_JSON_DEPTH.

    Each level opens a bracket: JSON with no more openings than the limit, counted in C over
    its text (inside strings too), cannot nest past it, and only other JSON is walked.
    """
    if len(raw) <= 2 * MAX_JSON_DEPTH:
        return False
    openings = raw.count(b"[") + raw.count(b"{") if isinstance(raw, bytes) else raw.count("[") + raw.count("{")
    if openings <= MAX_JSON_DEPTH:
        return False
    return nests_deeper(parsed, MAX_JSON_DEPTH)


def nests_deeper(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest in `value` more than `limit` levels deep (a scalar is 0).

    Level by level, without recursing, each container visited once; it stops at the level past
    `limit`. Before any orjson.dumps of a value parsed from a client's text.
    """
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below = []
        for item in level:
            for child in item.values() if type(item) is dict else item:
                if type(child) is dict or type(child) is list:
                    below.append(child)
        level = below
    return False
