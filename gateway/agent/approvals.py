"""MCP approvals in the agent loop, and `tool_choice: {"type": "mcp"}`: the client's answers to
approval requests (run the approved calls, tell the model of the denied ones, before the first
round), the calls that must wait for approval (they end the turn), and the first round's forced
MCP tool.

Works on the turn's Toolbox through the attributes an MCP tool has (`mcp`, `needs_approval`:
gateway/agent/mcp/tools.py), so nothing here loads the MCP client code.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import replace
from typing import Any

from gateway.agent import sources
from gateway.agent.events import AgentEvent, McpApprovalRequested, ToolCallFinished, ToolCallStarted
from gateway.agent.tool_calls import ToolCall, ToolRunner, assistant_with_calls, tool_error
from gateway.agent.tool_servers import McpApproval, denied_output
from gateway.agent.toolbox import Toolbox, ToolContext
from gateway.common.json_out import Encoded

#: OpenAI's limit on a function name's length (the upstream name `<label>__<tool>` is cut to it).
MAX_NAME = 64


def upstream_name(label: str, name: str) -> str:
    return f"{label}__{name}"[:MAX_NAME]


async def act_on_answers(runner: ToolRunner, approvals: Sequence[McpApproval], context: ToolContext,
                         numbers: sources.SourceNumbers, conversation: list[dict[str, Any]],
                         add: Callable[[dict[str, Any]], None]) -> AsyncGenerator[AgentEvent, None]:
    """Each answer as a call and its result in `conversation` (and the turn's transcript, `add`):
    an approved call runs (its events carry the request's id), a denied one is not run and the
    model reads that it was denied. The call's id is the approval request's."""
    for approval in approvals:
        name = upstream_name(approval.label, approval.name)
        call = ToolCall(approval.request_id, name, approval.arguments)
        asked = assistant_with_calls("", [call])
        last = conversation[-1] if conversation else None
        if last is not None and last.get("role") == "assistant" and not last.get("tool_calls"):
            # the text the model wrote before it asked: the call joins it (roles keep alternating)
            conversation[-1] = {**last, "tool_calls": asked["tool_calls"]}
        else:
            conversation.append(asked)
        add(asked)
        tool = runner.toolbox.get(name)
        if not approval.approve:
            output = denied_output(approval.reason)
        elif tool is None or getattr(tool, "mcp", None) != (approval.label, approval.name):
            output = tool_error(f"not run: {approval.name} of the MCP server {approval.label} is not offered now")
        else:
            output = ""
            async for event in runner.run([call], True, context, numbers):
                if isinstance(event, ToolCallStarted):
                    event = replace(event, approval_request_id=approval.request_id)
                elif isinstance(event, ToolCallFinished):
                    output = event.output
                yield event
        result = {"role": "tool", "tool_call_id": call.id, "content": output}
        conversation.append(result)
        add(result)


def waiting_for_approval(calls: Sequence[ToolCall], toolbox: Toolbox) -> list[ToolCall]:
    """The calls of a round to tools that need the client's approval first."""
    return [call for call in calls if getattr(toolbox.get(call.name), "needs_approval", False)]


def approval_requests(calls: Sequence[ToolCall], toolbox: Toolbox) -> list[McpApprovalRequested]:
    found: list[McpApprovalRequested] = []
    for call in calls:
        label, name = getattr(toolbox.get(call.name), "mcp", ("", call.name))
        found.append(McpApprovalRequested(call.id, label, name, call.arguments or "{}"))
    return found


def forced_choice(choice: tuple[str, str | None], toolbox: Toolbox,
                  ) -> tuple[list[Encoded] | None, dict[str, Any] | str] | None:
    """`tool_choice: {"type": "mcp", "server_label", "name"?}` for the first round: (None: the
    tools as offered, that tool as the function to call), or (the server's tools alone, a call
    `required`). None when the server
    listed no such tool this turn (the model then chooses freely)."""
    label, name = choice
    if name is not None:
        tool = toolbox.get(upstream_name(label, name))
        if tool is None or getattr(tool, "mcp", None) != (label, name):
            return None
        return None, {"type": "function", "function": {"name": tool.name}}
    schemas = [schema for tool_name, schema in toolbox.encoded()
               if getattr(toolbox.get(tool_name), "mcp", ("",))[0] == label]
    return (schemas, "required") if schemas else None
