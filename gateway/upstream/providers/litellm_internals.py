"""litellm's private and undocumented names the gateway relies on: here and nowhere else, each beside its public fallback.

Each is needed for something litellm's public API cannot do:

- `_skip_mcp_handler`, a keyword argument of `litellm.acompletion`, turns off litellm's MCP
  bridge, which would otherwise take a client's `{"type": "mcp", "server_url": ...}` tools to
  make MCP calls itself, from the gateway's host (and needs the `mcp` package to even look). With
  it, tools go to the provider as they are. Fallback: the chat call goes without the client's
  `mcp` tools, so Anthropic's MCP connector is out of reach through chat completions.
- `_async_input_callback`, `_async_success_callback` and `_async_failure_callback` are litellm's
  lists of async callbacks, filled from the public lists (`litellm.callbacks`, `success_callback`,
  ...) at each call and by its callback manager. They are emptied with the public ones, so that no
  callback registered earlier in the process sees a request. Fallback: only the public lists are
  emptied; a callback that already made it into a private one stays there (in a gateway's own
  process none has: litellm was imported a moment before).

- `_get_service_logger` of `litellm.litellm_core_utils.logging_utils` makes (once) the service
  logger litellm times each upstream request with, and `_get_local_model_cost_map` of
  `litellm.llms.bedrock.common_utils` reads (once) bedrock's copy of the bundled cost map: the
  first call to any provider, and to bedrock, makes them otherwise, in its attempt. Called while
  litellm warms up (`litellm.warm_up`). Fallback: the first call makes them (~7 ms and the 3
  modules of LEFT_TO_FIRST_CALL; ~25 ms of JSON).

Three more are attributes of litellm's stream wrappers, without an underscore but no part of
its documented API:

- `received_finish_reason` and `intermittent_finish_reason`, the finish reasons litellm's stream
  wrapper (CustomStreamWrapper) records as the provider sends them. At the end of a provider's
  stream litellm adds a chunk with a finish reason ("stop") whether or not the provider sent one;
  these tell a finished answer from one the provider broke off cleanly, which then ends with a
  stream error instead of `[DONE]`. Fallback: litellm's finish chunk is taken at its word, so a
  stream that ends cleanly before the provider finished ends with `[DONE]` like a whole answer
  (one cut off by a broken connection is still an error: litellm raises it). litellm's own
  OpenAI chat streams raise on such an end by themselves, either way.
- `completion_stream`, what litellm's text-completion stream wrapper reads from (its chat
  stream, or an async generator over it): that wrapper has no `aclose`, so closing a
  text-completion stream (the client left, or a failure before its first chunk) closes what it
  reads from, and nothing more is read. Fallback: a text-completion stream is left as it is, to
  be closed when it is garbage-collected. Chat streams are closed by their public `aclose`
  either way.

The provider headers in a response's hidden params need no private name: litellm's public
`hidden_params` property returns that same dict.

All of them are used only on a litellm release they were read against (VERIFIED), and unless
the environment says GATEWAY_LITELLM_INTERNALS=off (read once, at import;
gateway.core.internals decides, as for aiohttp's private names); the callback lists and the
finish records, only when litellm still has them. The release comes from the installed
distribution's metadata, without importing litellm: `litellm_calls` reads this module and is not to pay for it.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final

from gateway.core.internals import Internals, announce, choose

SWITCH: Final = "GATEWAY_LITELLM_INTERNALS"  # "off": litellm's public API only
# The releases whose source the private names were read against. A release joins once its source
# was read for each name below and tests/upstream/providers/test_litellm_internals.py passes on it;
# 1.82.7 and 1.82.8 were compromised releases and never join.
VERIFIED: Final = frozenset({"1.110.2"})

SKIP_MCP_BRIDGE: Final = "_skip_mcp_handler"
INNER_STREAM: Final = "completion_stream"
FINISH_RECORDS: Final = ("received_finish_reason", "intermittent_finish_reason")
PUBLIC_CALLBACK_LISTS: Final = (
    "callbacks", "input_callback", "success_callback", "failure_callback", "service_callback", "audit_log_callbacks",
)  # fmt: skip
# What a first call still imports after a warm-up without the private names: the service logger's.
LEFT_TO_FIRST_CALL: Final = (
    "litellm._service_logger", "litellm.integrations.prometheus_services", "litellm.types.integrations.prometheus",
)  # fmt: skip
PRIVATE_CALLBACK_LISTS: Final = ("_async_input_callback", "_async_success_callback", "_async_failure_callback")


def installed_version() -> str | None:
    """The installed litellm's release, read from its metadata (None: not installed)."""
    try:
        return importlib.metadata.version("litellm")
    except importlib.metadata.PackageNotFoundError:
        return None


