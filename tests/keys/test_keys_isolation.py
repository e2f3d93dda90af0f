"""API keys with owners (issue 27), on one in-process gateway over a real SQLite file: keys made
by the real CLI, each key sees only its own objects (another's id is an unknown id), per-key limits
with OpenAI's headers, usage per key in the store, the metrics and the access log."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.upstream import FakeUpstream, text
from tests.support.gateway_process import gateway_env, run_cli


async def make_key(home: Path, name: str, *options: str, env: dict[str, str] | None = None) -> str:
    code, out, err = await run_cli("keys", "create", name, *options, env=env or gateway_env(home))
    assert code == 0, err
    key = out.strip()
    assert re.fullmatch(r"agk_[A-Za-z0-9_-]{43,}", key), out
    return key


#: API_SERVER_METRICS_KEY of the `keyed` gateway: the scraper that sees the per-key series
METRICS_KEY = "metrics-scraper-key-for-tests"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def keyed(tmp_path: Path, make_client: Callable[..., Any]) -> tuple[Any, str, str]:
    alice, bob = await make_key(tmp_path, "alice"), await make_key(tmp_path, "bob")
    client = await make_client(metrics_enabled=True, metrics_key=METRICS_KEY)
    return client, alice, bob


async def _unknown_shape(client: Any, key: str, method: str, path: str, known_id: str, unknown_id: str,
                         **kw: Any) -> None:
    """`path` with another owner's id answers exactly as with an id never stored."""
    answers = []
    for object_id in (known_id, unknown_id):
        async with client.request(method, path.format(object_id), headers=bearer(key), **kw) as reply:
            answers.append((reply.status, (await reply.text()).replace(object_id, "<id>")))
    assert answers[0] == answers[1], (method, path, answers)
    assert answers[0][0] in (400, 404), answers


async def test_each_key_sees_only_its_own_objects_in_each_direction(keyed: tuple[Any, str, str],
                                                                    upstream: FakeUpstream) -> None:
    client, alice, bob = keyed
    owned: dict[str, dict[str, str]] = {}
    for name, key in (("alice", alice), ("bob", bob)):
        async with client.post("/v1/responses", json={"model": "m", "input": f"{name}'s secret"},
                               headers=bearer(key)) as reply:
            assert reply.status == 200, await reply.text()
            response_id = (await reply.json())["id"]
        async with client.post("/v1/conversations", json={"items": [{"type": "message", "role": "user",
                                                                     "content": f"{name} item"}]},
                               headers=bearer(key)) as reply:
            assert reply.status == 200, await reply.text()
            conversation_id = (await reply.json())["id"]
        async with client.get(f"/v1/conversations/{conversation_id}/items", headers=bearer(key)) as reply:
            item_id = (await reply.json())["data"][0]["id"]
        owned[name] = {"response": response_id, "conversation": conversation_id, "item": item_id}

    for me, key, other in (("alice", alice, "bob"), ("bob", bob, "alice")):
        theirs = owned[other]
        unknown = {"response": "resp_" + "0" * 24, "conversation": "conv_" + "0" * 24}
        for method, path in (("GET", "/v1/responses/{}"), ("GET", "/v1/responses/{}/input_items"),
                             ("DELETE", "/v1/responses/{}")):
            await _unknown_shape(client, key, method, path, theirs["response"], unknown["response"])
        for method, path, body in (
                ("GET", "/v1/conversations/{}", None), ("POST", "/v1/conversations/{}", {"metadata": {"a": "b"}}),
                ("GET", "/v1/conversations/{}/items", None),
                ("POST", "/v1/conversations/{}/items", {"items": [{"type": "message", "role": "user",
                                                                   "content": "x"}]}),
                ("GET", "/v1/conversations/{}/items/" + theirs["item"], None),
                ("DELETE", "/v1/conversations/{}/items/" + theirs["item"], None),
                ("DELETE", "/v1/conversations/{}", None)):
            await _unknown_shape(client, key, method, path, theirs["conversation"], unknown["conversation"],
                                 json=body)
        # previous_response_id and a conversation object of another owner: as unknown ones
        for field, kind in (("previous_response_id", "response"), ("conversation", "conversation")):
            answers = []
            for object_id in (theirs[kind], unknown[kind]):
                async with client.post("/v1/responses", json={"model": "m", "input": "hi", field: object_id},
                                       headers=bearer(key)) as reply:
                    answers.append((reply.status, (await reply.text()).replace(object_id, "<id>")))
            assert answers[0] == answers[1] and answers[0][0] in (400, 404), (me, field, answers)
    # and each still has all of its own
    for name, key in (("alice", alice), ("bob", bob)):
        async with client.get(f"/v1/responses/{owned[name]['response']}", headers=bearer(key)) as reply:
            assert reply.status == 200
        async with client.get(f"/v1/conversations/{owned[name]['conversation']}/items", headers=bearer(key)) as reply:
            assert reply.status == 200 and len((await reply.json())["data"]) == 1


async def test_named_conversation_notes_is_two_conversations(keyed: tuple[Any, str, str],
                                                             upstream: FakeUpstream) -> None:
    client, alice, bob = keyed
    upstream.queue(text("noted"), text("hello bob"), text("still yours"))
    for key, words in ((alice, "my password is hunter2"), (bob, "bob here")):
        async with client.post("/v1/responses", json={"model": "m", "conversation": "notes", "input": words},
                               headers=bearer(key)) as reply:
            assert reply.status == 200, await reply.text()
    assert "hunter2" not in str(upstream.requests[-1]["messages"])  # bob's turn started fresh
    async with client.post("/v1/responses", json={"model": "m", "conversation": "notes", "input": "again"},
                           headers=bearer(alice)) as reply:
        assert reply.status == 200
    sent = str(upstream.requests[-1]["messages"])
    assert "hunter2" in sent and "bob here" not in sent


async def test_idempotent_replays_never_cross_keys(keyed: tuple[Any, str, str], upstream: FakeUpstream) -> None:
    client, alice, bob = keyed
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    upstream.queue(text("for alice"), text("for bob"))
    replies = []
    for key in (alice, bob, alice):
        async with client.post("/v1/chat/completions", json=body,
                               headers={**bearer(key), "Idempotency-Key": "same"}) as reply:
            replies.append((reply.headers.get("Idempotent-Replayed"),
                            (await reply.json())["choices"][0]["message"]["content"]))
    assert replies == [(None, "for alice"), (None, "for bob"), ("true", "for alice")]
    assert len(upstream.requests) == 2


async def test_a_wrong_or_missing_key_is_401_and_the_api_server_key_is_default(
        tmp_path: Path, make_client: Callable[..., Any]) -> None:
    alice = await make_key(tmp_path, "alice")
    client = await make_client(api_key="the-server-key-0123456789")
    async with client.post("/v1/responses", json={"model": "m", "input": "mine"},
                           headers=bearer("the-server-key-0123456789")) as reply:
        assert reply.status == 200
        default_id = (await reply.json())["id"]
    async with client.get(f"/v1/responses/{default_id}", headers=bearer(alice)) as reply:
        assert reply.status == 404
    for headers in ({}, bearer("agk_not-a-key"), bearer(alice + "x")):
        async with client.get("/v1/models", headers=headers) as reply:
            assert reply.status == 401
            assert (await reply.json())["error"]["type"] == "invalid_request_error"
    code, _, err = await run_cli("keys", "create", "default", env=gateway_env(tmp_path))
    assert code == 1 and "API_SERVER_KEY" in err


async def test_rpm_limit_with_openai_headers(tmp_path: Path, make_client: Callable[..., Any]) -> None:
    limited = await make_key(tmp_path, "limited", "--rpm", "2")
    free = await make_key(tmp_path, "free")
    client = await make_client()
    seen = []
    for _ in range(3):
        async with client.get("/v1/models", headers=bearer(limited)) as reply:
            seen.append((reply.status, reply.headers.get("x-ratelimit-limit-requests"),
                         reply.headers.get("x-ratelimit-remaining-requests")))
            reset = reply.headers.get("x-ratelimit-reset-requests", "")
            assert re.fullmatch(r"\d+ms|(\d+m)?\d+(\.\d+)?s", reset), reset  # as OpenAI: 17ms, 8.64s, 1m0s
            if reply.status == 429:
                error = (await reply.json())["error"]
                assert error["code"] == "rate_limit_exceeded" and "limited" in error["message"]
                assert error["type"] == "requests", error  # as OpenAI's 429 (issue 42)
                assert int(reply.headers["Retry-After"]) >= 1
    assert seen == [(200, "2", "1"), (200, "2", "0"), (429, "2", "0")]
    async with client.get("/v1/models", headers=bearer(free)) as reply:
        assert reply.status == 200 and "x-ratelimit-limit-requests" not in reply.headers


async def test_concurrent_runs_limit(tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream) -> None:
    one = await make_key(tmp_path, "one-at-a-time", "--max-concurrent", "1")
    client = await make_client()
    upstream.queue(text("slow", delay=1.0), text("later"))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    async def post() -> tuple[int, str | None]:
        async with client.post("/v1/chat/completions", json=body, headers=bearer(one)) as reply:
            await reply.read()
            return reply.status, reply.headers.get("Retry-After")

    first = asyncio.ensure_future(post())
    while upstream.active == 0:
        await asyncio.sleep(0.01)
    assert await post() == (429, "1")
    assert (await first)[0] == 200
    assert (await post())[0] == 200  # the slot was given back


async def test_stored_bytes_quota_refuses_a_store_and_serves_a_delete(
        tmp_path: Path, make_client: Callable[..., Any]) -> None:
    small = await make_key(tmp_path, "small", "--max-stored-mb", "1")
    client = await make_client(llm_context_window=10**7)
    big = "x" * 300_000  # kept twice (input items and the turn's messages): ~600 kB a record
    async with client.post("/v1/responses", json={"model": "m", "input": big}, headers=bearer(small)) as reply:
        assert reply.status == 200, await reply.text()
        first = (await reply.json())["id"]
    async with client.post("/v1/responses", json={"model": "m", "input": big}, headers=bearer(small)) as reply:
        assert reply.status == 429
        error = (await reply.json())["error"]
        assert error["code"] == "insufficient_quota" and error["type"] == "insufficient_quota", error
    async with client.post("/v1/responses", json={"model": "m", "input": big, "store": False},
                           headers=bearer(small)) as reply:
        assert reply.status == 200  # not stored: nothing to refuse
    async with client.get(f"/v1/responses/{first}", headers=bearer(small)) as reply:
        assert reply.status == 200
    async with client.delete(f"/v1/responses/{first}", headers=bearer(small)) as reply:
        assert reply.status == 200
    for _ in range(100):  # the room is seen once the ring re-reads the stored bytes (every 2 s)
        async with client.post("/v1/responses", json={"model": "m", "input": big}, headers=bearer(small)) as reply:
            if reply.status == 200:
                break
        await asyncio.sleep(0.1)
    assert reply.status == 200


async def test_a_key_past_its_stored_bytes_quota_is_refused_before_its_run_not_after(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream) -> None:
    """Issue 42: the quota was checked when the record was stored, after the model had been paid for."""
    small = await make_key(tmp_path, "small", "--max-stored-mb", "1")
    client = await make_client(llm_context_window=10**7)
    big = "x" * 400_000
    async with client.post("/v1/responses", json={"model": "m", "input": big}, headers=bearer(small)) as reply:
        assert reply.status == 200, await reply.text()
    sent = len(upstream.requests)
    async with client.post("/v1/responses", json={"model": "m", "input": big}, headers=bearer(small)) as reply:
        assert reply.status == 429
        assert (await reply.json())["error"]["code"] == "insufficient_quota"
    assert len(upstream.requests) == sent  # refused before any model call


async def test_usage_per_key_in_the_store_the_metrics_and_the_access_log(
        keyed: tuple[Any, str, str], upstream: FakeUpstream, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    client, alice, bob = keyed
    caplog.set_level(logging.INFO, logger="agent_gateway.access")
    for _ in range(2):
        async with client.post("/v1/chat/completions", json={"model": "m", "messages": [
                {"role": "user", "content": "count me"}]}, headers=bearer(alice)) as reply:
            assert reply.status == 200
            usage = (await reply.json())["usage"]
    await asyncio.sleep(0)  # the access line is written once the reply has left
    lines = [r.getMessage() for r in caplog.records if r.name == "agent_gateway.access"]
    assert any("key=alice" in line for line in lines), lines
    assert not any(alice in line or bob in line for line in lines)
    for _ in range(100):  # the per-key counters are added with each usage batch (every 2 s)
        async with client.get("/metrics", headers=bearer(METRICS_KEY)) as reply:
            scraped = await reply.text()
        if 'key="alice",kind="model_calls"' in scraped:
            break
        await asyncio.sleep(0.1)
    assert 'agent_gateway_key_usage_total{key="alice",kind="model_calls"} 2.0' in scraped
    assert f'agent_gateway_key_usage_total{{key="alice",kind="input_tokens"}} {2.0 * usage["prompt_tokens"]}' \
        in scraped
    assert 'key="bob",kind="model_calls"' not in scraped
    # issue 42 (item 12): a key holder sees the page without any key's name or consumption
    async with client.get("/metrics", headers=bearer(bob)) as reply:
        assert reply.status == 200
        seen_by_bob = await reply.text()
    assert "agent_gateway_requests_total" in seen_by_bob
    assert "agent_gateway_key_usage" not in seen_by_bob and "key_stored_bytes" not in seen_by_bob
    assert "alice" not in seen_by_bob
    # the metrics key is good for /metrics only
    async with client.get("/v1/models", headers=bearer(METRICS_KEY)) as reply:
        assert reply.status == 401
    for _ in range(100):  # written by the ring's next refresh (every 2 s), read by the real CLI
        code, out, err = await run_cli("keys", "usage", "alice", env=gateway_env(tmp_path))
        assert code == 0, err
        row = out.splitlines()[1].split()
        if row[3] == "2":
            break
        await asyncio.sleep(0.2)
    assert row[0] == "alice" and row[1] == str(2 * usage["prompt_tokens"]) and row[3] == "2", out


async def test_background_cancel_and_stream_of_another_owner_read_as_unknown(keyed: tuple[Any, str, str],
                                                                            upstream: FakeUpstream) -> None:
    """Issue 28 with owners: another key's background response cannot be cancelled, polled or
    streamed again: the same 404 as an id never stored, and it runs on."""
    from tests.fakes.upstream import Reply

    client, alice, bob = keyed
    upstream.queue(Reply(text="alice's slow answer", chunk_size=4, chunk_delay=0.05))
    async with client.post("/v1/responses", json={"model": "m", "input": "mine", "background": True},
                           headers=bearer(alice)) as reply:
        assert reply.status == 200, await reply.text()
        response_id = (await reply.json())["id"]
    unknown = "resp_" + "0" * 32
    await _unknown_shape(client, bob, "POST", "/v1/responses/{}/cancel", response_id, unknown)
    await _unknown_shape(client, bob, "GET", "/v1/responses/{}", response_id, unknown,
                         params={"stream": "true", "starting_after": "0"})
    async with client.get(f"/v1/responses/{response_id}", params={"stream": "true"},
                          headers=bearer(alice)) as reply:
        assert reply.status == 200
        assert "response.completed" in await reply.text()
    async with client.get(f"/v1/responses/{response_id}", headers=bearer(alice)) as reply:
        assert (await reply.json())["status"] == "completed"


async def test_a_background_response_over_its_keys_quota_ends_failed_with_every_event(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream) -> None:
    """The store refuses the finished background response: the stream ends on `response.failed`
    with no gap in the sequence numbers, and a poll says `failed`, not `in_progress` forever."""
    import openai

    from tests.fakes.upstream import Reply

    small = await make_key(tmp_path, "small", "--max-stored-mb", "1")
    client = await make_client()
    upstream.queue(Reply(text="x" * 1_200_000, chunk_size=400_000))
    sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=small, max_retries=0)
    try:
        stream = await sdk.responses.create(model="m", input="big", background=True, stream=True)
        events = [event async for event in stream]
        assert [event.sequence_number for event in events] == list(range(len(events)))
        assert events[-1].type == "response.failed"
        polled = await sdk.responses.retrieve(events[0].response.id)
        assert polled.status == "failed" and polled.error is not None
    finally:
        await sdk.close()


async def test_a_background_response_put_twice_counts_once_in_its_keys_stored_bytes(
        tmp_path: Path, make_client: Callable[..., Any]) -> None:
    """Issue 42 (Low): a background response is stored in progress, then finished; the quota added both
    sizes until the next refresh, so a record over half the quota failed its own final store."""
    small = await make_key(tmp_path, "small", "--max-stored-mb", "1")
    client = await make_client(llm_context_window=10**7)
    # in progress ~400 kB (its input items), finished ~800 kB (and the turn's messages): both together
    # pass the 1 MB quota, the finished record alone does not
    big = "x" * 400_000
    async with client.post("/v1/responses", json={"model": "m", "input": big, "background": True},
                           headers=bearer(small)) as reply:
        assert reply.status == 200, await reply.text()
        response_id = (await reply.json())["id"]
    for _ in range(200):
        async with client.get(f"/v1/responses/{response_id}", headers=bearer(small)) as reply:
            body = await reply.json()
        if body["status"] not in ("queued", "in_progress"):
            break
        await asyncio.sleep(0.05)
    assert body["status"] == "completed", body.get("error")
