"""The gateway's own web tool calls as Responses `web_search_call` items. Pure.

In the Responses API a `function_call` item is a call the *client* must run; the gateway's own
tools are hosted tools, so they are reported as OpenAI reports its hosted web search: a
`web_search_call` item per search (`action: {"type": "search", "query", "queries", "sources"?}`,
`sources` only when the request's `include` asks for `web_search_call.action.sources`) and one
per page read (`action: {"type": "open_page", "url"}`: a call reading three URLs gives three
items, as each OpenAI open_page action names one URL). The tool's result text is not shown: the
model's transcript (`Finished.messages`) keeps it for later turns.

Stream events per item: `response.output_item.added` (status `in_progress`),
`response.web_search_call.in_progress`, `.searching` when the call starts; `.completed` and
`response.output_item.done` (status `completed` or `failed`) when it returns. `.completed` comes
for a failed call too: it marks the call's end; the item's status says how it went.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.agent.events import ToolCallFinished, ToolCallStarted
from gateway.agent.sources import EXTRACT_TOOL
from gateway.wire.responses_input import new_id

#: The `include` value that adds the search results' URLs to search actions.
SOURCES = "web_search_call.action.sources"

Event = Callable[..., dict[str, Any]]


def actions(call: ToolCallStarted) -> list[dict[str, Any]]:
    """The item actions one call stands for: one search, or one open_page per URL read."""
    if call.name == EXTRACT_TOOL or call.urls:
        return [{"type": "open_page", "url": url} for url in call.urls] or [{"type": "open_page", "url": None}]
    return [{"type": "search", "query": call.queries[0] if call.queries else "", "queries": list(call.queries)}]


class WebSearchCalls:
    """The `web_search_call` items of one response, kept in the builder's `output` list and
    announced through its `event` maker (so sequence numbers stay one series)."""

    def __init__(self, output: list[dict[str, Any]], event: Event, snapshot: Callable[[Any], Any], *,
                 sources: bool) -> None:
        self._output, self._event, self._snapshot = output, event, snapshot
        self._sources = sources
        self._open: dict[str, list[int]] = {}  # call id -> output indices of its items
        # item id -> its search's sources, found whether or not `include` shows them: what a
        # conversation keeps, so that listing its items with `include` can show them later
        self._found: dict[str, list[dict[str, str]]] = {}

    def started(self, call: ToolCallStarted) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        indices = self._open.setdefault(call.call_id, [])
        for action in actions(call):
            item = {"id": new_id("ws"), "type": "web_search_call", "status": "in_progress", "action": action}
            index = len(self._output)
            self._output.append(item)
            indices.append(index)
            events.append(self._event("response.output_item.added", output_index=index, item=self._snapshot(item)))
            events.append(self._event("response.web_search_call.in_progress", item_id=item["id"], output_index=index))
            events.append(self._event("response.web_search_call.searching", item_id=item["id"], output_index=index))
            item["status"] = "searching"
        return events

    def finished(self, result: ToolCallFinished) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for index in self._open.pop(result.call_id, []):
            item = self._output[index]
            item["status"] = "completed" if result.ok else "failed"
            action = item["action"]
            if action["type"] == "search":
                found = [{"type": "url", "url": source.url} for source in result.sources]
                self._found[item["id"]] = found
                if self._sources:
                    action["sources"] = found
            events.append(self._event("response.web_search_call.completed", item_id=item["id"], output_index=index))
            events.append(self._event("response.output_item.done", output_index=index, item=self._snapshot(item)))
        return events

    def with_sources(self, output: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`output` (a copy of the response's) with every search's sources, included or not."""
        for item in output:
            found = self._found.get(item.get("id", ""))
            if found is not None and item["type"] == "web_search_call":
                item["action"]["sources"] = [dict(source) for source in found]
        return output

    def cut_short(self) -> None:
        """The response ends with calls still running (the client went away, the run failed):
        their items are `incomplete` in the final response."""
        for indices in self._open.values():
            for index in indices:
                self._output[index]["status"] = "incomplete"
        self._open.clear()
