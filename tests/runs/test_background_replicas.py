"""Background responses across real `serve` processes (issue 28): two replicas on one PostgreSQL
(a stream started on A resumed on B with exactly the rest, a cancel on B stopping A's run, a
queued run taken by the replica with a free slot, kill -9 of A marked failed by B, a replica
that lost its run stopping it), and one SQLite gateway: SIGTERM (a run that ends within the grace
completes, the rest end incomplete, a queued one waits for the restarted gateway) and kill -9
(the restarted gateway marks the run failed).
The fake upstream runs in the test process; the SDK is the official `openai` one."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from tests.conftest import API_KEY
from tests.fakes.upstream import FakeUpstream, Reply
from tests.support.gateway_process import ServerProcess, gateway_env, start_gateway

AUTH = {"Authorization": f"Bearer {API_KEY}"}
ENDED = {"completed", "failed", "incomplete", "cancelled"}


def _env(home: Path, upstream: FakeUpstream, **extra: str) -> dict[str, str]:
    return gateway_env(home, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                              "API_SERVER_KEY": API_KEY, **extra})


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def replicas(tmp_path: Path, upstream: FakeUpstream, postgres_url: str) -> AsyncIterator[list[ServerProcess]]:
    started = list(await asyncio.gather(*(
        start_gateway(env=_env(tmp_path / name, upstream, API_SERVER_DATABASE_URL=postgres_url,
                               API_SERVER_MAX_CONCURRENT_RUNS="1"))
        for name in ("a", "b"))))
    for gateway in started:
        gateway.keep_draining()
    yield started
    await asyncio.gather(*(gateway.stop() for gateway in started))


def _sdk(gateway: ServerProcess) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gateway.base_url + "/v1", api_key=API_KEY, max_retries=0)


async def _create(http: aiohttp.ClientSession, gateway: ServerProcess, **body: Any) -> dict[str, Any]:
    async with http.post(gateway.base_url + "/v1/responses", headers=AUTH,
                         json={"model": "m", "input": "x", "background": True, **body}) as reply:
        assert reply.status == 200, await reply.text()
        return dict(await reply.json())


async def _get(http: aiohttp.ClientSession, gateway: ServerProcess, response_id: str) -> dict[str, Any]:
    async with http.get(f"{gateway.base_url}/v1/responses/{response_id}", headers=AUTH) as reply:
        assert reply.status == 200, await reply.text()
        return dict(await reply.json())


async def _until(http: aiohttp.ClientSession, gateway: ServerProcess, response_id: str, statuses: set[str], *,
                 within: float) -> dict[str, Any]:
    """Poll until the response reaches one of `statuses`: a deadline, not a measure of speed."""
    deadline = time.monotonic() + within
    while True:
        response = await _get(http, gateway, response_id)
        if response["status"] in statuses or time.monotonic() > deadline:
            return response
        await asyncio.sleep(0.1)


async def _upstream_called(upstream: FakeUpstream, count: int) -> None:
    async with asyncio.timeout(20):
        while len(upstream.requests) < count:
            await asyncio.sleep(0.02)


async def test_a_stream_started_on_a_resumes_on_b_with_exactly_the_rest(
        replicas: list[ServerProcess], upstream: FakeUpstream) -> None:
    a, b = replicas
    upstream.queue(Reply(text="one two three four five six seven eight nine ten", chunk_size=2, chunk_delay=0.05))
    sdk_a, sdk_b = _sdk(a), _sdk(b)
    try:
        stream = await sdk_a.responses.create(model="m", input="x", background=True, stream=True)
        seen = []
        async for event in stream:
            seen.append(event)
            if len(seen) == 5:
                break
        await stream.close()  # the client drops at event n; the run goes on, on A
        response_id = seen[0].response.id
        rest = [event async for event in await sdk_b.responses.retrieve(
            response_id, stream=True, starting_after=seen[-1].sequence_number)]
        assert [e.sequence_number for e in seen + rest] == list(range(len(seen) + len(rest)))
        assert rest[-1].type == "response.completed"
        assert rest[-1].response.output_text == "one two three four five six seven eight nine ten"
        again = [event async for event in await sdk_a.responses.retrieve(response_id, stream=True)]
        assert [e.model_dump() for e in again] == [e.model_dump() for e in seen + rest]
        assert (await sdk_b.responses.retrieve(response_id)).status == "completed"
    finally:
        await asyncio.gather(sdk_a.close(), sdk_b.close())


async def test_a_cancel_on_b_stops_the_run_on_a(replicas: list[ServerProcess], upstream: FakeUpstream,
                                                http: aiohttp.ClientSession) -> None:
    a, b = replicas
    upstream.queue(Reply(text="never finished", endless=True, chunk_delay=0.05))
    created = await _create(http, a)
    await _upstream_called(upstream, 1)
    sdk_b = _sdk(b)
    try:
        cancelled = await sdk_b.responses.cancel(created["id"])
    finally:
        await sdk_b.close()
    assert cancelled.status == "cancelled"
    async with asyncio.timeout(10):
        while not upstream.disconnects:  # A abandoned its upstream call
            await asyncio.sleep(0.02)
    assert (await _get(http, a, created["id"]))["status"] == "cancelled"


async def test_a_delete_on_b_stops_the_run_on_a_and_it_stays_deleted(
        replicas: list[ServerProcess], upstream: FakeUpstream, http: aiohttp.ClientSession) -> None:
    """Issue 42 (item 8): DELETE of a running background response cancels it first, on the replica
    that runs it; it does not come back `completed` (nor at all) afterwards."""
    a, b = replicas
    upstream.queue(Reply(text="never finished", endless=True, chunk_delay=0.05))
    created = await _create(http, a)
    await _upstream_called(upstream, 1)
    async with http.delete(f"{b.base_url}/v1/responses/{created['id']}", headers=AUTH) as reply:
        assert reply.status == 200, await reply.text()
        assert (await reply.json())["deleted"] is True
    async with asyncio.timeout(10):
        while not upstream.disconnects:  # A abandoned its upstream call
            await asyncio.sleep(0.02)
    await asyncio.sleep(1.0)  # anything A would still write has landed by now
    for gateway in (a, b):
        async with http.get(f"{gateway.base_url}/v1/responses/{created['id']}", headers=AUTH) as reply:
            assert reply.status == 404, await reply.text()


async def test_a_queued_run_is_taken_by_the_replica_with_a_free_slot(
        replicas: list[ServerProcess], upstream: FakeUpstream, http: aiohttp.ClientSession) -> None:
    a, b = replicas
    upstream.queue(Reply(text="a is busy", endless=True, chunk_delay=0.05),
                   Reply(text="b is busy", endless=True, chunk_delay=0.05),
                   Reply(text="the queued one, done", chunk_size=4, chunk_delay=0.02))
    busy_a = await _create(http, a)
    await _upstream_called(upstream, 1)
    busy_b = await _create(http, b)
    await _upstream_called(upstream, 2)
    queued = await _create(http, a, input="wait your turn")
    assert queued["status"] == "queued"
    async with http.post(f"{b.base_url}/v1/responses/{busy_b['id']}/cancel", headers=AUTH) as reply:
        assert (await reply.json())["status"] == "cancelled"
    done = await _until(http, a, queued["id"], ENDED, within=30)
    assert done["status"] == "completed", done
    assert done["output"][0]["content"][0]["text"] == "the queued one, done"
    assert (await _get(http, a, busy_a["id"]))["status"] == "in_progress"  # so B ran it
    assert "wait your turn" in json.dumps(upstream.requests[2]["messages"])
    async with http.post(f"{a.base_url}/v1/responses/{busy_a['id']}/cancel", headers=AUTH) as reply:
        assert (await reply.json())["status"] == "cancelled"


async def test_kill_9_of_the_replica_running_it_is_marked_failed_by_the_other_within_30_s(
        replicas: list[ServerProcess], upstream: FakeUpstream, http: aiohttp.ClientSession) -> None:
    a, b = replicas
    upstream.queue(Reply(text="lost with its gateway", endless=True, chunk_delay=0.05))
    created = await _create(http, a)
    await _upstream_called(upstream, 1)
    await a.kill()
    assert (await _get(http, b, created["id"]))["status"] == "in_progress"
    failed = await _until(http, b, created["id"], ENDED, within=30)
    assert failed["status"] == "failed", failed
    assert failed["error"]["code"] == "server_error" and "lease" in failed["error"]["message"]
    async with http.post(f"{b.base_url}/v1/responses/{created['id']}/cancel", headers=AUTH) as reply:
        assert (await reply.json())["status"] == "failed"  # an ended one comes back unchanged


async def test_sigterm_lets_a_run_finish_within_the_grace_stops_the_rest_incomplete_and_leaves_the_queue(
        tmp_path: Path, upstream: FakeUpstream, http: aiohttp.ClientSession) -> None:
    env = _env(tmp_path, upstream, API_SERVER_SHUTDOWN_GRACE="4", API_SERVER_MAX_CONCURRENT_RUNS="2")
    gateway = await start_gateway(env=env)
    gateway.keep_draining()
    upstream.queue(Reply(text="finished in time", chunk_size=1, chunk_delay=0.1),  # ~1.6 s
                   Reply(text="too long", endless=True, chunk_delay=0.05),
                   Reply(text="run by the restarted one", chunk_size=4, chunk_delay=0.02))
    quick = await _create(http, gateway)
    await _upstream_called(upstream, 1)
    slow = await _create(http, gateway)
    await _upstream_called(upstream, 2)
    queued = await _create(http, gateway, input="queued before the shutdown")
    assert queued["status"] == "queued"
    assert await gateway.stop(timeout=30) == 0
    # the quick run's end freed a slot during the grace: a stopping gateway started nothing with it
    assert len(upstream.requests) == 2
    restarted = await start_gateway(env=env)  # the same SQLite file
    restarted.keep_draining()
    try:
        assert (await _get(http, restarted, quick["id"]))["status"] == "completed"
        cut = await _get(http, restarted, slow["id"])
        assert cut["status"] == "incomplete" and cut["incomplete_details"] == {"reason": "gateway_shutdown"}
        done = await _until(http, restarted, queued["id"], ENDED, within=30)
        assert done["status"] == "completed" and done["output"][0]["content"][0]["text"] == "run by the restarted one"
    finally:
        await restarted.stop()


async def test_kill_9_on_sqlite_the_restarted_gateway_marks_the_run_failed(
        tmp_path: Path, upstream: FakeUpstream, http: aiohttp.ClientSession) -> None:
    env = _env(tmp_path, upstream)
    gateway = await start_gateway(env=env)
    gateway.keep_draining()
    upstream.queue(Reply(text="lost with its gateway", endless=True, chunk_delay=0.05))
    created = await _create(http, gateway)
    await _upstream_called(upstream, 1)
    await gateway.kill()
    restarted = await start_gateway(env=env)
    restarted.keep_draining()
    try:
        failed = await _until(http, restarted, created["id"], ENDED, within=30)
        assert failed["status"] == "failed" and "lease" in failed["error"]["message"], failed
    finally:
        await restarted.stop()


async def test_a_replica_that_lost_its_run_stops_it_without_writing_over_the_failure(
        replicas: list[ServerProcess], upstream: FakeUpstream, http: aiohttp.ClientSession) -> None:
    a, b = replicas
    upstream.queue(Reply(text="frozen", endless=True, chunk_delay=0.05))
    created = await _create(http, a)
    await _upstream_called(upstream, 1)
    a.proc.send_signal(signal.SIGSTOP)  # A stops renewing, as a stalled node would
    try:
        failed = await _until(http, b, created["id"], ENDED, within=30)
    finally:
        a.proc.send_signal(signal.SIGCONT)
    assert failed["status"] == "failed", failed
    async with asyncio.timeout(20):
        while not upstream.disconnects:  # A learnt it lost the run (its next renew) and stopped it
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    after = await _get(http, a, created["id"])
    assert after["status"] == "failed" and after["error"] == failed["error"]  # nothing of A's written over it
