"""GET /openapi.json: the OpenAPI 3.1 document shipped in the package, served as is (no auth)."""

from __future__ import annotations

from importlib import resources

from aiohttp import web

routes = web.RouteTableDef()


def openapi_document() -> bytes:
    """The document's bytes, read from the installed package (no import-time loading)."""
    return resources.files("gateway.http").joinpath("openapi.json").read_bytes()


@routes.get("/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=openapi_document(), content_type="application/json")
