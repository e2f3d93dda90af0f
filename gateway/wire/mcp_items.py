"""MCP tools in a Responses API response: `mcp_list_tools` and `mcp_call` items. Pure.

An MCP server's tools run server-side, as OpenAI's hosted `mcp` tool does, so they appear as OpenAI
shows them (openai-python `response_output_item.McpListTools` / `McpCall`), never as `function_call`s
a client would try to run. Events in OpenAI's order:

    list:  output_item.added (tools: []) -> mcp_list_tools.in_progress -> .completed | .failed
           -> output_item.done (the tools, or `error`)
    call:  output_item.added (status in_progress, arguments "") -> mcp_call.in_progress
           -> mcp_call_arguments.delta -> mcp_call_arguments.done -> mcp_call.completed | .failed
           -> output_item.done (output, or the typed `error`)
    approval request:  output_item.added -> output_item.done (the `mcp_approval_request`; the
           response then ends `completed`: gateway/wire/mcp_approvals.py)

The upstream name (`<label>__<tool>`) never shows: the item has the server's label and its tool name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.agent.events import McpApprovalRequested, McpToolsListed, ToolCallFinished, ToolCallStarted
from gateway.wire.responses_input import new_id

Event = Callable[..., dict[str, Any]]


class McpItems:
    """The MCP items of one response, kept in the builder's `output` list and announced through
    its `event` maker (so sequence numbers stay one series)."""

    def __init__(self, output: list[dict[str, Any]], event: Event, snapshot: Callable[[Any], Any]) -> None:
        self._output, self._event, self._snapshot = output, event, snapshot
        self._open: dict[str, int] = {}  # call id -> output index of its item

    def listed(self, listed: McpToolsListed) -> list[dict[str, Any]]:
        item: dict[str, Any] = {"id": new_id("mcpl"), "type": "mcp_list_tools", "server_label": listed.server_label,
                                "tools": []}
        index = len(self._output)
        self._output.append(item)
        ids = {"item_id": item["id"], "output_index": index}
        events = [self._event("response.output_item.added", output_index=index, item=self._snapshot(item)),
                  self._event("response.mcp_list_tools.in_progress", **ids)]
        if listed.error is not None:
            item["error"] = listed.error
            events.append(self._event("response.mcp_list_tools.failed", **ids))
        else:
            item["tools"] = [dict(tool) for tool in listed.tools]
            events.append(self._event("response.mcp_list_tools.completed", **ids))
        events.append(self._event("response.output_item.done", output_index=index, item=self._snapshot(item)))
        return events

    def started(self, call: ToolCallStarted) -> list[dict[str, Any]]:
        assert call.mcp is not None
        label, name = call.mcp
        item: dict[str, Any] = {"id": new_id("mcp"), "type": "mcp_call", "status": "in_progress",
                                "server_label": label, "name": name, "arguments": "", "output": None,
                                "error": None}
        if call.approval_request_id is not None:  # run on the client's approval
            item["approval_request_id"] = call.approval_request_id
        index = len(self._output)
        self._output.append(item)
        self._open[call.call_id] = index
        ids = {"item_id": item["id"], "output_index": index}
        arguments = call.arguments or "{}"
        events = [self._event("response.output_item.added", output_index=index, item=self._snapshot(item)),
                  self._event("response.mcp_call.in_progress", **ids),
                  self._event("response.mcp_call_arguments.delta", **ids, delta=arguments),
                  self._event("response.mcp_call_arguments.done", **ids, arguments=arguments)]
        item["arguments"] = arguments
        return events

    def approval_requested(self, asked: McpApprovalRequested) -> list[dict[str, Any]]:
        """A call waiting for the client's approval: an `mcp_approval_request` item, added and done."""
        item = {"id": new_id("mcpr"), "type": "mcp_approval_request", "server_label": asked.server_label,
                "name": asked.name, "arguments": asked.arguments}
        index = len(self._output)
        self._output.append(item)
        return [self._event("response.output_item.added", output_index=index, item=self._snapshot(item)),
                self._event("response.output_item.done", output_index=index, item=self._snapshot(item))]

    def owns(self, call_id: str) -> bool:
        return call_id in self._open

    def finished(self, result: ToolCallFinished) -> list[dict[str, Any]]:
        index = self._open.pop(result.call_id, None)
        if index is None:
            return []
        item = self._output[index]
        ids = {"item_id": item["id"], "output_index": index}
        if result.ok:
            item["status"], item["output"] = "completed", result.output
        else:
            item["status"] = "failed"
            error = result.error or {"type": "http_error", "code": 504, "message": result.output}
            item["error"] = dict(error)
            if error.get("type") == "mcp_tool_execution_error":
                item["output"] = result.output  # what the model read of the tool's own failure
        kind = "response.mcp_call.completed" if result.ok else "response.mcp_call.failed"
        return [self._event(kind, **ids),
                self._event("response.output_item.done", output_index=index, item=self._snapshot(item))]

    def cut_short(self) -> None:
        """Calls still running when the response ends are `incomplete`."""
        for index in self._open.values():
            self._output[index]["status"] = "incomplete"
        self._open.clear()
