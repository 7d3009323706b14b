"""Keys issued and revoked at run time (/v1/gateway/keys, admin keys only), and a key's usage (/v1/gateway/usage).

An admin key (auth.adminKeys) issues a key with its routes and limits: the key is in the answer
once and kept only as its SHA-256 digest, in the limits' store (governance.key_store), where every
process's refresher finds it within a second; revoking it so ends it everywhere. Keys of the
config are listed beside them but changed only in the config, and no issued key takes a
configured name (one issued before the config gained its name no longer works, and may be
deleted). Routes and limits are read by the config's own sections (auth.keys[].routes and
.limits), so the API refuses what check-config refuses, in the same words.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable
from typing import Any, Final, TypeVar

import orjson
from aiohttp import web
from pydantic import ConfigDict, TypeAdapter, ValidationError

from gateway.config.access import unknown_route
from gateway.config.checks import tenant_problem
from gateway.config.governance import RouteNames
from gateway.config.problems import Loc, path_of
from gateway.core.errors import (
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
)
from gateway.core.governance import RateLimits
from gateway.core.settings import ApiKey, Config
from gateway.governance.key_store import KeyStore
from gateway.governance.stored_keys import (
    KeyStoreUnavailable,
    KeyStoreUnavailableError,
    StoredKey,
    digest_of,
    limits_json,
    limits_of,
    new_key,
)
from gateway.server.bodies import read_payload
from gateway.server.keys import CONFIG, GOVERNOR, STORED_KEYS, tenant_of
from gateway.server.parsing import CHECK

T = TypeVar("T")
log = logging.getLogger("gateway.governance")

KEY_STORE: web.AppKey[KeyStore] = web.AppKey("key_store")  # set while the config has admin keys
_CREATED: Final = frozenset({"name", "routes", "limits"})
_CHANGED: Final = frozenset({"routes", "limits"})
# A key's routes as the config reads them (gateway.config.governance.GatewayKey.routes): the API refuses what check-config does.
_ROUTE_NAMES: Final = TypeAdapter(
    RouteNames | None, config=ConfigDict(defer_build=True)
)


def add_routes(router: web.UrlDispatcher) -> None:
    """Add the governance endpoints to `router`."""
    router.add_post("/v1/gateway/keys", create_key)
    router.add_get("/v1/gateway/keys", list_keys)
    router.add_get("/v1/gateway/keys/{name}", get_key)
    router.add_patch("/v1/gateway/keys/{name}", update_key)
    router.add_delete("/v1/gateway/keys/{name}", delete_key)
    router.add_get("/v1/gateway/usage", usage)


async def create_key(request: web.Request) -> web.Response:
    """POST /v1/gateway/keys: a new key named `name`, with its routes and limits; the key is shown this once."""
    store = _admin_store(request)
    _, body = await read_payload(request)
    config = request.app[CONFIG]
    _refuse_unknown(body, _CREATED, "")
    name = CHECK.string(CHECK.required(body, "name", ""), "name")
    problem = tenant_problem(name)
    if problem is not None:
        raise InvalidRequestError(f"'name' {problem}.", param="name", code="invalid_value")
    routes, limits = _routes(body.get("routes"), config), _limits(body.get("limits"))
    if _configured(config, name) is not None:
        raise _exists(name)
    key = new_key()
    stored = StoredKey(name=name, sha256=digest_of(key), routes=routes, limits=limits, created_at=int(time.time()))
    if not await _ask(store.create(stored)):
        raise _exists(name)
    return _json({**_shown(stored), "key": key}, status=201)


async def list_keys(request: web.Request) -> web.Response:
    """GET /v1/gateway/keys: the config's keys and the issued ones, never a key itself."""
    store = _admin_store(request)
    config = request.app[CONFIG]
    configured = [_shown(key) for key in config.api_keys] + [_shown(key, admin=True) for key in config.admin_keys]
    issued = [_shown(key) for key in (await _ask(store.list())).keys]
    return _json({"object": "list", "data": [*configured, *issued]})


async def get_key(request: web.Request) -> web.Response:
    """GET /v1/gateway/keys/{name}: one key, configured or issued."""
    store = _admin_store(request)
    name = request.match_info["name"]
    config = request.app[CONFIG]
    if (configured := _configured(config, name)) is not None:
        key, admin = configured
        return _json(_shown(key, admin=admin))
    return _json(_shown(await _issued(store, name)))


async def update_key(request: web.Request) -> web.Response:
    """PATCH /v1/gateway/keys/{name}: an issued key's routes or limits (a field left out stays; null clears it)."""
    store = _admin_store(request)
    name = request.match_info["name"]
    _, body = await read_payload(request)
    config = request.app[CONFIG]
    _refuse_unknown(body, _CHANGED, "")
    changes: dict[str, Any] = {}
    if "routes" in body:
        changes["routes"] = _routes(body["routes"], config)
    if "limits" in body:
        changes["limits"] = _limits(body["limits"])
    _refuse_configured(config, name)
    changed = dataclasses.replace(await _issued(store, name), **changes)
    if not await _ask(store.update(changed)):  # revoked meanwhile
        raise _not_found(name)
    return _json(_shown(changed))


