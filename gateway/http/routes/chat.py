"""POST /v1/chat/completions: parse, run the agent, render chat objects or chunk streams."""

from __future__ import annotations

import contextlib
import json
import logging

from aiohttp import web

from gateway.agent.loop import AgentRequest
from gateway.errors import GatewayError
from gateway.http import appkeys
from gateway.http.runs import Deadline, run_timeout_error, run_to_end
from gateway.http.sse import Keepalive, LastBatch, SSEWriter, batched_with_keepalive
from gateway.wire import json_out
from gateway.wire.chat import ChatChunkEncoder, ChatCompletionBuilder, parse_chat_request
from gateway.wire.checks import read_json_object

log = logging.getLogger("agent_gateway.chat")
routes = web.RouteTableDef()


@routes.post("/v1/chat/completions")
async def chat_completions(request: web.Request) -> web.StreamResponse:
    chat = parse_chat_request(await read_json_object(request))
    settings = request.app[appkeys.SETTINGS]
    agent_request = AgentRequest(
        messages=chat.messages, client_tools=chat.client_tools, params=chat.params, stream=chat.stream
    )
    model = chat.model or settings.model_name
    with request.app[appkeys.LIMITER].slot():
        if chat.stream:
            encoder = ChatChunkEncoder(model, include_usage=chat.include_usage,
                                       inline_markers=settings.tool_progress == "inline")
            return await _stream(request, agent_request, encoder)
        return await _complete(request, agent_request, model)


async def _complete(request: web.Request, agent_request: AgentRequest, model: str) -> web.Response:
    builder = ChatCompletionBuilder(model)
    await run_to_end(request.app, agent_request, builder.add)
    return web.Response(body=json_out.dumps(builder.result()), content_type="application/json")


async def _stream(request: web.Request, agent_request: AgentRequest, encoder: ChatChunkEncoder) -> web.StreamResponse:
    """Headers wait for the first event (or the first keepalive tick), so a fault before any
    output still gets its real HTTP status; after that, faults become an error frame."""
    settings = request.app[appkeys.SETTINGS]
    sse = SSEWriter(request)
    did_work = False
    # Events come in batches (whatever the agent produced meanwhile) so that a burst leaves in one
    # write, not one syscall per chunk; a batch never waits for more, so nothing is delayed. The
    # first event leaves alone (the first token is not held behind the rest of its burst), and the
    # last batch leaves with `[DONE]` and the end of the body.
    events = batched_with_keepalive(request.app[appkeys.AGENT].run(agent_request), settings.keepalive_interval,
                                    first_alone=True)
    tail: list[str] = []  # the last batch's frames, sent with [DONE] and the end of the body
    try:
        async with contextlib.aclosing(events), Deadline(settings.run_timeout):
            async for batch in events:
                if isinstance(batch, Keepalive):
                    await sse.comment()
                    continue
                frames: list[str] = []
                for item in batch:
                    if not did_work:
                        did_work = True
                        frames.append(encoder.start())
                    frames += encoder.encode(item)
                if isinstance(batch, LastBatch):
                    tail = frames
                else:
                    await sse.data_many(frames)
    except (ConnectionResetError, ConnectionError):
        log.info("client went away mid-stream; agent run cancelled")
        return sse.response
    except TimeoutError:
        await _fail(sse, run_timeout_error(settings.run_timeout), did_work)
    except GatewayError as exc:
        await _fail(sse, exc, did_work)
    else:
        # the last frames leave with the end of the body: one write, not three
        try:
            return await sse.finish(*(tail if did_work else [encoder.start()]), "[DONE]")
        except ConnectionError:  # gone just before the end: as mid-stream, not an error to log
            log.info("client went away at the end of the stream")
            return sse.response
    return await sse.finish()


async def _fail(sse: SSEWriter, error: GatewayError, did_work: bool) -> None:
    if not sse.started:
        if did_work:
            error.should_retry = False
        raise error
    log.warning("agent run failed mid-stream: %s", error.message)
    with contextlib.suppress(ConnectionError):
        await sse.data(json.dumps(error.envelope()))
        await sse.data("[DONE]")
