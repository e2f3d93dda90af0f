"""Running the agent for a route: one loop for both wire formats, streamed or whole.

A route hands the runner a *reply*, the part that knows its wire format: a `WholeReply` (collects
events, renders one JSON object) or a `StreamReply` (turns events into SSE bytes). The runner owns
everything else, the same for every route and mode: AGENT_RUN_TIMEOUT, batching and keepalives,
when the status line leaves, what a failure looks like before and after it, the client going away,
and `x-should-retry`.

Before the first byte a failure is a real HTTP status with the OpenAI envelope. After it, every
failure (the agent's, the run timeout, a store that refuses the finished response) becomes the
reply's closing frames (chat: an error frame and `[DONE]`; Responses: `response.failed`) and a
clean end of the chunked body; nothing raised after that point may reach the front door, which
would write a second HTTP head into the open body.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from aiohttp import web

from gateway.agent.events import AgentEvent, Finished, ToolCallStarted
from gateway.agent.loop import AgentRequest
from gateway.errors import GatewayError, UpstreamTimeoutError
from gateway.http import appkeys
from gateway.http.sse import SSEWriter
from gateway.http.stream_relay import StreamRelay

log = logging.getLogger("agent_gateway.runs")
R = TypeVar("R", covariant=True)
#: The chat messages a turn added, as the agent keeps them (`Finished.messages`, `AgentRun.messages`).
Messages = Sequence[dict[str, Any]]
#: A research run's stream hears from the gateway at least this often (a `: keepalive` at worst),
#: so that no proxy takes it for idle while the model writes the report.
RESEARCH_KEEPALIVE_SECONDS = 5.0


def run_timeout_error(seconds: float) -> UpstreamTimeoutError:
    return UpstreamTimeoutError(f"the agent run took longer than AGENT_RUN_TIMEOUT ({seconds:g} s)",
                                code="run_timeout")


class WholeReply(Protocol[R]):
    """A non-streamed reply: takes every event, then renders (and, for Responses, stores) itself."""

    def feed(self, event: AgentEvent) -> object: ...

    async def end(self, messages: Messages) -> R:
        """The reply after a clean run, given the turn's transcript; may raise GatewayError (e.g.
        the store refused it)."""
        ...


class StreamReply(Protocol):
    """A streamed reply's wire format: every method returns the SSE bytes to send."""

    def begin(self) -> bytes:
        """The frames that open the stream, sent with the first write of any kind."""
        ...

    def encode(self, events: list[AgentEvent]) -> bytes: ...

    async def end(self, messages: Messages) -> bytes:
        """The closing frames after a clean run, given the turn's transcript; may raise
        GatewayError (e.g. the store refused the finished response), after which `fail` is
        called instead."""
        ...

    async def fail(self, error: GatewayError, messages: Messages) -> bytes:
        """The closing frames after a failure once the stream has started, given what the turn
        had added by then. Must not raise."""
        ...

    async def interrupted(self, messages: Messages) -> None:
        """The client went away (or the server is shutting down) mid-stream. Must not raise."""
        ...


def _no_retry_after_work(error: GatewayError, worked: bool) -> GatewayError:
    if worked:
        error.should_retry = False
    return error


async def run_whole(app: web.Application, agent_request: AgentRequest, reply: WholeReply[R]) -> R:
    """Run one turn for a non-streamed reply. A failure anywhere, the reply's own `end` included
    (a tool ran, then the store failed), is an HTTP error; after work it says `x-should-retry: false`."""
    deadlines = app[appkeys.RUN_DEADLINES]  # AGENT_RUN_TIMEOUT, without a timer per run (runs/deadlines.py)
    agent_run = app[appkeys.AGENT].run(agent_request)
    worked = False
    finished: Finished | None = None
    try:
        run = deadlines.enter()
        try:
            async for event in agent_run.events:
                worked = worked or isinstance(event, ToolCallStarted)
                if isinstance(event, Finished):
                    finished = event
                reply.feed(event)
        except BaseException as exc:
            if deadlines.leave(run, exc):
                raise TimeoutError from exc
            raise
        deadlines.leave(run)
        return await reply.end(finished.messages if finished else agent_run.messages)
    except TimeoutError as exc:
        raise _no_retry_after_work(run_timeout_error(deadlines.timeout), worked) from exc
    except GatewayError as exc:
        _no_retry_after_work(exc, worked)
        raise


async def run_streamed(request: web.Request, agent_request: AgentRequest, reply: StreamReply, *,
                       log: logging.Logger = log) -> web.StreamResponse:
    """Run one turn as an SSE stream. Headers wait for the first event (or the first keepalive
    tick), so a fault before any output still gets its real HTTP status; after that, faults are
    the reply's closing frames and a clean end of body. `log`: the route's logger, so that a
    mid-stream failure is logged under the route it happened on."""
    app = request.app
    settings = app[appkeys.SETTINGS]
    sse = SSEWriter(request)
    opened = False

    def opening() -> bytes:
        nonlocal opened
        if opened:
            return b""
        opened = True
        return reply.begin()

    # Each event leaves as it comes (one write per upstream piece: a burst of frames is one event),
    # written by the relay's own task; this task writes the keepalives while the run is silent.
    # The last event's frames leave with the closing frames and the end of the body.
    agent_run = app[appkeys.AGENT].run(agent_request)
    interval = settings.keepalive_interval
    if agent_request.research is not None:  # long silences (a report being written) are the rule there
        interval = min(interval, RESEARCH_KEEPALIVE_SECONDS)
    relay = StreamRelay(sse, agent_run.events, reply.encode, opening, interval)
    error: GatewayError
    try:
        async with asyncio.timeout(settings.run_timeout):
            await relay.run()
    except (ConnectionError, asyncio.CancelledError) as exc:
        log.info("client went away mid-stream; agent run cancelled")
        await reply.interrupted(agent_run.messages)
        if isinstance(exc, asyncio.CancelledError):
            raise
        return sse.response
    except TimeoutError:
        error = run_timeout_error(settings.run_timeout)
    except GatewayError as exc:
        error = exc
    except Exception:
        if not sse.started:
            raise  # the front door answers it: a 500, the traceback in the log
        error = _unexpected(log)
    else:
        try:
            finished = relay.finished
            closing = await reply.end(finished.messages if finished else agent_run.messages)
        except GatewayError as exc:
            error = exc
        except Exception:
            if not sse.started:
                raise
            error = _unexpected(log)
        else:
            return await _finish(sse, opening() + relay.tail + closing, log)
    if not sse.started:
        raise _no_retry_after_work(error, relay.worked)
    log.warning("agent run failed mid-stream: %s", error.detail or error.message)
    return await _finish(sse, relay.tail + await reply.fail(error, agent_run.messages), log)


def _unexpected(log: logging.Logger) -> GatewayError:
    """A bug, not a fault we know, after the first byte: logged with its traceback here (the
    front door can no longer answer it), and it ends the stream like any failure."""
    log.exception("unexpected error mid-stream")
    return GatewayError("internal error; see the gateway's log", code="internal_error")


async def _finish(sse: SSEWriter, body: bytes, log: logging.Logger) -> web.StreamResponse:
    """The closing frames leave with the end of the chunked body, in one write."""
    try:
        await sse.finish(body)
    except (ConnectionError, RuntimeError):  # gone just before the end: as mid-stream, not an error
        log.info("client went away at the end of the stream")
    return sse.response
