"""Every upstream fault, for chat and responses, plain and streamed: the client gets a clear error
(a stream ends with an error frame then [DONE], or `response.failed`), nothing is left running or
open, and the next request works."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.http.app import create_app
from tests.fakes.tools import LookupTool
from tests.fakes.upstream import Reply, error, text
from tests.support.faults import MODE_IDS, MODES, ask, free_port
from tests.support.live_gateway import SERVE_RUNNER_OPTIONS
from tests.support.resources import no_leaks

pytestmark = pytest.mark.parametrize(("api", "stream"), MODES, ids=MODE_IDS)


@pytest.fixture
def serve(aiohttp_client: Any, make_settings: Any) -> Any:
    """A gateway test client run with `agent-gateway serve`'s runner options."""
    async def make(**overrides: Any) -> Any:
        app = create_app(make_settings(**overrides), tools=[LookupTool()])
        client = await aiohttp_client(app, server_kwargs=SERVE_RUNNER_OPTIONS)
        return client
    return make


async def warmed(serve: Any, upstream: Any, api: str, stream: bool, **overrides: Any) -> Any:
    """A client that has made one good request, so pools and connections exist before counting."""
    client = await serve(**overrides)
    upstream.queue(text("warm"))
    assert (await ask(client, api, stream)).ok
    return client


async def fault_then_recover(client: Any, upstream: Any, api: str, stream: bool, fault: Reply | None,
                             *, times: int = 3) -> list[Any]:
    """Hit the fault `times` times, then ask normally; every resource must come back."""
    outcomes = []
    async with no_leaks():
        for _ in range(times):
            if fault is not None:
                upstream.queue(fault)
            outcomes.append(await ask(client, api, stream))
        upstream.queue(text("still here"))
        after = await ask(client, api, stream)
        assert after.ok and after.text == "still here", after
    return outcomes


def assert_clear_error(outcome: Any, status: int, says: str, stream: bool, *, started: bool = False) -> None:
    assert outcome.error is not None, outcome
    assert says in outcome.error["message"], outcome.error
    # the upstream's address is the operator's business: the log has it, a chat user never sees it
    assert "127.0.0.1" not in outcome.error["message"] and "/v1" not in outcome.error["message"], outcome.error
    # A fault before any output keeps its HTTP status; after output started, the stream carries it.
    assert outcome.status == (200 if stream and started else status), outcome


async def test_connection_refused(serve, upstream, api, stream, caplog):
    address = f"http://127.0.0.1:{free_port()}/v1"
    client = await serve(llm_base_url=address)
    async with no_leaks():
        for _ in range(3):
            assert_clear_error(await ask(client, api, stream), 502, "unreachable", stream)
    assert any(address in r.getMessage() for r in caplog.records if r.name == "agent_gateway.upstream")


async def test_slow_first_byte_past_llm_timeout(serve, upstream, api, stream):
    client = await warmed(serve, upstream, api, stream, llm_timeout=0.2)
    for outcome in await fault_then_recover(client, upstream, api, stream, Reply(delay=1.0), times=2):
        assert_clear_error(outcome, 504, "timed out", stream)


async def test_headers_then_a_silent_body_past_llm_timeout(serve, upstream, api, stream):
    client = await warmed(serve, upstream, api, stream, llm_timeout=0.2)
    for outcome in await fault_then_recover(client, upstream, api, stream, Reply(body_delay=1.0), times=2):
        assert_clear_error(outcome, 504, "timed out", stream)


async def test_reply_that_stops_mid_way(serve, upstream, api, stream):
    client = await warmed(serve, upstream, api, stream)
    fault = Reply(text="This answer will be cut off somewhere", chunk_size=4, drop_after=3) if stream \
        else Reply(text="This answer will be cut off", cut_body_at=40)
    for outcome in await fault_then_recover(client, upstream, api, stream, fault):
        assert_clear_error(outcome, 502, "mid-reply", stream, started=True)


