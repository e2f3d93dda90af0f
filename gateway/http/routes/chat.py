"""POST /v1/chat/completions: parse, run the agent, render chat objects or chunk streams."""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import web

from gateway.agent.events import AgentEvent
from gateway.agent.loop import AgentRequest
from gateway.common import json_out
from gateway.config.routes import RESEARCH_SUFFIX
from gateway.errors import GatewayError
from gateway.files.parts import has_files, read_file_parts
from gateway.http import access, appkeys
from gateway.http.auth import store_of
from gateway.http.body import read_json_object
from gateway.http.checks import continue_if_a_run_slot_is_free
from gateway.http.client_notes import images_not_shown
from gateway.http.key_limits import admit_tokens
from gateway.http.model_routes import context_window, route_turn
from gateway.http.research import research_base, research_options
from gateway.http.routes.files import sources_for
from gateway.http.run_loop import Messages, run_streamed, run_whole
from gateway.http.sse import frames
from gateway.keys.limits import DEFAULT_OUTPUT
from gateway.keys.ring import CURRENT_CALLER
from gateway.upstream.routes import RouteTurn
from gateway.wire import context_budget
from gateway.wire.chat import parse_chat_request
from gateway.wire.chat_output import ChatCompletionBuilder
from gateway.wire.chat_stream import ChatChunkEncoder
from gateway.wire.frontends import tool_progress
from gateway.wire.images import without_images

log = logging.getLogger("agent_gateway.chat")
routes = web.RouteTableDef()


@routes.post("/v1/chat/completions", expect_handler=continue_if_a_run_slot_is_free)
async def chat_completions(request: web.Request) -> web.StreamResponse:
    chat = parse_chat_request(await read_json_object(request))
    app = request.app  # a property over the match info: read once
    settings = app[appkeys.SETTINGS]
    # a research id ends with its suffix: tested here, so that other ids make no coroutine for it
    asked = chat.model
    base = (await research_base(request, asked)
            if settings.research and asked and asked.endswith(RESEARCH_SUFFIX) else None)
    # None without `models:` (checked here on the settings: no lookup, no coroutine per request for it)
    turn = await route_turn(request, base or chat.model) if settings.llm_models is not None else None
    access.check_model(settings.model_name if turn is None else turn.route.id, chat.model, research=base is not None)
    if turn is not None and not turn.route.vision:  # a text-only route: images become notes (client_notes.py)
        chat.messages, replaced = without_images(chat.messages)
        if replaced:
            images_not_shown(replaced, turn.route.id)
    if has_files(chat.messages):  # read into text before the estimate: a document costs its text
        chat.messages, _ = await read_file_parts(chat.messages, param="messages",
                                                 sources=sources_for(app, store_of(request)))
    max_output = _max_tokens(chat.params)
    at_most, fixed = _fixed_tokens(chat.messages, chat.client_tools, max_output)
    if fixed is not None:  # the window is looked up (and a coroutine made) only for a long input
        await _check_window(request, turn, fixed)
    caller = CURRENT_CALLER.get()
    if caller is not None and caller.token_limited:  # its tokens reserved, or a 429 (http/key_limits.py)
        # key_limits.token_estimate's figure, from the bound just made: the same items, the output's room added
        waiting = admit_tokens(request, caller, app[appkeys.KEYRING].limits,
                               at_most + (0 if max_output else DEFAULT_OUTPUT))
        if waiting is not None:  # behind replicas: the database's round trip
            await waiting
    agent_request = AgentRequest(
        messages=chat.messages, client_tools=chat.client_tools, params=chat.params, stream=chat.stream,
        web=chat.web, background=chat.background, first_source=chat.first_source,
    )
    access.limit_tools(agent_request, "web_search_options")
    if base is not None:  # a frontend's housekeeping (a title, tags) asked of a research id: a plain answer
        research = await research_options(request, turn, max_output_tokens=max_output)
        agent_request.research = None if chat.background else research
    if turn is None:
        model, reasoning = chat.model or settings.model_name, settings.reasoning == "show"
    else:
        agent_request.opener, agent_request.web_tools = turn.open, turn.route.web_tools
        model, reasoning = turn.model_id, turn.route.reasoning == "show"
    if chat.stream:
        progress = tool_progress(settings.tool_progress, request.headers, chat.client_tools, chat.messages)
        encoder = ChatChunkEncoder(model, include_usage=chat.include_usage, progress=progress,
                                   reasoning=reasoning)
        return await _stream(request, agent_request, _ChatStream(encoder, turn))
    return await run_whole(app, agent_request, _ChatWhole(model, reasoning, turn))


