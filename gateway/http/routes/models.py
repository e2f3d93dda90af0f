"""GET /v1/models and /v1/models/{id}: the one model id (no `models:`), or every model route."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.errors import NotFoundError, echo
from gateway.http import access, appkeys
from gateway.http.model_routes import model_not_found
from gateway.http.research import RESEARCH_SUFFIX, research_card, research_route, researches

routes = web.RouteTableDef()


def _model_object(request: web.Request) -> dict[str, Any]:
    settings = request.app[appkeys.SETTINGS]
    return {"id": settings.model_name, "object": "model", "created": request.app[appkeys.STARTED_AT],
            "owned_by": "agent-gateway"}


@routes.get("/v1/models")
async def list_models(request: web.Request) -> web.Response:
    table = request.app[appkeys.ROUTES]
    if table.configured:
        data = await table.listing_now(request.app[appkeys.STARTED_AT])
        return web.json_response({"object": "list", "data": access.visible_models(data)})
    data = [_model_object(request)]
    settings = request.app[appkeys.SETTINGS]
    if researches(settings):
        data.append(research_card(settings, request.app[appkeys.STARTED_AT]))
    return web.json_response({"object": "list", "data": access.visible_models(data)})


@routes.get("/v1/models/{model_id:.+}")
async def get_model(request: web.Request) -> web.Response:
    model_id = request.match_info["model_id"]
    table = request.app[appkeys.ROUTES]
    if table.configured:
        route = table.resolve(model_id) or await table.find(model_id)
        if route is not None:
            access.check_model(route.id, model_id)
            return web.json_response(route.card(request.app[appkeys.STARTED_AT]))
        research = await research_route(table, model_id) if request.app[appkeys.SETTINGS].research else None
        if research is None:
            raise model_not_found(model_id)
        access.check_model(research.id, model_id, research=True)
        return web.json_response(research.card(request.app[appkeys.STARTED_AT], research=True))
    settings = request.app[appkeys.SETTINGS]
    if researches(settings) and model_id == settings.model_name + RESEARCH_SUFFIX:
        access.check_model(settings.model_name, model_id, research=True)
        return web.json_response(research_card(settings, request.app[appkeys.STARTED_AT]))
    model = _model_object(request)
    access.check_model(model["id"], model_id)
    if model_id != model["id"]:
        raise NotFoundError(
            f"The model '{echo(model_id)}' does not exist; this gateway serves '{model['id']}'.",
            param="model", code="model_not_found",
        )
    return web.json_response(model)
