"""Open WebUI's own display, for `AGENT_TOOL_PROGRESS=openwebui` (or `auto` and Open WebUI). Pure.

Open WebUI's middleware hands a streamed `data:` chunk that has a top-level `event` object to its
event emitter, which drives the status line under the model's name; such a chunk has no `choices`,
so only Open WebUI may get them. The fields are the ones its own web search sends
(backend/open_webui/utils/middleware.py) and its status renderer reads
(src/lib/components/chat/Messages/ResponseMessage/StatusHistory/StatusItem.svelte): `action:
"web_search"` with `urls` (or `items`) renders the list of sites, a `description` holding
`{{count}}` is filled with their number, `done: false` shimmers while the call runs.

Sources: a chunk `{"event": {"type": "source", "data": {"source", "document", "metadata"}}}` is
what its middleware emits itself for a cited URL, and what its source list
(src/lib/components/chat/Messages/Citations.svelte) reads: one entry per `metadata[i].source` (the
id; the URL here), named `metadata[i].name`, linked to `metadata[i].source_url`, the `document`
text shown when opened. One event per page the turn's tools returned, in the order of their
numbers, so that its inline chip `[n]` opens the n-th source. (A request with its own numbered
documents starts the web's numbers after them: gateway/wire/frontends.py.)

Reasoning: its stream handler opens a "Thinking" block at the first `reasoning_content` and closes
it at the first answer text only, so a turn's rounds and the searches between them would count as
one "Thought for N seconds"; and reasoning after some text is merged into the first block. A
`<think>` tag in the content (DEFAULT_REASONING_TAGS in backend/open_webui/utils/middleware.py)
instead opens a block of its own, closed at `</think>`: each round's reasoning is one block, closed
at the round's first tool call or text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gateway.agent.events import Progress, Source, ToolCallFinished, ToolCallStarted

SEARCH_TOOL = "web_search"
EXTRACT_TOOL = "web_extract"
THINK_OPEN = "<think>\n"
THINK_CLOSE = "\n</think>\n\n"


class Display:
    """What one stream has shown Open WebUI: whether a `<think>` block is open, which sources
    (by number) it has had."""

    __slots__ = ("thinking", "_shown")

    def __init__(self) -> None:
        self.thinking = False
        self._shown: set[int] = set()

    def thinking_text(self, text: str) -> str:
        """The content for a piece of reasoning: a new block opens at the first piece after other things."""
        if self.thinking:
            return text
        self.thinking = True
        return THINK_OPEN + text

    def end_thinking(self) -> str:
        self.thinking = False
        return THINK_CLOSE

    def sources(self, found: Iterable[Source]) -> list[dict[str, Any]]:
        """The source events for the pages not shown yet, by number."""
        events = []
        for source in sorted(found, key=lambda s: s.number):
            if source.number in self._shown:
                continue
            self._shown.add(source.number)
            events.append(source_event(source))
        return events


def source_event(source: Source) -> dict[str, Any]:
    meta = {"source": source.url, "name": source.title, "title": source.title, "source_url": source.url,
            "url": source.url}
    return {"event": {"type": "source", "data": {
        "source": {"id": source.url, "name": source.title, "url": source.url, "type": "web_search"},
        "document": [source.text or source.title], "metadata": [meta]}}}


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
    if call.mcp is not None:  # an MCP server's tool: its own name and the server's label, not the upstream name
        return _event({"description": f"Running {call.mcp[1]} on {call.mcp[0]}", "done": False})
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
    name = f"{call.mcp[1]} on {call.mcp[0]}" if call is not None and call.mcp is not None else result.name
    return _event({"description": f"Ran {name}" if result.ok else f"{name} failed",
                   "done": True, **({} if result.ok else {"error": True})})


def progress(event: Progress) -> dict[str, Any]:
    """A long run's status line ("3 of 5 questions, 14 sources read")."""
    return _event({"description": event.description, "done": event.done})
