"""A request's model route: what its `model` names, looked up before anything goes upstream.

Without `models:` there is nothing to look up (None: the agent's own upstream, the id cosmetic).
With routes, an id no route has is OpenAI's 404 `model_not_found`; the request's `RouteTurn` gives
the reply's `model` and (through `access_log.MODEL_ROUTE`) the access line its route.
"""

from __future__ import annotations

from aiohttp import web

from gateway.errors import NotFoundError, echo
from gateway.http import appkeys
from gateway.http.access_log import MODEL_ROUTE
from gateway.upstream.routes import RouteTurn


def model_not_found(model: str | None) -> NotFoundError:
    return NotFoundError(f"The model `{echo(model)}` does not exist or you do not have access to it.",
                         code="model_not_found")


async def route_turn(request: web.Request, model: str | None) -> RouteTurn:
    """The turn on the route `model` names (routes are configured), or the 404."""
    routes = request.app[appkeys.ROUTES]
    route = routes.resolve(model) or await routes.find(model)
    if route is None:
        raise model_not_found(model)
    turn = RouteTurn(route, routes)
    MODEL_ROUTE.set(turn)  # for the access line
    return turn
