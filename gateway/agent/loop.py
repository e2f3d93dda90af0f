"""The agent loop, shared by every wire format: model -> tool calls -> results -> model ...

It sends the conversation (its own system prompt first) and the tool schemas upstream, relays
the model's text, runs calls to its own tools in parallel, appends the results, and repeats up to
`max_rounds` tool rounds, after which the model must answer without tools. Calls to tools the
client supplied are not run: they end the turn and go back to the client.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from gateway.agent import sources
from gateway.agent.events import (
    AgentEvent,
    ClientToolCall,
    Finished,
    ReasoningDelta,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)
from gateway.agent.history import SYSTEM_BREAK, upstream_conversation
from gateway.agent.observer import CURRENT_TOOL_REPORT, AgentObserver, ToolReport, UpstreamCall, upstream_outcome
from gateway.agent.toolbox import Toolbox, ToolContext, offer_tools
from gateway.agent.web_options import WebSearchOptions
from gateway.upstream.client import Opener, UpstreamClient
from gateway.upstream.deltas import Finish, Reasoning, Text, TokenUsage, ToolCallPart

FINAL_ROUND_NOTE = (
    "You have used all tool rounds for this turn. Answer now from what you already found, "
    "without calling tools."
)


@dataclass
class AgentRequest:
    #: Chat-format conversation as the client sent it (its system/developer messages in place).
    messages: list[dict[str, Any]]
    #: Chat-format function tools the client supplied; calls to them go back to the client.
    client_tools: list[dict[str, Any]] = field(default_factory=list)
    #: Sampling and other fields passed upstream unchanged (temperature, max_tokens, tool_choice ...).
    params: dict[str, Any] = field(default_factory=dict)
    #: Stream the upstream (token deltas) or ask for whole replies.
    stream: bool = True
    #: Extra system text for this request only (the Responses API's `instructions`).
    instructions: str | None = None
    #: The request's web search options (a hosted web_search tool, `web_search_options`); None
    #: when it asked for none (then `API_SERVER_WEB_TOOLS=on_request` offers no web tools).
    web: WebSearchOptions | None = None
    #: A frontend's housekeeping (a title, tags), told by the wire: no agent tools for it.
    background: bool = False
    #: The number of the turn's first web source (the request's own documents may hold the first).
    first_source: int = 1
    #: The request's model route (gateway/upstream/routes.py): sends each model call, fallbacks
    #: included; None: the agent's own upstream, as configured.
    opener: Opener | None = None
    #: The route's API_SERVER_WEB_TOOLS (always, on_request, off); None: the agent's own.
    web_tools: str | None = None


class AgentRun:
    """One turn of the agent: `events` to iterate, and the transcript the agent keeps of it.

    The agent owns the transcript: `messages` is what this turn has added to the conversation so
    far, in chat format (assistant messages, with their `tool_calls`, and `tool` results), the
    text of a round still being written included. The last event, `Finished`, hands out the
    whole of it; a run cut short (an error, the client gone) keeps what it had here.
    """

    __slots__ = ("events", "_messages", "_writing")

    def __init__(self) -> None:
        self.events: AsyncGenerator[AgentEvent, None]
        self._messages: list[dict[str, Any]] = []
        self._writing: list[str] | None = None  # the text parts of the round being written

    @property
    def messages(self) -> list[dict[str, Any]]:
        if self._writing:
            return [*self._messages, {"role": "assistant", "content": "".join(self._writing)}]
        return list(self._messages)

    def _write(self, parts: list[str]) -> None:
        """A round begins: its text so far is `parts` (the agent's own list, appended to as it goes)."""
        self._writing = parts

    def _add(self, message: dict[str, Any]) -> None:
        self._messages.append(message)
        self._writing = None


@dataclass
class _ToolCall:
    id: str
    name: str
    arguments: str


class Agent:
    def __init__(
        self,
        upstream: UpstreamClient,
        toolbox: Toolbox,
        *,
        max_rounds: int,
        tool_timeout: float,
        system_prompt: str | None = None,
        observer: AgentObserver | None = None,
        web_tools: str = "always",
        client_web_tools: str = "drop",
    ) -> None:
        self.upstream = upstream
        self.observer = observer if observer is not None else AgentObserver()
        self.toolbox = toolbox
        self.max_rounds = max_rounds
        self.tool_timeout = tool_timeout
        self.system_prompt = system_prompt
        self.web_tools = web_tools  # always, or on_request: only when a request asks for web search
        self.client_web_tools = client_web_tools  # drop (a client's own web tools) or keep
        # (UTC day number, prompt without tools, prompt with tools): rebuilt when the date changes,
        # not on every request (strftime and the f-strings cost every request; bench/README.md)
        self._dated_prompts: tuple[int, str, str] = (-1, "", "")

    def _system_prompt(self, with_tools: bool) -> str:
        if self.system_prompt:
            return self.system_prompt
        day = int(time.time()) // 86400  # days since the epoch: the UTC date changes with it
        if self._dated_prompts[0] != day:
            self._dated_prompts = (day, self._default_prompt(day, False), self._default_prompt(day, True))
        _, plain, tooled = self._dated_prompts
        return tooled if with_tools else plain

    @staticmethod
    def _default_prompt(day: int, with_tools: bool) -> str:
        today = time.strftime("%A, %d %B %Y", time.gmtime(day * 86400))
        if not with_tools:
            return f"You are a helpful assistant. Today is {today} (UTC)."
        return (
            f"You are a helpful assistant with live web access. Today is {today} (UTC).\n"
            "Use web_search for anything recent, factual or niche that you are not sure of, and "
            "web_extract to read a page in full (crawl=true to follow a site's pages). Prefer a few "
            "precise searches over many vague ones. Base your answer on what you found. Every result "
            "has an id: cite it in square brackets right after what it supports, like [1] or [2][3]. "
            "If the tools fail, say so and answer as best you can."
        )

    def run(self, request: AgentRequest) -> AgentRun:
        """Start one turn: its events and the transcript it adds (see AgentRun)."""
        turn = AgentRun()
        turn.events = self._events(request, turn)
        return turn

    async def _events(self, request: AgentRequest, turn: AgentRun) -> AsyncGenerator[AgentEvent, None]:
        offer = offer_tools(self.toolbox, request.client_tools, request.web,
                            mode=request.web_tools or self.web_tools,
                            background=request.background, client_web_tools=self.client_web_tools,
                            no_tools=request.params.get("tool_choice") == "none")
        use_agent_tools, tools, context = offer.agent_tools, offer.tools, offer.context
        client_names = offer.client_names
        numbers = sources.SourceNumbers(request.first_source)

        conversation = upstream_conversation(self._system_prompt(use_agent_tools), request.instructions,
                                             request.messages)

        prompt_tokens = completion_tokens = 0
        usage_known = True  # until a round's upstream reply has no usage (some servers send none)
        reasoning_tokens: int | None = None
        cached_tokens: int | None = None
        finish = "stop"
        rounds = 0
        while True:
            final_round = rounds >= self.max_rounds and use_agent_tools
            payload: dict[str, Any] = {**request.params, "messages": conversation}
            if tools and not final_round:
                payload["tools"] = tools
                if offer.first_choice is not None and rounds == 0:
                    payload["tool_choice"] = offer.first_choice
                elif "tool_choice" not in payload:
                    # said, not left to the server: llama-cpp-python's function-calling formats read
                    # a missing tool_choice as "no tools" and render the prompt without them
                    payload["tool_choice"] = "auto"
            else:
                payload.pop("tool_choice", None)
                payload.pop("parallel_tool_calls", None)
                if final_round:  # the note joins the one system message (see upstream_conversation)
                    system = {"role": "system", "content": conversation[0]["content"] + SYSTEM_BREAK + FINAL_ROUND_NOTE}
                    payload["messages"] = [system, *conversation[1:]]

            text_parts: list[str] = []
            reasoning_parts: list[str] = []
            reasoning_field = ""
            turn._write(text_parts)
            round_finish: str | None = None
            round_usage: TokenUsage | None = None
            partial: dict[int, _ToolCall] = {}
            model_call = self.observer.upstream_call(request.stream)
            deltas = self.upstream.deltas(payload, stream=request.stream, headers=model_call.headers,
                                          opener=request.opener)
            waiting = request.stream  # time to first token: a streamed reply's measure
            async with _observed(model_call, deltas):
                async for delta in deltas:
                    if type(delta) is Text:  # nearly every delta: checked first
                        if waiting:
                            waiting = False
                            model_call.first_token()
                        text_parts.append(delta.text)
                        yield TextDelta(delta.text)
                    elif isinstance(delta, ToolCallPart):
                        if waiting:
                            waiting = False
                            model_call.first_token()
                        _merge_call_part(partial, delta)
                    elif type(delta) is Reasoning:
                        if waiting:
                            waiting = False
                            model_call.first_token()
                        reasoning_parts.append(delta.text)
                        reasoning_field = delta.field
                        yield ReasoningDelta(delta.text)
                    elif isinstance(delta, Finish):
                        round_finish = delta.reason
                    elif isinstance(delta, TokenUsage):
                        round_usage = delta
            calls = [
                _ToolCall(p.id or f"call_{rounds}_{i}", p.name, p.arguments)
                for i, p in sorted(partial.items())
                if p.name
            ]
            if round_usage is None:
                usage_known = False
            else:
                prompt_tokens += round_usage.prompt_tokens
                completion_tokens += round_usage.completion_tokens
                if round_usage.reasoning_tokens is not None:  # unknown (None) until a round reports it
                    reasoning_tokens = (reasoning_tokens or 0) + round_usage.reasoning_tokens
                if round_usage.cached_tokens is not None:
                    cached_tokens = (cached_tokens or 0) + round_usage.cached_tokens

            text = "".join(text_parts)
            if not calls:
                turn._add({"role": "assistant", "content": text})
                finish = round_finish if round_finish in ("length", "content_filter") else "stop"
                break

            client_calls = [c for c in calls if c.name in client_names]
            if client_calls:
                # The turn ends here; calls to our own tools in the same round are dropped, since the
                # client will continue the conversation without their results.
                turn._add(_assistant_with_calls(text, client_calls))
                for call in client_calls:
                    yield ClientToolCall(call.id, call.name, call.arguments)
                finish = "tool_calls"
                break

            assistant = _assistant_with_calls(text, calls)
            # Within the turn the model gets its reasoning back, under the field it used: thinking
            # models (DeepSeek's, gpt-oss) want it across tool calls. The transcript kept for later
            # turns holds none: it would go upstream as the client's history.
            conversation.append({**assistant, reasoning_field: "".join(reasoning_parts)} if reasoning_parts
                                else assistant)
            turn._add(assistant)
            async for event in self._run_tools(calls, use_agent_tools, context, numbers):
                if isinstance(event, ToolCallFinished):
                    tool_message = {"role": "tool", "tool_call_id": event.call_id, "content": event.output}
                    conversation.append(tool_message)
                    turn._add(tool_message)
                yield event
            rounds += 1

        self.observer.turn_finished(rounds, prompt_tokens, completion_tokens)
        if usage_known:  # unknown is not zero: no Usage, and the wire formats say none
            yield Usage(prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens)
        yield Finished(finish, tuple(turn._messages))

    async def _run_tools(self, calls: list[_ToolCall], allowed: bool, context: ToolContext,
                         numbers: sources.SourceNumbers) -> AsyncGenerator[AgentEvent, None]:
        parsed: list[dict[str, Any] | str] = []
        for call in calls:
            arguments = _parse_arguments(call.arguments)
            parsed.append(arguments)
            tool = self.toolbox.get(call.name) if allowed else None
            marker = tool.marker(arguments) if tool is not None and isinstance(arguments, dict) else None
            queries, urls = sources.wanted(call.name, arguments) if tool is not None else ((), ())
            yield ToolCallStarted(call.id, call.name, call.arguments, marker, queries, urls)
        outputs = await asyncio.gather(
            *(self._run_one(c, a, allowed, context) for c, a in zip(calls, parsed, strict=True)))
        for call, (output, ok) in zip(calls, outputs, strict=True):
            worked, output, found = numbers.outcome(call.name, output) if ok else (False, output, ())
            yield ToolCallFinished(call.id, call.name, output, worked, found)

    async def _run_one(self, call: _ToolCall, arguments: dict[str, Any] | str, allowed: bool,
                       context: ToolContext) -> tuple[str, bool]:
        """One call, observed: the tool reports its provider into `report` (gateway/agent/observer.py)."""
        # a name the model made up is not a label: metric labels stay a bounded set
        observed = self.observer.tool_call(call.name if call.name in self.toolbox else "unknown")
        report = ToolReport()
        CURRENT_TOOL_REPORT.set(report)  # in this call's own task context (gather made the task)
        outcome = "cancelled"
        try:
            output, ok, outcome = await self._run_tool(call, arguments, allowed, context)
        finally:
            observed.finish(report.provider, report.outcome if outcome == "ok" else outcome)
        return output, ok

    async def _run_tool(self, call: _ToolCall, arguments: dict[str, Any] | str,
                        allowed: bool, context: ToolContext) -> tuple[str, bool, str]:
        tool = self.toolbox.get(call.name) if allowed else None
        if tool is None:
            return (_tool_error(f"unknown tool {call.name!r}; available: {', '.join(self.toolbox.names())}"),
                    False, "unknown_tool")
        if isinstance(arguments, str):
            return _tool_error(arguments), False, "bad_arguments"
        try:
            output = await asyncio.wait_for(tool.run(arguments, context), timeout=self.tool_timeout)
        except TimeoutError:
            return _tool_error(f"{call.name} timed out after {self.tool_timeout:g} s"), False, "timeout"
        except Exception as exc:  # noqa: BLE001 - a tool's bug must cost the call, not the turn
            return _tool_error(f"{call.name} failed: {exc or type(exc).__name__}"), False, "error"
        return output, True, "ok"


class _observed:  # noqa: N801 - used like the context-manager function it replaces
    """`async with _observed(call[, chunks])`: finishes `call` with the block's outcome and closes
    `chunks` (a stream) as `contextlib.aclosing` would. A class: a generator-based context manager
    costs a generator and several frames per model call."""

    __slots__ = ("_call", "_chunks")

    def __init__(self, call: UpstreamCall, chunks: AsyncGenerator[Any, None] | None = None) -> None:
        self._call = call
        self._chunks = chunks

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            if self._chunks is not None:
                await self._chunks.aclose()
        finally:
            self._call.finish("ok" if exc is None else upstream_outcome(exc))


def _merge_call_part(partial: dict[int, _ToolCall], part: ToolCallPart) -> None:
    index = part.index if part.index is not None else len(partial)
    entry = partial.setdefault(index, _ToolCall("", "", ""))
    if part.id:
        entry.id = part.id
    # Some servers (llama-cpp-python) repeat the whole name in every fragment of a call: a piece
    # equal to the name so far is that repeat, not more of the name.
    if part.name and part.name != entry.name:
        entry.name += part.name
    if part.arguments:
        entry.arguments += part.arguments


def _assistant_with_calls(text: str, calls: list[_ToolCall]) -> dict[str, Any]:
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


def _parse_arguments(raw: str) -> dict[str, Any] | str:
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


def _tool_error(message: str) -> str:
    return json.dumps({"success": False, "error": message}, ensure_ascii=False)
