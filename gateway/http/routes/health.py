"""Liveness (`/health`: the process answers) and readiness (`/health/ready`: the store answers too,
and the keys in it have been read, so a load balancer sends requests only to replicas that can serve
them: until the keys are read every keyed request is a 503, gateway/keys/ring.py `unread`)."""

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
    ring = request.app.get(appkeys.KEYRING)
    if ring is not None and ring.unread:
        raise StoreUnavailableError("The API keys have not been read from the store yet.", retry_after=1)
    return web.json_response({"status": "ok"})
