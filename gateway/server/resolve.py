"""Which route a request takes: the one its model names, or the config's default route."""

from __future__ import annotations

from aiohttp import web

from gateway.config import Route
from gateway.errors import NotFoundError
from gateway.server.keys import CONFIG


def route_for(request: web.Request, model: str) -> Route:
    """The route `request` takes for `model`; a NotFoundError (404) when there is none."""
    config = request.app[CONFIG]
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