class _ChatWhole:
    def __init__(self, model: str, reasoning: bool, turn: RouteTurn | None = None) -> None:
        self.builder = ChatCompletionBuilder(model, reasoning=reasoning)
        self.feed = self.builder.add
        self.turn = turn

    async def end(self, messages: Messages) -> web.Response:
        if self.turn is not None:  # the route that answered (a fallback's, perhaps)
            self.builder.model = self.turn.model_id
        return web.Response(body=json_out.dumps(self.builder.result()), content_type="application/json")


class _ChatStream:
    """Chat chunks as `data:` frames; a failure is an error frame (what openai-python raises
    `APIError` on), and every stream ends with `[DONE]`."""

    def __init__(self, encoder: ChatChunkEncoder, turn: RouteTurn | None = None) -> None:
        self.encoder = encoder
        self.turn = turn

    def begin(self) -> bytes:
        turn, encoder = self.turn, self.encoder
        if turn is not None and turn.model_id != encoder.model:  # a fallback answered
            self.encoder = ChatChunkEncoder(turn.model_id, include_usage=encoder.include_usage,
                                            progress=encoder.progress, reasoning=encoder.reasoning)
        return frames([self.encoder.start()])

    def encode(self, events: list[AgentEvent]) -> bytes:
        return frames(self.encoder.encode_all(events))

    async def end(self, messages: Messages) -> bytes:
        return DONE

    async def fail(self, error: GatewayError, messages: Messages) -> bytes:
        return frames([json.dumps(error.envelope()), "[DONE]"])

    async def interrupted(self, messages: Messages) -> None:
        return None


DONE = frames(["[DONE]"])


def _max_tokens(params: dict[str, Any]) -> int | None:
    output = params.get("max_completion_tokens", params.get("max_tokens"))
    return output if isinstance(output, int) and not isinstance(output, bool) and output > 0 else None


def _fixed_tokens(messages: Messages, tools: list[Any], max_output: int | None) -> tuple[int, int | None]:
    """The turn's fixed tokens at most (context_budget.fixed_tokens_at_most), and its fixed tokens
    when they pass the smallest context window, else None (nothing to check)."""
    fixed_items = [*messages, *tools]
    at_most = context_budget.fixed_tokens_at_most(fixed_items, max_output)
    if at_most <= context_budget.SMALLEST_WINDOW:
        return at_most, None  # far below any window (most requests): no estimate per message needed
    fixed = context_budget.fixed_tokens(fixed_items, max_output)
    return at_most, fixed if fixed > context_budget.SMALLEST_WINDOW else None


async def _check_window(request: web.Request, turn: RouteTurn | None, fixed: int) -> None:
    """The client sends its whole history, so only `disabled` applies: a 400 before anything goes
    upstream, rather than the upstream's own error (or a silent cut) for a history over the window."""
    window = await context_window(request, turn)
    context_budget.fit([], complete=True, window=window, fixed=fixed, truncation="disabled", api="chat")


async def _stream(request: web.Request, agent_request: AgentRequest, reply: _ChatStream) -> web.StreamResponse:
    return await run_streamed(request, agent_request, reply, log=log)
