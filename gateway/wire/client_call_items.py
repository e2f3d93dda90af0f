"""The client's tool calls as Responses output items. Pure.

A call to a `function` tool is a `function_call` item (`name`, and `namespace` for a tool of a
namespace: the names the client gave, not the upstream's flattened one); a call to a `custom` tool
is a `custom_tool_call` item whose `input` is the freeform text. Events, as OpenAI sends them:
`response.output_item.added` -> `response.function_call_arguments.delta` / `.done` (or
`response.custom_tool_call_input.delta` / `.done`) -> `response.output_item.done`. A call to a
client-run `tool_search` is a `tool_search_call` item (`execution: "client"`, `arguments` the object
the model called it with); OpenAI streams no deltas for it, only the item added and done.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gateway.agent.events import ClientToolCall
from gateway.wire.responses_input import new_id
from gateway.wire.responses_tools import TOOL_SEARCH, ClientTools, custom_input

Event = Callable[..., dict[str, Any]]


class ClientCalls:
    """Adds the client's tool calls to the builder's `output` list, announced through its `event`
    maker (so sequence numbers stay one series)."""

    def __init__(self, output: list[dict[str, Any]], event: Event, snapshot: Callable[[Any], Any],
                 tools: ClientTools) -> None:
        self._output, self._event, self._snapshot = output, event, snapshot
        self._tools = tools

    def add(self, call: ClientToolCall) -> list[dict[str, Any]]:
        tool = self._tools.get(call.name)
        if tool is not None and tool.kind == TOOL_SEARCH:
            return self._search(call)
        if tool is not None and tool.custom:
            item: dict[str, Any] = {"id": new_id("ctc"), "type": "custom_tool_call", "call_id": call.call_id,
                                    "name": tool.name, "input": "", "status": "in_progress"}
            field, text, kind = "input", custom_input(call.arguments), "response.custom_tool_call_input"
        else:
            item = {"id": new_id("fc"), "type": "function_call", "call_id": call.call_id,
                    "name": tool.name if tool is not None else call.name, "arguments": "", "status": "in_progress"}
            field, text, kind = "arguments", call.arguments, "response.function_call_arguments"
        if tool is not None and tool.namespace is not None:
            item["namespace"] = tool.namespace
        index = len(self._output)
        self._output.append(item)
        events = [self._event("response.output_item.added", output_index=index, item=self._snapshot(item))]
        if text:
            events.append(self._event(f"{kind}.delta", item_id=item["id"], output_index=index, delta=text))
        item[field] = text
        item["status"] = "completed"
        events.append(self._event(f"{kind}.done", item_id=item["id"], output_index=index, **{field: text}))
        events.append(self._event("response.output_item.done", output_index=index, item=self._snapshot(item)))
        return events

    def _search(self, call: ClientToolCall) -> list[dict[str, Any]]:
        item: dict[str, Any] = {"id": new_id("tsc"), "type": "tool_search_call", "call_id": call.call_id,
                                "execution": "client", "arguments": search_arguments(call.arguments),
                                "status": "in_progress"}
        index = len(self._output)
        self._output.append(item)
        added = self._event("response.output_item.added", output_index=index, item=self._snapshot(item))
        item["status"] = "completed"
        return [added, self._event("response.output_item.done", output_index=index, item=self._snapshot(item))]


def search_arguments(arguments: str) -> Any:
    """A tool search's arguments as the object OpenAI's item carries; text that is no JSON stays text."""
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments
