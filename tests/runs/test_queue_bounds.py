"""The queue's bounds per key (issue 42, item 6 and a Low item): a queued run starts only with its
key's slot free (`--max-concurrent`, whatever the replica's free slots), a key holds at most its
share of the queue, and a few slow bodies read past the run slots cannot close the queue for long.
One in-process gateway over a real SQLite file and the fake upstream."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.conftest import API_KEY
from tests.fakes.upstream import FakeUpstream, Reply
from tests.keys.test_keys_isolation import bearer, make_key
from tests.runs.test_background_limits import ENDED, _create, _status, _until

AUTH = bearer(API_KEY)


def _endless(label: str) -> Reply:
    return Reply(text=label, endless=True, chunk_delay=0.05)


async def _cancel(client: Any, response_id: str, headers: dict[str, str]) -> None:
    async with client.post(f"/v1/responses/{response_id}/cancel", headers=headers) as reply:
        assert (await reply.json())["status"] in ENDED


async def test_a_queued_run_waits_for_its_keys_slot_even_with_replica_slots_free(
        tmp_path: Path, make_client: Any, upstream: FakeUpstream) -> None:
    one = await make_key(tmp_path, "one-at-a-time", "--max-concurrent", "1")
    other = await make_key(tmp_path, "other")
    client = await make_client(max_concurrent_runs=2, max_queued_runs=8)
    upstream.queue(*[_endless(f"run {n}") for n in range(4)])
    busy = [(await _create(client, bearer(other)))[1] for _ in range(2)]
    assert [b["status"] for b in busy] == ["in_progress", "in_progress"]
    waiting = [(await _create(client, bearer(one), input=f"mine {n}"))[1] for n in range(2)]
    assert [w["status"] for w in waiting] == ["queued", "queued"]
    for b in busy:  # two replica slots free: only one of the key's runs may take one
        await _cancel(client, b["id"], bearer(other))
    first = await _until(client, waiting[0]["id"], {"in_progress"}, bearer(one))
    assert first["status"] == "in_progress"
    await asyncio.sleep(1.0)
    assert (await _status(client, waiting[1]["id"], bearer(one)))["status"] == "queued"
    async with client.post("/v1/chat/completions", headers=bearer(one), json={
            "model": "m", "messages": [{"role": "user", "content": "hi"}]}) as reply:
        assert reply.status == 429  # the key's one slot is its queued run's
    await _cancel(client, waiting[0]["id"], bearer(one))
    assert (await _until(client, waiting[1]["id"], {"in_progress"}, bearer(one)))["status"] == "in_progress"
    await _cancel(client, waiting[1]["id"], bearer(one))
    # the key's counter is back at zero, not below: one run at a time still
    upstream.queue(_endless("again"), _endless("not now"))
    status, again = await _create(client, bearer(one))
    assert status == 200 and again["status"] == "in_progress"
    async with client.post("/v1/chat/completions", headers=bearer(one), json={
            "model": "m", "messages": [{"role": "user", "content": "hi"}]}) as reply:
        assert reply.status == 429, await reply.text()
    await _cancel(client, again["id"], bearer(one))


async def test_a_key_holds_at_most_its_share_of_the_queue(
        tmp_path: Path, make_client: Any, upstream: FakeUpstream) -> None:
    alice, bob = await make_key(tmp_path, "alice"), await make_key(tmp_path, "bob")
    client = await make_client(max_concurrent_runs=1, max_queued_runs=4)  # two keys: two places each
    upstream.queue(_endless("holds the slot"))
    _, running = await _create(client, bearer(alice))
    assert running["status"] == "in_progress"
    for n in range(2):
        status, body = await _create(client, bearer(alice), input=f"a{n}")
        assert status == 200 and body["status"] == "queued", body
    status, refused = await _create(client, bearer(alice), input="one too many")
    assert status == 429, refused
    assert refused["error"]["code"] == "rate_limit_exceeded" and "share" in refused["error"]["message"]
    status, body = await _create(client, bearer(bob), input="bob's place is his")
    assert status == 200 and body["status"] == "queued", body
    await _cancel(client, running["id"], bearer(alice))


async def _slow_body(client: Any) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A /v1/responses whose headers declare a small body that never comes."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    writer.write(f"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 f"Authorization: Bearer {API_KEY}\r\nContent-Length: 200\r\n\r\n".encode() + b'{"input": ')
    await writer.drain()
    return reader, writer


async def test_four_slow_bodies_do_not_close_the_queue_for_the_whole_body_timeout(
        make_client: Any, upstream: FakeUpstream) -> None:
    client = await make_client(api_key=API_KEY, max_concurrent_runs=1, max_queued_runs=8, body_timeout=30.0)
    upstream.queue(_endless("holds the slot"))
    _, running = await _create(client)
    assert running["status"] == "in_progress"
    slow = [await _slow_body(client) for _ in range(4)]
    try:
        await asyncio.sleep(0.3)
        status, _ = await _create(client, input="while they hold every place")
        assert status == 429
        answers = []
        async with asyncio.timeout(10):  # well inside the 30 s body timeout
            for reader, _writer in slow:
                answers.append(await reader.readline())
        assert all(answer.startswith(b"HTTP/1.1 429") for answer in answers), answers
        status, queued = await _create(client, input="now there is a place")
        assert status == 200 and queued["status"] == "queued", queued
    finally:
        for _reader, writer in slow:
            writer.close()
    await _cancel(client, running["id"], AUTH)
