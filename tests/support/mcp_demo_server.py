"""A stdio MCP server with one tool, `shout`, for the Codex CLI tests: `python mcp_demo_server.py`.

Newline-delimited JSON-RPC, as MCP's stdio transport is: initialize, tools/list, tools/call.
"""

from __future__ import annotations

import json
import sys

SHOUT = {
    "name": "shout",
    "description": "Repeat the text in capitals.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def answer(message: dict[str, object]) -> object:
    """The result of one request."""
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    match message.get("method"):
        case "initialize":
            version = params.get("protocolVersion", "2025-06-18")
            return {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "demo", "version": "1"}}
        case "tools/list":
            return {"tools": [SHOUT]}
        case "tools/call":
            arguments = params.get("arguments")
            text = arguments.get("text", "") if isinstance(arguments, dict) else ""
            return {"content": [{"type": "text", "text": f"{text}".upper()}]}
        case _:
            return {}


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message:  # a notification wants no answer
            print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}), flush=True)


if __name__ == "__main__":
    main()
