from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.errors import NotFoundError, echo
from gateway.http import appkeys

routes = web.RouteTableDef()


def _model_object(request: web.Request) -> dict[str, Any]:
    settings = request.app[appkeys.SETTINGS]
    return {"id": settings.model_name, "object": "model", "created": request.app[appkeys.STARTED_AT],
            "owned_by": "agent-gateway"}


@routes.get("/v1/models")
async def list_models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [_model_object(request)]})


@routes.get("/v1/models/{model_id:.+}")
async def get_model(request: web.Request) -> web.Response:
    model = _model_object(request)
    if request.match_info["model_id"] != model["id"]:
        raise NotFoundError(
            f"The model '{echo(request.match_info['model_id'])}' does not exist; this gateway serves '{model['id']}'.",
            param="model", code="model_not_found",
        )
    return web.json_response(model)
