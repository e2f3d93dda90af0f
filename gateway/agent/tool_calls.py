"""The model's tool calls in one round: pieced together from the stream's parts, run in parallel
(each observed and bounded by the tool timeout), and written back as chat messages."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from gateway.agent import sources
from gateway.agent.events import AgentEvent, ToolCallFinished, ToolCallStarted
from gateway.agent.observer import CURRENT_TOOL_REPORT, AgentObserver, ToolReport
from gateway.agent.toolbox import Toolbox, ToolContext, ToolFailed, ToolOutput
from gateway.upstream.deltas import ToolCallPart


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str


class ToolRunner:
    """Runs a round's calls to the agent's own tools: `run` yields each call's start, then each result."""

    __slots__ = ("toolbox", "observer", "tool_timeout")

    def __init__(self, toolbox: Toolbox, observer: AgentObserver, tool_timeout: float) -> None:
        self.toolbox = toolbox
        self.observer = observer
        self.tool_timeout = tool_timeout

    async def run(self, calls: list[ToolCall], allowed: bool, context: ToolContext,
                  numbers: sources.SourceNumbers) -> AsyncGenerator[AgentEvent, None]:
        parsed: list[dict[str, Any] | str] = []
        for call in calls:
            arguments = parse_arguments(call.arguments)
            parsed.append(arguments)
            tool = self.toolbox.get(call.name) if allowed else None
            marker = tool.marker(arguments) if tool is not None and isinstance(arguments, dict) else None
            queries, urls = sources.wanted(call.name, arguments) if tool is not None else ((), ())
            # an MCP tool says which server and tool it stands for (gateway/agent/mcp/tools.py)
            mcp = getattr(tool, "mcp", None)
            yield ToolCallStarted(call.id, call.name, call.arguments, marker, queries, urls, mcp)
        if len(calls) == 1:  # the usual round: no task of its own (gather's), one loop pass fewer
            outputs = [await self._run_one(calls[0], parsed[0], allowed, context)]
        else:
            outputs = await asyncio.gather(
                *(self._run_one(c, a, allowed, context) for c, a in zip(calls, parsed, strict=True)))
        for call, (output, ok, error) in zip(calls, outputs, strict=True):
            if isinstance(output, ToolOutput):  # an MCP result: its resource links are sources, numbered
                found = tuple(sources.Source(url, title or url, numbers.number(url), text[:sources.MAX_SOURCE_TEXT])
                              for url, title, text in output.links[:sources.MAX_SOURCES])
                text = output.text
                if found:
                    text += "\nCite the resources by number: " + ", ".join(f"[{s.number}] {s.url}" for s in found)
                images = tuple({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
                               for mime, data in output.images)
                yield ToolCallFinished(call.id, call.name, text, ok, found, error, images)
                continue
            worked, output, found = numbers.outcome(call.name, output) if ok else (False, output, ())
            yield ToolCallFinished(call.id, call.name, output, worked, found, error)

    async def _run_one(self, call: ToolCall, arguments: dict[str, Any] | str, allowed: bool,
                       context: ToolContext) -> tuple[str | ToolOutput, bool, dict[str, Any] | None]:
        """One call, observed: the tool reports its provider into `report` (gateway/agent/observer.py)."""
        # a name the model made up is not a label: metric labels stay a bounded set
        tool = self.toolbox.get(call.name)
        # an MCP tool counts as "mcp" (its server is the provider label): a request's own server names its tools
        mcp = getattr(tool, "mcp", None)
        observed = self.observer.tool_call("unknown" if tool is None else "mcp" if mcp is not None else call.name,
                                           None if mcp is None else (getattr(tool, "metric_server", "request"), *mcp))
        report = ToolReport()
        # in this call's own task context when gather made one; reset after, for a call run in the turn's
        token = CURRENT_TOOL_REPORT.set(report)
        outcome = "cancelled"
        error: dict[str, Any] | None = None
        try:
            output, ok, outcome = await self._run_tool(call, arguments, allowed, context)
        except ToolFailed as failed:
            output, ok, outcome, error = failed.output, False, "failed", failed.error
            if mcp is not None:  # how the MCP call failed: its typed error says
                outcome = _mcp_outcome(error)
        finally:
            CURRENT_TOOL_REPORT.reset(token)
            observed.finish(report.provider, report.outcome if outcome == "ok" else outcome)
        return output, ok, error

    async def _run_tool(self, call: ToolCall, arguments: dict[str, Any] | str,
                        allowed: bool, context: ToolContext) -> tuple[str | ToolOutput, bool, str]:
        tool = self.toolbox.get(call.name) if allowed else None
        if tool is None:
            return (tool_error(f"unknown tool {call.name!r}; available: {', '.join(self.toolbox.names())}"),
                    False, "unknown_tool")
        if isinstance(arguments, str):
            return tool_error(arguments), False, "bad_arguments"
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for runs the tool in a task of its own
            async with asyncio.timeout(self.tool_timeout):
                output = await tool.run(arguments, context)
        except TimeoutError:
            return tool_error(f"{call.name} timed out after {self.tool_timeout:g} s"), False, "timeout"
        except ToolFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - a tool's bug must cost the call, not the turn
            return tool_error(f"{call.name} failed: {exc or type(exc).__name__}"), False, "error"
        return output, True, "ok"


def _mcp_outcome(error: dict[str, Any] | None) -> str:
    kind = (error or {}).get("type")
    if kind == "mcp_tool_execution_error":
        return "tool_error"
    if kind == "http_error" and (error or {}).get("code") == 504:
        return "timeout"
    return "error"


def merge_call_part(partial: dict[int, ToolCall], part: ToolCallPart) -> None:
    index = part.index if part.index is not None else len(partial)
    entry = partial.setdefault(index, ToolCall("", "", ""))
    if part.id:
        entry.id = part.id
    # Some servers (llama-cpp-python) repeat the whole name in every fragment of a call: a piece
    # equal to the name so far is that repeat, not more of the name.
    if part.name and part.name != entry.name:
        entry.name += part.name
    if part.arguments:
        entry.arguments += part.arguments


def assistant_with_calls(text: str, calls: list[ToolCall]) -> dict[str, Any]:
    # "" rather than null for a round of calls without text: Ollama, LM Studio, llama-cpp-python
    # and older llama-server builds refuse a null content; every server checked accepts "".
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or "{}"}}
            for c in calls
        ],
    }


def parse_arguments(raw: str) -> dict[str, Any] | str:
    """The call's arguments as a dict, or an error sentence for the model."""
    if not raw or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return "the arguments were not valid JSON; call the tool again with a JSON object"
    if not isinstance(value, dict):
        return "the arguments must be a JSON object"
    return value


def tool_error(message: str) -> str:
    return json.dumps({"success": False, "error": message}, ensure_ascii=False)
