"""JSON nested as deep as a test needs."""

from __future__ import annotations

import json


def nested(depth: int) -> str:
    """An object holding arrays `depth` levels deep in all, in the standard library's spelling."""
    return json.dumps({"a": json.loads("[" * (depth - 1) + "]" * (depth - 1))})