async def test_malformed_sse_lines(serve, upstream, api, stream):
    client = await warmed(serve, upstream, api, stream)
    raw = (b": a comment\r\nevent: odd\r\nnonsense line\r\n"
           b'data: {"choices": [{"delta": {"content": "ok"}}]}\r\n\r\ndata: {broken\r\n\r\n')
    fault = Reply(raw=raw, raw_content_type="text/event-stream")
    for outcome in await fault_then_recover(client, upstream, api, stream, fault):
        if stream:
            assert_clear_error(outcome, 502, "malformed", stream, started=True)
            assert outcome.text == "ok"
        else:
            assert_clear_error(outcome, 502, "not JSON", stream)


@pytest.mark.parametrize("frame", [b'{"choices": "x"}', b'{"choices": [1]}', b'{"choices": [{"delta": "x"}]}',
                                   b'{"choices": [{"delta": {"tool_calls": [7]}}]}', b'{"usage": "many"}'])
async def test_well_formed_json_of_the_wrong_shape_is_a_clear_error_not_a_500(serve, upstream, api, stream, frame):
    client = await warmed(serve, upstream, api, stream)
    fault = Reply(raw=b"data: " + frame + b"\n\n", raw_content_type="text/event-stream") if stream \
        else Reply(raw=frame.replace(b'"delta"', b'"message"'))
    for outcome in await fault_then_recover(client, upstream, api, stream, fault, times=1):
        assert_clear_error(outcome, 502, "upstream model", stream)


async def test_a_10_mb_single_chunk_arrives_whole_in_short_lines(serve, upstream, api, stream):
    client = await warmed(serve, upstream, api, stream)
    big = "x" * 10_000_000
    async with no_leaks():
        upstream.queue(Reply(text=big, chunk_size=len(big)))
        outcome = await ask(client, api, stream)
        assert outcome.ok and outcome.text == big
        # aiohttp-based clients fail on lines over 128 KiB. A Responses stream's closing events carry
        # the whole text by design (as OpenAI's do); its deltas are cut like chat's.
        assert outcome.max_line < (64 * 1024 if api == "chat" else len(big) * 2)
        assert outcome.max_delta <= 4096
        upstream.queue(text("still here"))
        assert (await ask(client, api, stream)).text == "still here"


async def test_429_keeps_its_retry_after(serve, upstream, api, stream):
    client = await warmed(serve, upstream, api, stream)
    fault = error(429, "slow down", headers={"Retry-After": "7"})
    for outcome in await fault_then_recover(client, upstream, api, stream, fault):
        assert_clear_error(outcome, 429, "slow down", stream)
        assert outcome.headers["Retry-After"] == "7"


async def test_500_is_a_502_naming_the_upstream_message(serve, upstream, api, stream):
    client = await warmed(serve, upstream, api, stream)
    for outcome in await fault_then_recover(client, upstream, api, stream, error(500, "GPU on fire")):
        assert_clear_error(outcome, 502, "GPU on fire", stream)


async def test_invalid_json_body(serve, upstream, api, stream):
    client = await warmed(serve, upstream, api, stream)
    for outcome in await fault_then_recover(client, upstream, api, stream, Reply(raw=b"<html>oops</html>")):
        assert_clear_error(outcome, 502, "not JSON", stream)


async def test_endless_reply_is_cut_by_the_run_timeout(serve, upstream, api, stream):
    client = await warmed(serve, upstream, api, stream, run_timeout=0.5, keepalive_interval=0.1)
    outcomes = await fault_then_recover(client, upstream, api, stream, Reply(endless=True), times=2)
    for outcome in outcomes:
        assert_clear_error(outcome, 504, "AGENT_RUN_TIMEOUT", stream, started=True)
        # response.failed uses OpenAI's own error codes for a response object; the message says why.
        assert outcome.error["code"] == ("server_error" if (api, stream) == ("responses", True) else "run_timeout")
    assert upstream.disconnects >= 2 and upstream.active == 0
