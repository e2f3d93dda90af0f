"""Liveness (`/health`: the process answers) and readiness (`/health/ready`: the store answers too,
so a load balancer sends stored requests only to replicas that can serve them)."""

from __future__ import annotations

from aiohttp import web

from gateway.http import appkeys
from gateway.store.api import StoreUnavailableError

routes = web.RouteTableDef()


@routes.get("/health")
@routes.get("/v1/health")
async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


@routes.get("/health/ready")
async def ready(request: web.Request) -> web.Response:
    store = request.app.get(appkeys.STORE)
    if store is None:
        raise StoreUnavailableError("The response store is not open yet.", retry_after=1)
    await store.check()  # StoreUnavailableError: the error middleware renders 503 + Retry-After
    return web.json_response({"status": "ok"})