def internals_for(version: str | None, setting: str | None) -> Internals:
    """Whether litellm's private names are used with litellm `version` (None: not installed) and the switch at `setting`."""
    return choose(library="litellm", release=version, switch=SWITCH, verified=version in VERIFIED, setting=setting)


INTERNALS: Final = internals_for(installed_version(), os.environ.get(SWITCH))
MODE: Final = INTERNALS.mode
PRIVATE: Final = INTERNALS.private


def announce_mode() -> None:
    """Log, once per process, that the fallbacks are in use because of litellm's release."""
    read_on = ", ".join(sorted(VERIFIED))
    announce(
        INTERNALS,
        f"its private names were read on {read_on} only; chat calls go without the client's mcp tools, "
        "and a stream that ends is taken as finished",
    )


def keep_from_mcp_bridge(arguments: dict[str, Any], *, private: bool = PRIVATE) -> None:
    """Keep litellm's MCP bridge out of a chat call's `arguments`: by its switch, or without the tools it acts on."""
    if private:
        arguments[SKIP_MCP_BRIDGE] = True
        return
    tools = arguments.get("tools")
    if isinstance(tools, list):
        kept = [tool for tool in tools if not (isinstance(tool, dict) and tool.get("type") == "mcp")]
        if kept:
            arguments["tools"] = kept
        else:  # providers refuse an empty list of tools
            del arguments["tools"]


def empty_callback_lists(litellm: ModuleType, *, private: bool = PRIVATE) -> None:
    """Empty every list of callbacks of the `litellm` module: the private ones too when `private` and still there."""
    names: tuple[str, ...] = PUBLIC_CALLBACK_LISTS
    if private and all(isinstance(getattr(litellm, name, None), list) for name in PRIVATE_CALLBACK_LISTS):
        names += PRIVATE_CALLBACK_LISTS
    for name in names:
        setattr(litellm, name, [])


def make_first_call_state(provider: str, *, private: bool = PRIVATE) -> None:
    """Make now, if `private`, what litellm keeps from its first call (to `provider`) in private caches.

    Called while litellm warms up, litellm imported.
    """
    if not private:
        return
    # Lazy for start-up cost: this module is read without importing litellm (see litellm_calls).
    from litellm.litellm_core_utils import logging_utils

    make_service_logger: Callable[[], object] = logging_utils._get_service_logger  # untyped in litellm
    make_service_logger()
    if provider == "bedrock":
        from litellm.llms.bedrock import common_utils

        common_utils._get_local_model_cost_map()


def provider_finished(stream: Any, *, private: bool = PRIVATE) -> bool:
    """Whether the provider itself sent the finish reason that a chunk of litellm's `stream` carries.

    Read from the finish reasons litellm's wrapper recorded (a text-completion stream's, from the
    chat stream inside it); without them (`private` off, or a stream without that record), the
    chunk's finish reason is all there is to go by.
    """
    if not private:
        return True
    for candidate in (stream, getattr(stream, INNER_STREAM, None)):
        if hasattr(candidate, FINISH_RECORDS[0]):
            return any(getattr(candidate, name, None) for name in FINISH_RECORDS)
    return True


async def close_stream(stream: Any, *, private: bool = PRIVATE) -> None:
    """Close a litellm stream by its `aclose`; when it has none (text completions), what it reads from, if `private`."""
    candidates = (stream, getattr(stream, INNER_STREAM, None)) if private else (stream,)
    for candidate in candidates:
        closer = getattr(candidate, "aclose", None)
        if closer is not None:
            await closer()
            return
