"""Idempotency-Key entries in PostgreSQL: two caches on one database behave as one."""

from __future__ import annotations

import asyncio

import pytest

from gateway.store.idempotency import CachedReply, IdempotencyKeyReusedError
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.idempotency import IdempotencyInProgressError, PostgresIdempotencyCache

REPLY = CachedReply(status=200, body=b'{"ok": "\xc3\xa9"}\n', headers=(("Content-Type", "application/json"),),
                    fingerprint="fp1")



async def test_a_kept_reply_is_replayed_by_another_replica_byte_for_byte(database: PostgresDatabase,
                                                                         postgres_url: str) -> None:
    a = PostgresIdempotencyCache(database)
    other = PostgresDatabase(postgres_url)
    await other.open()
    try:
        b = PostgresIdempotencyCache(other)
        assert await a.acquire("k", "fp1") is None
        await a.release("k", REPLY)
        assert await b.acquire("k", "fp1") == REPLY
        with pytest.raises(IdempotencyKeyReusedError):
            await b.acquire("k", "fp-other-body")
    finally:
        await other.close()


async def test_a_duplicate_waits_for_the_running_one_and_gets_its_reply(database: PostgresDatabase) -> None:
    cache = PostgresIdempotencyCache(database, poll=0.05)
    assert await cache.acquire("k", "fp1") is None
    waiter = asyncio.ensure_future(cache.acquire("k", "fp1"))
    await asyncio.sleep(0.3)
    assert not waiter.done()
    await cache.release("k", REPLY)
    assert await asyncio.wait_for(waiter, 5) == REPLY


async def test_a_duplicate_past_its_wait_bound_is_a_409_with_retry_after(database: PostgresDatabase) -> None:
    cache = PostgresIdempotencyCache(database, wait=0.5, poll=0.05)
    assert await cache.acquire("k", "fp1") is None
    with pytest.raises(IdempotencyInProgressError) as conflict:
        await cache.acquire("k", "fp1")
    assert conflict.value.status == 409 and conflict.value.retry_after is not None


async def test_a_reply_not_kept_lets_the_next_duplicate_run(database: PostgresDatabase) -> None:
    cache = PostgresIdempotencyCache(database)
    assert await cache.acquire("k", "fp1") is None
    await cache.release("k", None)
    assert await cache.acquire("k", "fp1") is None


async def test_an_expired_reply_runs_again_and_a_dead_owners_claim_ends_with_its_lease(
        database: PostgresDatabase) -> None:
    cache = PostgresIdempotencyCache(database, ttl=0.3, lease=0.3)
    assert await cache.acquire("k", "fp1") is None
    await cache.release("k", REPLY)
    await asyncio.sleep(0.5)
    assert await cache.acquire("k", "fp1") is None  # expired: ours to run again
    # ...and never released (the replica was killed): the lease ends the claim
    await asyncio.sleep(0.5)
    assert await cache.acquire("k", "fp1") is None


async def test_a_zero_ttl_keeps_nothing(database: PostgresDatabase) -> None:
    cache = PostgresIdempotencyCache(database, ttl=0)
    assert await cache.acquire("k", "fp1") is None
    await cache.release("k", REPLY)
    assert await cache.acquire("k", "fp1") is None
