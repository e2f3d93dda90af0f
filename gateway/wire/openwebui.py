"""Open WebUI's own status events, for `AGENT_TOOL_PROGRESS=openwebui`. Pure.

Open WebUI's middleware hands a streamed `data:` chunk that has a top-level `event` object to its
event emitter, which drives the status line under the model's name; such a chunk has no `choices`,
so only Open WebUI may get them. The fields are the ones its own web search sends
(backend/open_webui/utils/middleware.py) and its status renderer reads
(src/lib/components/chat/Messages/ResponseMessage/StatusHistory/StatusItem.svelte): `action:
"web_search"` with `urls` (or `items`) renders the list of sites, a `description` holding
`{{count}}` is filled with their number, `done: false` shimmers while the call runs.
"""

from __future__ import annotations

from typing import Any

from gateway.agent.events import ToolCallFinished, ToolCallStarted

SEARCH_TOOL = "web_search"
EXTRACT_TOOL = "web_extract"


def _event(data: dict[str, Any]) -> dict[str, Any]:
    return {"event": {"type": "status", "data": data}}


def _quoted(queries: tuple[str, ...]) -> str:
    return ", ".join(f'"{q}"' for q in queries)


def started(call: ToolCallStarted) -> dict[str, Any]:
    """The status while `call` runs: "Searching the web for ...", "Reading ...", or the tool's name."""
    if call.name == SEARCH_TOOL:
        description = f"Searching the web for {_quoted(call.queries)}" if call.queries else "Searching the web"
        return _event({"action": "web_search", "description": description, "queries": list(call.queries),
                       "done": False})
    if call.name == EXTRACT_TOOL:
        description = f"Reading {call.urls[0]}" + (f" and {len(call.urls) - 1} more" if len(call.urls) > 1 else "")
        return _event({"description": description if call.urls else "Reading a web page", "done": False})
    return _event({"description": f"Running {call.name}", "done": False})


def finished(call: ToolCallStarted | None, result: ToolCallFinished) -> dict[str, Any]:
    """The status once the call returned: the queries and the sites found, the pages read, or the error."""
    queries = list(call.queries) if call is not None else []
    urls = [source.url for source in result.sources]
    if result.name == SEARCH_TOOL:
        if not result.ok or not urls:
            return _event({"action": "web_search", "description": "No search results found", "queries": queries,
                           "done": True, "error": True})
        return _event({
            "action": "web_search", "description": "Searched {{count}} sites", "queries": queries,
            # Open WebUI's site list reads `link` (target and favicon); `url` for other readers
            "urls": urls, "items": [{"title": s.title, "link": s.url, "url": s.url} for s in result.sources],
            "done": True,
        })
    if result.name == EXTRACT_TOOL:
        if not result.ok or not urls:
            return _event({"description": "Could not read the page", "done": True, "error": True})
        description = f"Read {urls[0]}" + (f" and {len(urls) - 1} more" if len(urls) > 1 else "")
        return _event({"description": description, "urls": urls, "done": True})
    return _event({"description": f"Ran {result.name}" if result.ok else f"{result.name} failed",
                   "done": True, **({} if result.ok else {"error": True})})
