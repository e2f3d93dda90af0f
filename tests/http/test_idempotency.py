"""Idempotency-Key: retries replay the first answer; the agent (and the upstream) run once."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp.test_utils import TestClient

from gateway.http.app import create_app
from gateway.store.idempotency import CachedReply, InMemoryIdempotencyCache
from tests.conftest import API_KEY
from tests.fakes.upstream import error, text
from tests.support.helpers import assert_error_envelope, chat_chunks

CHAT = {"messages": [{"role": "user", "content": "What is new?"}]}
URL = "/v1/chat/completions"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cache(clock: FakeClock) -> InMemoryIdempotencyCache:
    return InMemoryIdempotencyCache(ttl=300, clock=clock)


@pytest.fixture
async def make_idem_client(aiohttp_client, make_settings, cache):
    async def make(**overrides) -> TestClient:
        return await aiohttp_client(create_app(make_settings(**overrides), tools=[], idempotency=cache))

    return make


@pytest.fixture
async def idem_client(make_idem_client) -> TestClient:
    return await make_idem_client()


def keyed(key: str, token: str | None = None) -> dict[str, str]:
    headers = {"Idempotency-Key": key}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


async def test_retry_with_same_key_replays_byte_identical_reply_and_runs_once(idem_client, upstream):
    upstream.queue(text("first answer"), text("second answer"))
    first = await idem_client.post(URL, json=CHAT, headers=keyed("k-1"))
    first_body = await first.read()
    second = await idem_client.post(URL, json=CHAT, headers=keyed("k-1"))
    second_body = await second.read()
    assert first.status == second.status == 200
    assert second_body == first_body
    assert json.loads(second_body)["choices"][0]["message"]["content"] == "first answer"
    assert second.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert second.headers["Content-Type"] == first.headers["Content-Type"]
    assert second.headers["X-Request-Id"] != first.headers["X-Request-Id"]  # each delivery has its own id
    assert second.headers["X-Content-Type-Options"] == "nosniff"
    assert len(upstream.requests) == 1


async def test_without_a_key_every_request_runs(idem_client, upstream):
    await idem_client.post(URL, json=CHAT)
    resp = await idem_client.post(URL, json=CHAT)
    assert "Idempotent-Replayed" not in resp.headers
    assert len(upstream.requests) == 2


async def test_different_keys_run_separately(idem_client, upstream):
    a = await (await idem_client.post(URL, json=CHAT, headers=keyed("a"))).json()
    b = await (await idem_client.post(URL, json=CHAT, headers=keyed("b"))).json()
    assert a["id"] != b["id"]
    assert len(upstream.requests) == 2


async def test_concurrent_duplicates_wait_for_the_first_and_share_its_answer(idem_client, upstream):
    upstream.queue(text("slow answer", delay=0.3))
    replies = await asyncio.gather(*(idem_client.post(URL, json=CHAT, headers=keyed("same")) for _ in range(3)))
    bodies = [await r.read() for r in replies]
    assert all(r.status == 200 for r in replies)
    assert bodies[0] == bodies[1] == bodies[2]
    assert sorted(r.headers.get("Idempotent-Replayed", "-") for r in replies) == ["-", "true", "true"]
    assert len(upstream.requests) == 1


async def test_same_key_with_another_body_is_422(idem_client, upstream):
    await idem_client.post(URL, json=CHAT, headers=keyed("k"))
    other = {"messages": [{"role": "user", "content": "Something else"}]}
    resp = await idem_client.post(URL, json=other, headers=keyed("k"))
    assert resp.status == 422
    body = await resp.json()
    assert_error_envelope(body, code="idempotency_key_reused")
    assert "different request body" in body["error"]["message"]
    assert len(upstream.requests) == 1


async def test_same_key_with_another_body_while_first_runs_is_422_at_once(idem_client, upstream):
    upstream.queue(text("slow", delay=0.5))
    first = asyncio.ensure_future(idem_client.post(URL, json=CHAT, headers=keyed("k")))
    while not upstream.requests:
        await asyncio.sleep(0.01)
    other = await idem_client.post(URL, json={"messages": [{"role": "user", "content": "x"}]}, headers=keyed("k"))
    assert other.status == 422
    assert not first.done()
    assert (await first).status == 200


async def test_reply_expires_after_ttl(idem_client, upstream, clock):
    upstream.queue(text("old"), text("new"))
    await idem_client.post(URL, json=CHAT, headers=keyed("k"))
    clock.now += 299
    kept = await idem_client.post(URL, json=CHAT, headers=keyed("k"))
    assert kept.headers["Idempotent-Replayed"] == "true"
    clock.now += 2
    fresh = await idem_client.post(URL, json=CHAT, headers=keyed("k"))
    assert "Idempotent-Replayed" not in fresh.headers
    assert (await fresh.json())["choices"][0]["message"]["content"] == "new"
    assert len(upstream.requests) == 2


async def test_after_expiry_the_key_may_carry_another_body(idem_client, upstream, clock):
    await idem_client.post(URL, json=CHAT, headers=keyed("k"))
    clock.now += 301
    resp = await idem_client.post(URL, json={"messages": [{"role": "user", "content": "x"}]}, headers=keyed("k"))
    assert resp.status == 200


async def test_keys_are_scoped_to_the_presented_credential(idem_client, upstream):
    upstream.queue(text("for anonymous"), text("for key a"), text("for key b"))
    anonymous = await (await idem_client.post(URL, json=CHAT, headers=keyed("k"))).json()
    with_a = await (await idem_client.post(URL, json=CHAT, headers=keyed("k", "sk-a"))).json()
    with_b = await (await idem_client.post(URL, json=CHAT, headers=keyed("k", "sk-b"))).json()
    assert [r["choices"][0]["message"]["content"] for r in (anonymous, with_a, with_b)] == [
        "for anonymous", "for key a", "for key b"]
    again_a = await idem_client.post(URL, json=CHAT, headers=keyed("k", "sk-a"))
    assert (await again_a.json())["id"] == with_a["id"]
    assert len(upstream.requests) == 3


async def test_cache_never_holds_the_token_itself(make_idem_client, cache):
    client = await make_idem_client(api_key=API_KEY)
    resp = await client.post(URL, json=CHAT, headers=keyed("k", API_KEY))
    assert resp.status == 200
    assert len(cache) == 1
    assert not any(API_KEY in key for key in cache._entries)


async def test_rejected_credentials_never_reach_the_cache(make_idem_client, upstream, cache):
    client = await make_idem_client(api_key=API_KEY)
    resp = await client.post(URL, json=CHAT, headers=keyed("k", "sk-wrong"))
    assert resp.status == 401
    assert len(cache) == 0


async def test_server_errors_are_not_kept_and_the_retry_runs_again(idem_client, upstream):
    upstream.queue(error(500), text("recovered"))
    failed = await idem_client.post(URL, json=CHAT, headers=keyed("k"))
    assert failed.status == 502
    retried = await idem_client.post(URL, json=CHAT, headers=keyed("k"))
    assert retried.status == 200
    assert "Idempotent-Replayed" not in retried.headers
    assert (await retried.json())["choices"][0]["message"]["content"] == "recovered"


async def test_waiters_on_a_failed_first_run_run_on_their_own(idem_client, upstream):
    # the first run fails (upstream 500 -> 502); the waiter then runs the request itself
    upstream.queue(error(500, delay=0.3), text("second try"))
    replies = await asyncio.gather(*(idem_client.post(URL, json=CHAT, headers=keyed("k")) for _ in range(2)))
    assert sorted(r.status for r in replies) == [200, 502]
    ok = next(r for r in replies if r.status == 200)
    assert (await ok.json())["choices"][0]["message"]["content"] == "second try"
    assert len(upstream.requests) == 2


async def test_client_errors_are_replayed_like_any_reply(idem_client, upstream):
    bad = {"messages": "not a list"}
    first = await idem_client.post(URL, json=bad, headers=keyed("k"))
    second = await idem_client.post(URL, json=bad, headers=keyed("k"))
    assert first.status == second.status == 400
    assert await first.read() == await second.read()
    assert second.headers["Idempotent-Replayed"] == "true"


async def test_streaming_requests_ignore_the_key(idem_client, upstream):
    streamed = {**CHAT, "stream": True}
    for _ in range(2):
        resp = await idem_client.post(URL, json=streamed, headers=keyed("k"))
        assert "Idempotent-Replayed" not in resp.headers
        assert chat_chunks(await resp.text())
    assert len(upstream.requests) == 2


async def test_overlong_key_is_400(idem_client):
    resp = await idem_client.post(URL, json=CHAT, headers=keyed("x" * 256))
    assert resp.status == 400
    assert_error_envelope(await resp.json(), code="invalid_idempotency_key")


async def test_responses_route_is_covered_by_the_same_mechanism(idem_client, upstream):
    first = await idem_client.post("/v1/responses", json={"input": "hi"}, headers=keyed("r"))
    second = await idem_client.post("/v1/responses", json={"input": "hi"}, headers=keyed("r"))
    assert first.status == 200
    assert await first.read() == await second.read()
    assert second.headers["Idempotent-Replayed"] == "true"
    assert len(upstream.requests) == 1


def reply(size: int) -> CachedReply:
    return CachedReply(status=200, body=b"x" * size, headers=(("Content-Type", "application/json"),),
                       fingerprint="f")


async def kept(cache: InMemoryIdempotencyCache, key: str) -> bool:
    result = await cache.acquire(key, "f")
    if result is None:
        await cache.release(key, None)
    return result is not None


async def test_cache_is_bounded_by_entries_least_recently_used_first(clock):
    cache = InMemoryIdempotencyCache(ttl=300, max_entries=2, clock=clock)
    for key in ("a", "b"):
        assert await cache.acquire(key, "f") is None
        await cache.release(key, reply(10))
    assert await kept(cache, "a")  # touch a: b is now the least recently used
    assert await cache.acquire("c", "f") is None
    await cache.release("c", reply(10))
    assert [await kept(cache, k) for k in ("a", "b", "c")] == [True, False, True]


async def test_cache_is_bounded_by_bytes(clock):
    cache = InMemoryIdempotencyCache(ttl=300, max_bytes=2500, clock=clock)
    for key in ("a", "b", "c"):
        assert await cache.acquire(key, "f") is None
        await cache.release(key, reply(1000))
    assert cache.total_bytes <= 2500
    assert [await kept(cache, k) for k in ("a", "b", "c")] == [False, True, True]
    assert await cache.acquire("huge", "f") is None
    await cache.release("huge", reply(5000))  # larger than the whole budget: not kept, nothing evicted
    assert not await kept(cache, "huge")
    assert await kept(cache, "c")


def owner_key(owner: str, key: str) -> str:
    """A cache key as the front door makes it (http/idempotency.py cache_key): the owner's scope first."""
    return f"owner:{owner}:anonymous\nPOST\n/v1/chat/completions\n{key}"


