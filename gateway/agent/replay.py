"""Calls of the agent's own tools that a client replayed without their results, run again.

A client that keeps its own history sends back what the gateway's tools did as items that hold
no result (a Responses `web_search_call`); when such a call belongs to the turn still open, the
model has not yet read its result (its round also called one of the client's tools, which ended
the turn), so it is run again before the turn's first round, and its output replaces the
placeholder tool message. The web tools' cache (`web.cache_ttl`) answers a search run moments
ago without a provider call. No event goes to the client for it beyond the pages it found (a
`ToolCallFinished`, for citations): it reported the call when it first ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.agent import sources
from gateway.agent.events import ToolCallFinished
from gateway.agent.tool_calls import ToolCall, ToolRunner
from gateway.agent.toolbox import ToolContext


async def run_again(runner: ToolRunner, replayed: Sequence[tuple[str, str, str]], conversation: list[dict[str, Any]],
                    context: ToolContext, numbers: sources.SourceNumbers) -> list[ToolCallFinished]:
    """Run the `replayed` calls of tools the agent has and put each output in its tool message
    of `conversation` (replaced, not changed in place: the request's messages stay as sent)."""
    calls = [ToolCall(call_id, name, arguments) for call_id, name, arguments in replayed
             if name in runner.toolbox]
    if not calls:
        return []
    finished = [event async for event in runner.run(calls, True, context, numbers)
                if isinstance(event, ToolCallFinished)]
    outputs = {event.call_id: event.output for event in finished}
    for index, message in enumerate(conversation):
        if message.get("role") == "tool" and message.get("tool_call_id") in outputs:
            conversation[index] = {**message, "content": outputs[message["tool_call_id"]]}
    return finished
