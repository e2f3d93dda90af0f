"""Background responses and the limits (issue 28): queued past the run slots and started when one
frees (none lost, 429 past API_SERVER_MAX_QUEUED_RUNS, a queued one cancelled never starts), a
key's concurrent-runs limit held for the run's whole life, another key's background response
unknown to GET, resume and cancel, the bound on a run's events, and the reason a shutdown gives.
One in-process gateway over a real SQLite file and the fake upstream."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai

from gateway.http import appkeys
from gateway.store.sqlite.store import SQLiteResponseStore
from tests.conftest import API_KEY
from tests.fakes.upstream import FakeUpstream, Reply, text
from tests.keys.test_keys_isolation import bearer, make_key

AUTH = bearer(API_KEY)
ENDED = {"completed", "failed", "incomplete", "cancelled"}


async def _status(client: Any, response_id: str, headers: dict[str, str] = AUTH) -> dict[str, Any]:
    async with client.get(f"/v1/responses/{response_id}", headers=headers) as reply:
        assert reply.status == 200, await reply.text()
        return dict(await reply.json())


async def _until(client: Any, response_id: str, statuses: set[str], headers: dict[str, str] = AUTH) -> dict[str, Any]:
    for _ in range(1000):
        response = await _status(client, response_id, headers)
        if response["status"] in statuses:
            return response
        await asyncio.sleep(0.02)
    raise AssertionError(f"{response_id} stayed {response['status']}")


async def _create(client: Any, headers: dict[str, str] = AUTH, **body: Any) -> tuple[int, dict[str, Any]]:
    async with client.post("/v1/responses", json={"model": "m", "input": "x", "background": True, **body},
                           headers=headers) as reply:
        return reply.status, await reply.json()


async def test_past_the_run_slots_background_requests_wait_queued_and_all_complete(
        make_client: Any, upstream: FakeUpstream) -> None:
    client = await make_client(api_key=API_KEY, max_concurrent_runs=1, max_queued_runs=3)
    upstream.queue(*[Reply(text=f"answer {n}", chunk_size=1, chunk_delay=0.1) for n in range(4)])
    created = [await _create(client, input=f"question {n}") for n in range(4)]
    assert [status for status, _ in created] == [200] * 4
    assert [body["status"] for _, body in created] == ["in_progress", "queued", "queued", "queued"], created
    assert (await _status(client, created[1][1]["id"]))["status"] == "queued"  # GET says so too
    status, refused = await _create(client)  # the queue is full: 429, in the envelope
    assert status == 429 and refused["error"]["code"] == "rate_limit_exceeded"
    assert "API_SERVER_MAX_QUEUED_RUNS" in refused["error"]["message"]
    done = [await _until(client, body["id"], ENDED) for _, body in created]
    assert [d["status"] for d in done] == ["completed"] * 4
    # each ran its own request, once, in the order they came
    assert [d["output"][0]["content"][0]["text"] for d in done] == [f"answer {n}" for n in range(4)]
    asked = [json.dumps(r["messages"]) for r in upstream.requests]
    assert [next(n for n in range(4) if f"question {n}" in a) for a in asked] == [0, 1, 2, 3]


async def test_a_plain_request_past_the_run_slots_is_still_refused(make_client: Any, upstream: FakeUpstream) -> None:
    client = await make_client(api_key=API_KEY, max_concurrent_runs=1)
    upstream.queue(Reply(text="slow", endless=True, chunk_delay=0.05))
    status, running = await _create(client)
    assert status == 200
    async with client.post("/v1/responses", json={"model": "m", "input": "y"}, headers=AUTH) as reply:
        assert reply.status == 429 and "Retry-After" in reply.headers
    async with client.post(f"/v1/responses/{running['id']}/cancel", headers=AUTH) as reply:
        assert (await reply.json())["status"] == "cancelled"


async def test_a_queued_response_cancelled_never_starts(make_client: Any, upstream: FakeUpstream) -> None:
    client = await make_client(api_key=API_KEY, max_concurrent_runs=1)
    upstream.queue(Reply(text="slow", endless=True, chunk_delay=0.05), text("must never run"))
    _, first = await _create(client, input="first")
    _, queued = await _create(client, input="second")
    assert queued["status"] == "queued"
    async with client.post(f"/v1/responses/{queued['id']}/cancel", headers=AUTH) as reply:
        assert reply.status == 200
        assert (await reply.json())["status"] == "cancelled"
    async with client.post(f"/v1/responses/{first['id']}/cancel", headers=AUTH) as reply:
        assert (await reply.json())["status"] == "cancelled"
    await asyncio.sleep(0.3)  # a claim would have started it by now: the slot is free
    assert (await _status(client, queued["id"]))["status"] == "cancelled"
    assert len(upstream.requests) == 1


async def test_a_queued_streamed_response_streams_its_events_once_it_starts(
        make_client: Any, upstream: FakeUpstream) -> None:
    client = await make_client(api_key=API_KEY, max_concurrent_runs=1)
    upstream.queue(Reply(text="first", chunk_size=2, chunk_delay=0.05), text("second answer"))
    _, first = await _create(client, input="first")
    sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=API_KEY, max_retries=0)
    try:
        stream = await sdk.responses.create(model="m", input="second", background=True, stream=True)
        events = [event async for event in stream]
    finally:
        await sdk.close()
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert events[-1].response.output_text == "second answer"
    assert (await _status(client, first["id"]))["status"] == "completed"


async def test_a_keys_concurrent_runs_limit_holds_for_the_background_runs_life(
        tmp_path: Path, make_client: Any, upstream: FakeUpstream) -> None:
    one = await make_key(tmp_path, "one-at-a-time", "--max-concurrent", "1")
    client = await make_client()
    upstream.queue(Reply(text="slow", endless=True, chunk_delay=0.05), text("after"))
    status, running = await _create(client, bearer(one))
    assert status == 200 and running["status"] == "in_progress"
    async with client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                           headers=bearer(one)) as reply:
        assert reply.status == 429, await reply.text()  # the create returned; its run still holds the slot
        assert "one-at-a-time" in (await reply.json())["error"]["message"]
    async with client.post(f"/v1/responses/{running['id']}/cancel", headers=bearer(one)) as reply:
        assert (await reply.json())["status"] == "cancelled"
    async with client.post("/v1/responses", json={"model": "m", "input": "y"}, headers=bearer(one)) as reply:
        assert reply.status == 200  # given back when the run ended


async def test_another_keys_background_response_is_unknown_to_get_resume_and_cancel(
        tmp_path: Path, make_client: Any, upstream: FakeUpstream) -> None:
    alice, bob = await make_key(tmp_path, "alice"), await make_key(tmp_path, "bob")
    client = await make_client()
    upstream.queue(Reply(text="alice's", endless=True, chunk_delay=0.05))
    _, running = await _create(client, bearer(alice))
    unknown = "resp_" + "0" * 32
    for method, path in (("GET", "/v1/responses/{}"), ("GET", "/v1/responses/{}?stream=true&starting_after=0"),
                         ("POST", "/v1/responses/{}/cancel")):
        answers = []
        for response_id in (running["id"], unknown):
            async with client.request(method, path.format(response_id), headers=bearer(bob)) as reply:
                answers.append((reply.status, (await reply.text()).replace(response_id, "<id>")))
        assert answers[0] == answers[1] and answers[0][0] == 404, (method, path, answers)
    assert (await _status(client, running["id"], bearer(alice)))["status"] == "in_progress"  # bob's cancel did nothing
    async with client.post(f"/v1/responses/{running['id']}/cancel", headers=bearer(alice)) as reply:
        assert (await reply.json())["status"] == "cancelled"


async def test_a_run_past_its_events_bound_ends_failed_saying_so(make_client: Any, upstream: FakeUpstream) -> None:
    client = await make_client(api_key=API_KEY, max_run_events_mb=0.02)  # 20 kB of events
    upstream.queue(Reply(text="word " * 20_000, chunk_size=500, chunk_delay=0.01))
    _, created = await _create(client, stream=False)
    failed = await _until(client, created["id"], ENDED)
    assert failed["status"] == "failed"
    assert "API_SERVER_MAX_RUN_EVENTS_MB" in failed["error"]["message"]
    async with client.get(f"/v1/responses/{created['id']}", params={"stream": "true"}, headers=AUTH) as reply:
        frames = [json.loads(line[6:]) for line in (await reply.text()).splitlines() if line.startswith("data: ")]
    assert [frame["sequence_number"] for frame in frames] == list(range(len(frames)))  # no gap
    assert frames[-1]["type"] == "response.failed"
    # stopped near the bound: the deltas kept are about 20 kB (the closing events repeat the text so far)
    assert sum(len(json.dumps(f)) for f in frames if f["type"] == "response.output_text.delta") < 30_000
    assert len(frames[-1]["response"]["output"][0]["content"][0]["text"]) < 20_000


async def test_a_run_cut_by_shutdown_says_why_in_incomplete_details(make_client: Any, upstream: FakeUpstream) -> None:
    first = await make_client(api_key=API_KEY)
    upstream.queue(Reply(text="cut by the shutdown", endless=True, chunk_delay=0.05))
    _, created = await _create(first)
    while not upstream.requests:
        await asyncio.sleep(0.01)
    await first.close()
    second = await make_client(api_key=API_KEY)  # the same SQLite file
    sdk = openai.AsyncOpenAI(base_url=str(second.make_url("/v1")), api_key=API_KEY, max_retries=0)
    try:
        response = await sdk.responses.retrieve(created["id"])
    finally:
        await sdk.close()
    assert response.status == "incomplete"
    assert response.incomplete_details is not None and response.incomplete_details.reason == "gateway_shutdown"


async def test_a_queued_run_whose_previous_response_is_gone_when_it_starts_ends_failed(
        make_client: Any, upstream: FakeUpstream) -> None:
    client = await make_client(api_key=API_KEY, max_concurrent_runs=1)
    upstream.queue(text("the first turn"), Reply(text="slow", endless=True, chunk_delay=0.05))
    async with client.post("/v1/responses", json={"model": "m", "input": "x"}, headers=AUTH) as reply:
        previous = (await reply.json())["id"]
    _, busy = await _create(client)
    _, queued = await _create(client, previous_response_id=previous)
    assert queued["status"] == "queued"
    async with client.delete(f"/v1/responses/{previous}", headers=AUTH) as reply:
        assert reply.status == 200
    async with client.post(f"/v1/responses/{busy['id']}/cancel", headers=AUTH) as reply:
        assert (await reply.json())["status"] == "cancelled"
    failed = await _until(client, queued["id"], ENDED)
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "previous_response_not_found" and previous in failed["error"]["message"]
    async with client.get(f"/v1/responses/{queued['id']}", params={"stream": "true"}, headers=AUTH) as reply:
        kinds = [line[7:] for line in (await reply.text()).splitlines() if line.startswith("event: ")]
    assert kinds == ["response.created", "response.in_progress", "response.failed"]


async def test_a_resume_after_the_events_were_dropped_says_they_are_gone(
        make_client: Any, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await make_client(api_key=API_KEY)
    upstream.queue(text("kept a while"))
    _, created = await _create(client)
    await _until(client, created["id"], ENDED)
    # the events' ten minutes, passed: the sweep's own call, from another connection to the file
    other = SQLiteResponseStore(client.app[appkeys.SETTINGS].db_path, 100)
    await other.open()
    try:
        assert await other.runs.purge_finished(0) == 1
    finally:
        await other.close()
    async with client.get(f"/v1/responses/{created['id']}", params={"stream": "true"}, headers=AUTH) as reply:
        assert reply.status == 400
        error = (await reply.json())["error"]
    assert error["param"] == "stream" and "no longer available" in error["message"]
    assert (await _status(client, created["id"]))["status"] == "completed"  # the response itself stays
