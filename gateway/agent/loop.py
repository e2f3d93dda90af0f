"""The agent loop, shared by every wire format: model -> tool calls -> results -> model ...

It sends the conversation (its own system prompt first) and the tool schemas upstream, relays
the model's text, runs calls to its own tools in parallel, appends the results, and repeats up to
`max_rounds` tool rounds, after which the model must answer without tools. Calls to tools the
client supplied are not run: they end the turn and go back to the client.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from gateway.agent import approvals, replay, sources
from gateway.agent.events import (
    AgentEvent,
    ClientToolCall,
    Finished,
    McpToolsListed,
    ToolCallFinished,
    Usage,
)
from gateway.agent.history import SYSTEM_BREAK, upstream_conversation
from gateway.agent.observer import AgentObserver, UpstreamCall, upstream_outcome
from gateway.agent.round_parts import CONTENT, RoundParts
from gateway.agent.tool_calls import ToolCall, ToolRunner, assistant_with_calls, tool_error
from gateway.agent.toolbox import Toolbox, offer_tools
from gateway.agent.turn import AgentRequest, AgentRun
from gateway.common import json_out
from gateway.errors import EmptyStreamError, GatewayError
from gateway.upstream.client import UpstreamClient

if TYPE_CHECKING:  # the MCP code loads only when a server is configured (tests/providers/test_idle_imports.py)
    from gateway.agent.mcp.tools import Listing, McpFamily

__all__ = ["Agent", "AgentRequest", "AgentRun"]  # the wire-facing names, as before the split

log = logging.getLogger("agent_gateway.agent")
#: a token's characters, for a round whose usage the upstream never reported
CHARS_PER_TOKEN = 4
FINAL_ROUND_NOTE = (
    "You have used all tool rounds for this turn. Answer now from what you already found, "
    "without calling tools."
)


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
        mcp: McpFamily | None = None,
        mcp_allowed_hosts: tuple[str, ...] = (),
    ) -> None:
        self.upstream = upstream
        self.observer = observer if observer is not None else AgentObserver()
        self.toolbox = toolbox
        self.max_rounds = max_rounds
        self.tool_timeout = tool_timeout
        self._tools = ToolRunner(toolbox, self.observer, tool_timeout)
        self.system_prompt = system_prompt
        self.web_tools = web_tools  # always, or on_request: only when a request asks for web search
        self.client_web_tools = client_web_tools  # drop (a client's own web tools) or keep
        self.mcp = mcp  # the configured MCP servers, if any; made on the first request naming one if none
        self.mcp_allowed_hosts = mcp_allowed_hosts
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
        if request.research is not None:  # a research model id: the research loop, over the same tools
            # imported here: research code loads on a research model's first run, not in an idle gateway
            from gateway.agent.research.run import research_events

            mcp = self._mcp_family() if request.mcp else self.mcp  # a request naming servers makes the family
            turn.events = research_events(self.upstream, self._tools, self.observer, request, turn, mcp)
            return turn
        # a request's own MCP servers wrap the turn; the common turn has no wrapper to pass events through
        turn.events = self._with_mcp(request, turn) if request.mcp else self._events(request, turn)
        return turn

    def _mcp_family(self) -> McpFamily:
        if self.mcp is None:
            from gateway.agent.mcp.registry import McpRegistry
            from gateway.agent.mcp.tools import McpFamily

            self.mcp = McpFamily(McpRegistry(allowed_hosts=self.mcp_allowed_hosts), ())
        return self.mcp

    async def _with_mcp(self, request: AgentRequest, turn: AgentRun) -> AsyncGenerator[AgentEvent, None]:
        """The turn with the servers the request names: listed first (a URL the gateway may not
        reach is a 400 before any event), closed when the turn ends however it ends."""
        family = self._mcp_family()
        listings, opened = await family.open_request(request.mcp)
        try:
            async for event in self._events(request, turn, listings):
                yield event
        finally:
            await family.close_request(opened)

    async def _events(self, request: AgentRequest, turn: AgentRun,
                      named: list[Listing] | None = None) -> AsyncGenerator[AgentEvent, None]:
        """`named`: the listings of the MCP servers the request names (`_with_mcp`)."""
        mode = request.web_tools or self.web_tools
        no_tools = request.params.get("tool_choice") == "none"
        toolbox, runner = self.toolbox, self._tools
        if request.no_web:  # the key may not use the web tools: neither offered nor run
            toolbox = self.toolbox.always_only()
            runner = ToolRunner(toolbox, self.observer, self.tool_timeout)
        listed: list[McpToolsListed] = []
        if self.mcp is not None and not request.background and not no_tools and mode != "off":
            listings = await self.mcp.list_offered()
            if request.mcp_labels is not None:  # the configured servers the key may use
                listings = [listing for listing in listings if listing.label in request.mcp_labels]
            if named:
                listings.extend(named)
            toolbox = self.mcp.toolbox(toolbox, listings, cache=not named, approvals=request.approvals_possible)
            runner = ToolRunner(toolbox, self.observer, self.tool_timeout)
            listed = [McpToolsListed(listing.label, listing.item_tools, listing.error) for listing in listings
                      if not listing.reused]
        offer = offer_tools(toolbox, request.client_tools, request.web, mode=mode,
                            background=request.background, client_web_tools=self.client_web_tools,
                            no_tools=no_tools)
        if offer.agent_tools:
            for listing in listed:
                yield listing
        use_agent_tools, tools, context = offer.agent_tools, offer.tools, offer.context
        client_names = offer.client_names
        numbers = sources.SourceNumbers(request.first_source)

        conversation = upstream_conversation(self._system_prompt(use_agent_tools), request.instructions,
                                             request.messages)
        if request.replayed and use_agent_tools:
            replayed = [call for call in request.replayed if call[1] not in client_names]
            for finished in await replay.run_again(runner, replayed, conversation, context, numbers):
                yield finished
        calls_left = request.max_tool_calls  # None: no cap but the rounds
        if request.approvals:  # the client answered approval requests: act on them first
            async for answered in approvals.act_on_answers(runner, request.approvals, context, numbers,
                                                          conversation, turn._add):
                yield answered
            if calls_left is not None:
                calls_left = max(0, calls_left - sum(approval.approve for approval in request.approvals))

        prompt_tokens = completion_tokens = 0
        usage_known = True  # until a round's upstream reply has no usage (some servers send none)
        reasoning_tokens: int | None = None
        cached_tokens: int | None = None
        finish = "stop"
        rounds = 0
        while True:
            # max_tool_calls used up: no more tools, unless the client's own are on offer (not counted)
            final_round = (rounds >= self.max_rounds or (calls_left == 0 and not client_names)) and use_agent_tools
            payload: dict[str, Any] = {**request.params, "messages": conversation}
            if tools and not final_round:
                payload["tools"] = tools
                forced = approvals.forced_choice(request.mcp_choice, toolbox) \
                    if request.mcp_choice is not None and rounds == 0 and use_agent_tools else None
                if forced is not None:  # tool_choice {"type": "mcp"}
                    payload["tools"] = forced[0] if forced[0] is not None else tools
                    payload["tool_choice"] = forced[1]
                elif offer.first_choice is not None and rounds == 0:
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

            parts = RoundParts()
            turn._write(parts.text)
            try:
                model_call = self.observer.upstream_call(request.stream)
                whole = not request.stream
                if request.stream:
                    deltas = self.upstream.deltas(payload, stream=True, headers=model_call.headers,
                                                  opener=request.opener)
                    waiting = True  # time to first token: a streamed reply's measure
                    try:
                        async with _observed(model_call, deltas):
                            async for delta in deltas:
                                if waiting and type(delta) in CONTENT:  # the first text, reasoning or call part
                                    waiting = False
                                    model_call.first_token()
                                event = parts.take(delta)
                                if event is not None:
                                    yield event
                    except EmptyStreamError:
                        # Nothing came, so nothing went out: llama-cpp-python (chatml-function-calling)
                        # answers a streamed request with tools so, the same request unstreamed
                        # properly. Asked once more, whole; its deltas go out as a stream's would.
                        log.debug("round %d: the upstream's stream ended before its first frame; asking "
                                  "again unstreamed", rounds)
                        whole, model_call = True, self.observer.upstream_call(False)
                if whole:
                    # A whole reply: its deltas in one list, read before any event leaves (no async
                    # generator between the client and here; the same events as from a stream of it)
                    try:
                        reply = await self.upstream.whole(payload, headers=model_call.headers, opener=request.opener)
                    except BaseException as exc:
                        model_call.finish(upstream_outcome(exc))
                        raise
                    model_call.finish("ok")
                    for delta in reply:
                        event = parts.take(delta)
                        if event is not None:
                            yield event
            except BaseException as exc:
                # a round cut (the client left, the run was cancelled, the upstream failed midway)
                # is paid for too: what the upstream reported, or an estimate
                self._count_cut_round(parts, payload, exc)
                raise
            calls = [
                ToolCall(p.id or f"call_{rounds}_{i}", p.name, p.arguments)
                for i, p in sorted(parts.calls.items())
                if p.name
            ]
            round_usage = parts.usage
            if round_usage is None:
                usage_known = False
                self.observer.round_usage(*_estimate(parts, payload), estimated=True)
            else:
                self.observer.round_usage(round_usage.prompt_tokens, round_usage.completion_tokens, estimated=False)
                prompt_tokens += round_usage.prompt_tokens
                completion_tokens += round_usage.completion_tokens
                if round_usage.reasoning_tokens is not None:  # unknown (None) until a round reports it
                    reasoning_tokens = (reasoning_tokens or 0) + round_usage.reasoning_tokens
                if round_usage.cached_tokens is not None:
                    cached_tokens = (cached_tokens or 0) + round_usage.cached_tokens

            text = "".join(parts.text)
            if not calls:
                turn._add({"role": "assistant", "content": text})
                finish = parts.finish if parts.finish in ("length", "content_filter") else "stop"
                break

            client_calls = [c for c in calls if c.name in client_names]
            held = approvals.waiting_for_approval(calls, toolbox) if use_agent_tools else []
            if client_calls or held:
                # The turn ends here, with the client's calls. Calls to our own tools in the same
                # round (Codex always allows parallel calls) run first, kept as a round of their
                # own before the client's: the next request, with the client's results, continues
                # from them (a stored response's transcript; a replayed web_search_call, run again).
                # Where it cannot (AgentRequest.own_calls_beside_client_calls), they are dropped.
                # Calls waiting for the client's approval end the turn the same way: not run, asked
                # for (mcp_approval_request items); the next request's answers run them (approvals.py).
                own_calls = [c for c in calls if c.name not in client_names and c not in held and c.name in toolbox]
                if own_calls and use_agent_tools and request.own_calls_beside_client_calls:
                    turn._add(assistant_with_calls(text, own_calls))
                    text = ""
                    async for event in runner.run(own_calls, use_agent_tools, context, numbers):
                        if isinstance(event, ToolCallFinished):
                            turn._add({"role": "tool", "tool_call_id": event.call_id, "content": event.output})
                        yield event
                if client_calls:
                    turn._add(assistant_with_calls(text, client_calls))
                elif text:
                    turn._add({"role": "assistant", "content": text})
                for call in client_calls:
                    yield ClientToolCall(call.id, call.name, call.arguments)
                for asked in approvals.approval_requests(held, toolbox):
                    yield asked
                finish = "tool_calls" if client_calls else "stop"
                break

            over: list[ToolCall] = []
            if calls_left is not None:  # max_tool_calls: the calls past it are not made; the model is told
                calls, over = calls[:calls_left], calls[calls_left:]
                calls_left -= len(calls)
            assistant = assistant_with_calls(text, [*calls, *over])
            # Within the turn the model gets its reasoning back, under the field it used: thinking
            # models (DeepSeek's, gpt-oss) want it across tool calls. The transcript kept for later
            # turns holds none: it would go upstream as the client's history.
            conversation.append({**assistant, parts.reasoning_field: "".join(parts.reasoning)} if parts.reasoning
                                else assistant)
            turn._add(assistant)
            images: list[dict[str, Any]] = []
            async for event in runner.run(calls, use_agent_tools, context, numbers):
                if isinstance(event, ToolCallFinished):
                    tool_message = {"role": "tool", "tool_call_id": event.call_id, "content": event.output}
                    conversation.append(tool_message)
                    turn._add(tool_message)
                    images.extend(event.images)
                yield event
            if images and request.vision:  # after the round's tool messages, as a tool output's images go
                conversation.append({"role": "user", "content": [
                    {"type": "text", "text": "The images the tools returned:"}, *images]})
            for call in over:
                refused = {"role": "tool", "tool_call_id": call.id,
                           "content": tool_error("not run: this response's max_tool_calls is used up")}
                conversation.append(refused)
                turn._add(refused)
            rounds += 1

        self.observer.turn_finished(rounds, prompt_tokens, completion_tokens)
        if usage_known:  # unknown is not zero: no Usage, and the wire formats say none
            yield Usage(prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens)
        yield Finished(finish, tuple(turn._messages))

    def _count_cut_round(self, parts: RoundParts, payload: dict[str, Any], exc: BaseException) -> None:
        if parts.usage is not None:
            self.observer.round_usage(parts.usage.prompt_tokens, parts.usage.completion_tokens, estimated=False)
        elif not isinstance(exc, GatewayError) or parts.started():
            # a refusal before any output cost nothing; a cut after the call went out did
            self.observer.round_usage(*_estimate(parts, payload), estimated=True)


def _estimate(parts: RoundParts, payload: dict[str, Any]) -> tuple[int, int]:
    """A round's (prompt, completion) tokens when the upstream reported none: OpenAI's rule of
    thumb of 4 characters a token, on the messages and tools sent and on what came back."""
    sent = len(json_out.dumps(payload.get("messages", []))) + len(json_out.dumps(payload.get("tools", [])))
    came = sum(map(len, parts.text)) + sum(map(len, parts.reasoning)) + sum(
        len(call.arguments) + len(call.name or "") for call in parts.calls.values())
    return -(-sent // CHARS_PER_TOKEN), -(-came // CHARS_PER_TOKEN)


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


