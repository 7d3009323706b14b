"""Which route a request takes: the one `x-gateway-config` asks for, the one its model names, or the default."""

from __future__ import annotations

from aiohttp import web

from gateway.core.errors import NotFoundError
from gateway.core.settings import Config
from gateway.core.tree import Route
from gateway.server.inline import HEADER, INLINE_CONFIGS, route_from_header
from gateway.server.keys import CONFIG


def route_for(request: web.Request, model: str, config: Config | None = None) -> Route:
    """The route `request` takes for `model`; a NotFoundError (404) when there is none.

    With an `x-gateway-config` header, the route it names or the tree it carries (a 400 when
    requestConfig is off or the value is refused). `config`: the app's, when the caller holds it
    already (request.app[CONFIG] goes through properties and a Python __getitem__).
    """
    if config is None:
        config = request.app[CONFIG]
    if HEADER in request.headers:
        return route_from_header(request.headers.getall(HEADER), config, configs=request.app.get(INLINE_CONFIGS), model=model)
    route = config.routes.get(model)
    if route is None and config.default_route is not None:
        route = config.routes[config.default_route]
    if route is None:
        raise NotFoundError(
            f"The model '{model}' does not exist on this gateway (routes: {', '.join(config.routes)}).",
            param="model",
            code="model_not_found",
        )
    return route
