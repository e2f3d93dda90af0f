"""POST /v1/chat/completions: parse, run the agent, render chat objects or chunk streams."""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import web

from gateway.agent.events import AgentEvent
from gateway.agent.loop import AgentRequest
from gateway.common import json_out
from gateway.errors import GatewayError
from gateway.http import appkeys
from gateway.http.body import read_json_object
from gateway.http.checks import continue_if_a_run_slot_is_free
from gateway.http.runs import Messages, run_streamed, run_whole
from gateway.http.sse import frames
from gateway.wire import context_budget
from gateway.wire.chat import ChatChunkEncoder, ChatCompletionBuilder, parse_chat_request

log = logging.getLogger("agent_gateway.chat")
routes = web.RouteTableDef()


@routes.post("/v1/chat/completions", expect_handler=continue_if_a_run_slot_is_free)
async def chat_completions(request: web.Request) -> web.StreamResponse:
    chat = parse_chat_request(await read_json_object(request))
    settings = request.app[appkeys.SETTINGS]
    await _check_window(request, chat.messages, [*chat.client_tools], chat.params)
    agent_request = AgentRequest(
        messages=chat.messages, client_tools=chat.client_tools, params=chat.params, stream=chat.stream,
        web=chat.web,
    )
    model = chat.model or settings.model_name
    if chat.stream:
        encoder = ChatChunkEncoder(model, include_usage=chat.include_usage, progress=settings.tool_progress,
                                   reasoning=settings.reasoning == "show")
        return await _stream(request, agent_request, encoder)
    return await _complete(request, agent_request, model, reasoning=settings.reasoning == "show")


class _ChatWhole:
    def __init__(self, model: str, reasoning: bool) -> None:
        self.builder = ChatCompletionBuilder(model, reasoning=reasoning)
        self.feed = self.builder.add

    async def end(self, messages: Messages) -> web.Response:
        return web.Response(body=json_out.dumps(self.builder.result()), content_type="application/json")


class _ChatStream:
    """Chat chunks as `data:` frames; a failure is an error frame (what openai-python raises
    `APIError` on), and every stream ends with `[DONE]`."""

    def __init__(self, encoder: ChatChunkEncoder) -> None:
        self.encoder = encoder

    def begin(self) -> bytes:
        return frames([self.encoder.start()])

    def encode(self, events: list[AgentEvent]) -> bytes:
        encode = self.encoder.encode
        return frames([frame for event in events for frame in encode(event)])

    async def end(self, messages: Messages) -> bytes:
        return DONE

    async def fail(self, error: GatewayError, messages: Messages) -> bytes:
        return frames([json.dumps(error.envelope()), "[DONE]"])

    async def interrupted(self, messages: Messages) -> None:
        return None


DONE = frames(["[DONE]"])


async def _check_window(request: web.Request, messages: Messages, tools: list[Any], params: dict[str, Any]) -> None:
    """The client sends its whole history, so only `disabled` applies: a 400 before anything goes
    upstream, rather than the upstream's own error (or a silent cut) for a history over the window."""
    app = request.app
    output = params.get("max_completion_tokens", params.get("max_tokens"))
    fixed = context_budget.fixed_tokens([*messages, *tools], output if isinstance(output, int) else None)
    if fixed <= context_budget.SMALLEST_WINDOW:
        return
    window = await app[appkeys.CONTEXT_WINDOWS].tokens(await app[appkeys.UPSTREAM].model())
    context_budget.fit([], complete=True, window=window, fixed=fixed, truncation="disabled", api="chat")


async def _complete(request: web.Request, agent_request: AgentRequest, model: str, *,
                    reasoning: bool) -> web.Response:
    return await run_whole(request.app, agent_request, _ChatWhole(model, reasoning))


async def _stream(request: web.Request, agent_request: AgentRequest, encoder: ChatChunkEncoder) -> web.StreamResponse:
    return await run_streamed(request, agent_request, _ChatStream(encoder), log=log)
