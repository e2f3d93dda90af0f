"""A key's access (`keys create/update --models/--mcp/--no-web`): which model routes, configured MCP
servers and web tools the request's key may use. Off (no check, nothing read but the caller) for
every key without such a list.

- Model routes: a route is named by its id, as `/v1/models` lists it; the default route's id is
  `API_SERVER_MODEL_NAME` (without `models:` every model id means the default route, so a key may
  use the gateway only if its list names that id). A route outside the key's list is answered
  exactly as an unknown one (404 `model_not_found`) and is absent from the key's `/v1/models`; a
  route's fallbacks are part of the route.
- MCP servers: the configured servers outside the key's list are not offered to it, and a request's
  `mcp` tool naming one by label (no `server_url`) gets the 400 of an unconfigured label. A request's
  own server (`server_url`) is not a configured server: AGENT_MCP_ALLOWED_HOSTS governs it as for
  any key.
- Web tools: none offered to a key without web (nor run for a replayed call); a request that asks
  for web search itself (a hosted `web_search` tool, `web_search_options`) is a 400, not a silent
  answer without search.
- Deep research (`<route>-deep-research`): allowed with its route, and only to a key with web
  tools (research without search has no sources); otherwise absent and 404 like any other model.

Checked where a turn is prepared, so a queued background run started later is checked as the key
is then (an access narrowed meanwhile fails the run, as a revoked key does).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gateway.agent.turn import AgentRequest
from gateway.config.routes import RESEARCH_SUFFIX
from gateway.errors import InvalidRequestError
from gateway.http.model_routes import model_not_found
from gateway.keys.ring import CURRENT_CALLER


def check_model(route_id: str, asked: str | None, *, research: bool = False) -> None:
    """404 `model_not_found` (for `asked`, what the client sent) when the key may not use the route
    (or, for a research id, may not search the web)."""
    caller = CURRENT_CALLER.get()
    if caller is None:
        return
    if (caller.models is not None and route_id not in caller.models) or (research and not caller.web):
        raise model_not_found(asked or route_id)


def visible_models(cards: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `/v1/models` cards of the routes the key may use."""
    caller = CURRENT_CALLER.get()
    if caller is None or (caller.models is None and caller.web):
        return list(cards)
    allowed, web = caller.models, caller.web
    kept = []
    for card in cards:
        model_id: str = card["id"]
        research = model_id.endswith(RESEARCH_SUFFIX)
        route_id = model_id[:-len(RESEARCH_SUFFIX)] if research else model_id
        if (allowed is None or route_id in allowed or model_id in allowed) and (web or not research):
            kept.append(card)
    return kept


def limit_tools(request: AgentRequest, web_param: str) -> None:
    """The key's tool access on the turn: 400 for web search asked without web, or a configured
    MCP server named outside its list; otherwise the agent offers only what the key may use."""
    caller = CURRENT_CALLER.get()
    if caller is None or (caller.web and caller.mcp is None):
        return
    if not caller.web:
        if request.web is not None:
            raise InvalidRequestError(f"Web search is not enabled for API key '{caller.name}'; remove "
                                      f"'{web_param}' or ask the gateway's admin for web access.", param=web_param)
        request.no_web = True
    if caller.mcp is not None:
        for named in request.mcp:
            if named.url is None and named.label not in caller.mcp:  # as an unconfigured label (mcp/tools.py)
                raise InvalidRequestError(f"no MCP server is configured as {named.label!r}; give a 'server_url'.",
                                          param=f"{named.param}.server_url")
        request.mcp_labels = caller.mcp