async def delete_key(request: web.Request) -> web.Response:
    """DELETE /v1/gateway/keys/{name}: revokes an issued key, in every process within a second.

    An issued key whose name the config has since taken is deleted too (it works no longer); the
    configured key stays.
    """
    store = _admin_store(request)
    name = request.match_info["name"]
    if not await _ask(store.delete(name)):
        _refuse_configured(request.app[CONFIG], name)
        raise _not_found(name)
    return _json({"object": "gateway.key.deleted", "name": name, "deleted": True})


async def usage(request: web.Request) -> web.Response:
    """GET /v1/gateway/usage: the caller's limits and what is left of them; for an admin key, every key's."""
    tenant = tenant_of(request)
    config, governor = request.app[CONFIG], request.app[GOVERNOR]
    if not _is_admin(config, tenant):
        return _json(await governor.usage(tenant))
    stored = request.app.get(STORED_KEYS)
    names = [key.name for key in (*config.api_keys, *config.admin_keys)] + sorted(stored.by_name if stored else ())
    data = await asyncio.gather(*(governor.usage(name) for name in dict.fromkeys(names)))
    return _json({"object": "list", "data": data})


def _is_admin(config: Config, tenant: str) -> bool:
    return any(key.name == tenant for key in config.admin_keys)


def _admin_store(request: web.Request) -> KeyStore:
    """The key store, for a caller with an admin key; a 403 for any other."""
    if not _is_admin(request.app[CONFIG], tenant_of(request)):
        raise PermissionDeniedError(
            "Managing gateway keys needs an admin key (auth.adminKeys).", code="admin_key_required"
        )
    store = request.app.get(KEY_STORE)
    if store is None:  # app.config_app opens one for every config with admin keys: not expected
        raise KeyStoreUnavailableError("The gateway has no key store.")
    return store


async def _ask(call: Awaitable[T]) -> T:
    """What the store answers to `call`; a 503 when it fails (logged: why is no business of the client's)."""
    try:
        return await call
    except KeyStoreUnavailable as exc:
        log.error("keys API: %s", exc)
        raise KeyStoreUnavailableError("The key store is unavailable; try again shortly.") from exc


async def _issued(store: KeyStore, name: str) -> StoredKey:
    key = await _ask(store.get(name))
    if key is None:
        raise _not_found(name)
    return key


def _configured(config: Config, name: str) -> tuple[ApiKey, bool] | None:
    """The configured key named `name` and whether it is an admin key; None when the config has none."""
    for key in config.api_keys:
        if key.name == name:
            return key, False
    for key in config.admin_keys:
        if key.name == name:
            return key, True
    return None


def _refuse_configured(config: Config, name: str) -> None:
    if _configured(config, name) is not None:
        raise ConflictError(
            f"Key '{name}' is in the config: change it there (and reload).", param="name", code="key_in_config"
        )


def _exists(name: str) -> ConflictError:
    return ConflictError(f"A key named '{name}' exists already.", param="name", code="key_exists")


def _not_found(name: str) -> NotFoundError:
    return NotFoundError(f"No key named '{name}'.", param="name", code="key_not_found")


def _refuse_unknown(body: dict[str, Any], known: frozenset[str], path: str) -> None:
    for field in body:
        if field not in known:
            where = f"{path}.{field}" if path else field
            raise InvalidRequestError(f"Unknown parameter: '{where}'.", param=where, code="unknown_parameter")


def _routes(value: Any, config: Config) -> frozenset[str] | None:
    """The routes a key may use (null: every one): a non-empty list of routes of the config."""
    try:
        names = _ROUTE_NAMES.validate_python(value)
    except ValidationError as exc:
        raise _refused(exc, ("routes",)) from None
    if names is None:
        return None
    for index, name in enumerate(names):
        if name not in config.routes:
            path = path_of(("routes", index))
            raise InvalidRequestError(
                f"{path}: {unknown_route(name, list(config.routes))}", param=path, code="invalid_value"
            )
    return frozenset(names)


def _limits(value: Any) -> RateLimits | None:
    """A key's limits as the config writes them (null: the configured defaults)."""
    if value is None:
        return None
    try:
        return limits_of(value)
    except ValidationError as exc:
        raise _refused(exc, ("limits",)) from None


def _refused(refusal: ValidationError, at: Loc) -> InvalidRequestError:
    """The first problem the config found in the body's field `at`, worded as check-config words it."""
    error = refusal.errors()[0]
    path = path_of((*at, *error["loc"]))
    if error["type"] == "missing":
        return InvalidRequestError(f"{path}: is required", param=path, code="missing_required_parameter")
    if error["type"] != "config":
        return InvalidRequestError(f"{path}: {error['msg']}", param=path, code="invalid_value")
    code = "unknown_parameter" if error["ctx"]["stray"] else "invalid_value"
    return InvalidRequestError(f"{path}: {error['ctx']['message']}", param=path, code=code)


def _shown(key: StoredKey | ApiKey, *, admin: bool = False) -> dict[str, Any]:
    """A key as the API shows it: never the key, nor its digest."""
    issued = isinstance(key, StoredKey)
    return {
        "object": "gateway.key",
        "name": key.name,
        "source": "api" if issued else "config",
        "admin": admin,
        "routes": None if key.routes is None else sorted(key.routes),
        "limits": None if key.limits is None else limits_json(key.limits),
        "created_at": key.created_at if isinstance(key, StoredKey) else None,
    }


def _json(body: Any, *, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")
