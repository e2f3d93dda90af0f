"""GET /v1/web/status: the web tools' cool-downs and result cache of this gateway process.

Behind the same bearer key as the API (it names the providers in use and why they fail).
`agent-gateway tools` reads it from a running gateway; the metrics route may read the same
`WebState.status()`.
"""

from __future__ import annotations

from aiohttp import web

from gateway.http import appkeys

routes = web.RouteTableDef()


@routes.get("/v1/web/status")
async def web_status(request: web.Request) -> web.Response:
    return web.json_response(request.app[appkeys.WEB_STATE].status())