async def test_one_keys_replies_never_evict_another_keys_reply(clock):
    cache = InMemoryIdempotencyCache(ttl=300, max_entries=10, max_owner_entries=5, clock=clock)
    bob = owner_key("/bob", "retry-me")
    assert await cache.acquire(bob, "f") is None
    await cache.release(bob, reply(10))
    for n in range(50):  # alice's burst: far past her share and the bound
        key = owner_key("/alice", f"k{n}")
        assert await cache.acquire(key, "f") is None
        await cache.release(key, reply(10))
    assert await kept(cache, bob)
    assert [await kept(cache, owner_key("/alice", f"k{n}")) for n in (44, 45, 49)] == [False, True, True]


async def test_past_the_whole_byte_bound_the_largest_owner_gives_up_its_oldest_first(clock):
    cache = InMemoryIdempotencyCache(ttl=300, max_bytes=5000, max_owner_bytes=4000, clock=clock)
    for owner, count in (("/bob", 1), ("/alice", 3)):
        for n in range(count):
            key = owner_key(owner, f"k{n}")
            assert await cache.acquire(key, "f") is None
            await cache.release(key, reply(1000))
    carol = owner_key("/carol", "k0")
    assert await cache.acquire(carol, "f") is None
    await cache.release(carol, reply(1000))
    assert cache.total_bytes <= 5000
    assert await kept(cache, owner_key("/bob", "k0")) and await kept(cache, carol)
    assert [await kept(cache, owner_key("/alice", f"k{n}")) for n in range(3)] == [False, True, True]
