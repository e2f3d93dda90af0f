"""Deep-research model ids: which requests run the research loop, and that loop's bounds for one request.

`<model>-deep-research` names the research loop on a model: the default model's id plus the suffix
(without `models:`, where ids are cosmetic, any id with the suffix), or a route's. AGENT_RESEARCH=off
removes them all, `research: false` on a route its own, and a model without web tools
(API_SERVER_WEB_TOOLS=off, `web_tools: off` on a route) has none unless its route says `research:
true`; a removed id is then an unknown model (with routes) or a cosmetic one (without). A frontend's
housekeeping request (Open WebUI's `### Task:` title and tags, sent to the model the chat uses) never
runs research: it gets a plain answer.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.agent.research.options import ResearchOptions
from gateway.config.routes import RESEARCH_SUFFIX
from gateway.config.settings import Settings
from gateway.http import appkeys
from gateway.http.model_routes import context_window
from gateway.upstream.routes import Route, RouteTable, RouteTurn

#: The report's share of AGENT_RUN_TIMEOUT (at most REPORT_SECONDS): what the searching leaves it.
REPORT_SHARE = 0.25
REPORT_SECONDS = 180.0


def _app(of: web.Request | web.Application) -> web.Application:
    return of if isinstance(of, web.Application) else of.app


async def research_route(table: RouteTable, model: str | None) -> Route | None:
    """The route whose deep-research id `model` is, if it has one (a route of that very name is
    itself, not research)."""
    if not model or not model.endswith(RESEARCH_SUFFIX) or table.resolve(model) is not None:
        return None
    base = model[:-len(RESEARCH_SUFFIX)]
    route = table.resolve(base) if base else None
    if route is None and base and table.discover:
        route = await table.find(base)
    return route if route is not None and route.research else None


async def research_base(of: web.Request | web.Application, model: str | None) -> str | None:
    """The model id a research id stands for, or None when `model` is no research id served here."""
    app = _app(of)
    settings = app[appkeys.SETTINGS]
    if not settings.research or not model or not model.endswith(RESEARCH_SUFFIX):
        return None
    table = app[appkeys.ROUTES]
    if not table.configured:
        return (model[:-len(RESEARCH_SUFFIX)] or settings.model_name) if researches(settings) else None
    route = await research_route(table, model)
    return route.id if route is not None else None


def researches(settings: Settings) -> bool:
    """Whether the default model has a research id: AGENT_RESEARCH, and web tools to research with."""
    return settings.research and settings.web_tools != "off"


def research_card(settings: Settings, created: int) -> dict[str, Any]:
    """The default model's research id as `/v1/models` lists it, without routes."""
    return {"id": settings.model_name + RESEARCH_SUFFIX, "object": "model", "created": created,
            "owned_by": "agent-gateway"}


async def research_options(of: web.Request | web.Application, turn: RouteTurn | None,
                           max_tool_calls: int | None = None, max_output_tokens: int | None = None) -> ResearchOptions:
    """One research turn's bounds: the settings, lowered by the request's own (max_tool_calls), and
    sized to the route's context window."""
    app = _app(of)
    settings = app[appkeys.SETTINGS]
    if turn is not None:
        turn.suffix = RESEARCH_SUFFIX
    report_seconds = min(REPORT_SECONDS, settings.run_timeout * REPORT_SHARE)
    calls = settings.research_max_calls if max_tool_calls is None else min(max_tool_calls, settings.research_max_calls)
    return ResearchOptions(
        concurrency=settings.research_concurrency, max_calls=calls,
        timeout=max(0.0, min(settings.research_timeout, settings.run_timeout - report_seconds)),
        report_timeout=report_seconds, max_tokens=settings.research_max_tokens,
        max_rounds=settings.research_max_rounds, context_window=await context_window(app, turn),
        max_output_tokens=max_output_tokens)
