from __future__ import annotations

from aiohttp import web

routes = web.RouteTableDef()


@routes.get("/health")
@routes.get("/v1/health")
async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})
