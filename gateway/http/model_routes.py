"""A request's model route: what its `model` names, looked up before anything goes upstream.

Without `models:` there is nothing to look up (None: the agent's own upstream, the id cosmetic).
With routes, an id no route has is OpenAI's 404 `model_not_found`; the request's `RouteTurn` gives
the reply's `model` and (through `access_log.MODEL_ROUTE`) the access line its route.
"""

from __future__ import annotations

from aiohttp import web

from gateway.errors import NotFoundError, echo
from gateway.http import appkeys
from gateway.observe.access_log import MODEL_ROUTE
from gateway.upstream.context_window import DEFAULT_CONTEXT_WINDOW
from gateway.upstream.routes import RouteTurn


def model_not_found(model: str | None) -> NotFoundError:
    return NotFoundError(f"The model `{echo(model)}` does not exist or you do not have access to it.",
                         code="model_not_found")


def _app(of: web.Request | web.Application) -> web.Application:
    """The app of a request, or the app itself (a queued background response starts with no request)."""
    return of if isinstance(of, web.Application) else of.app


async def route_turn(request: web.Request | web.Application, model: str | None) -> RouteTurn:
    """The turn on the route `model` names (routes are configured), or the 404."""
    routes = _app(request)[appkeys.ROUTES]
    route = routes.resolve(model) or await routes.find(model)
    if route is None:
        raise model_not_found(model)
    turn = RouteTurn(route, routes)
    MODEL_ROUTE.set(turn)  # for the access line
    return turn


async def context_window(request: web.Request | web.Application, turn: RouteTurn | None) -> int:
    """The turn's budget in tokens: without routes, what `ContextWindows` says for the upstream's
    model; on a route, its own `context_window` (configured, else what its upstream's `/models`
    listed), else `LLM_CONTEXT_WINDOW`, else the documented default. A route's upstream is not
    asked for more than its listing (its `/props` may be another server's)."""
    app = _app(request)
    if turn is None:
        return await app[appkeys.CONTEXT_WINDOWS].tokens(await app[appkeys.UPSTREAM].model())
    if turn.route.context_window is not None:
        return turn.route.context_window
    return app[appkeys.SETTINGS].llm_context_window or DEFAULT_CONTEXT_WINDOW
