"""The PostgreSQL Idempotency-Key table has the in-memory cache's bounds (entries and bytes, for
the whole cluster; a reply too big on its own is not kept), where it had only a TTL."""

from __future__ import annotations

from gateway.store.idempotency import CachedReply
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.idempotency import PostgresIdempotencyCache

HEADERS = (("Content-Type", "application/json"),)


def reply(size: int) -> CachedReply:
    return CachedReply(status=200, body=b"x" * size, headers=HEADERS, fingerprint="fp")



async def _keep(cache: PostgresIdempotencyCache, key: str, kept: CachedReply) -> None:
    assert await cache.acquire(key, "fp") is None
    await cache.release(key, kept)


async def _is_kept(cache: PostgresIdempotencyCache, key: str) -> bool:
    found = await cache.acquire(key, "fp")
    if found is None:  # claimed afresh: nothing was kept; give the claim back
        await cache.release(key, None)
    return found is not None


async def test_at_most_max_entries_replies_are_kept_the_oldest_dropped_first(database: PostgresDatabase) -> None:
    cache = PostgresIdempotencyCache(database, max_entries=3)
    for n in range(5):
        await _keep(cache, f"k{n}", reply(10))
    assert [await _is_kept(cache, f"k{n}") for n in range(5)] == [False, False, True, True, True]


async def test_the_kept_bytes_stay_within_max_bytes(database: PostgresDatabase) -> None:
    cache = PostgresIdempotencyCache(database, max_bytes=10_000)
    for n in range(4):
        await _keep(cache, f"k{n}", reply(3_000))
    assert [await _is_kept(cache, f"k{n}") for n in range(4)] == [False, True, True, True]


async def test_a_reply_over_max_bytes_is_not_kept_and_its_retry_runs_again(database: PostgresDatabase) -> None:
    cache = PostgresIdempotencyCache(database, max_bytes=1_000)
    await _keep(cache, "small", reply(100))
    await _keep(cache, "big", reply(5_000))
    assert not await _is_kept(cache, "big")
    assert await _is_kept(cache, "small")  # the big one evicted nothing


async def test_the_default_bounds_hold_the_table_near_32_mib_not_the_sum_of_replies(
        database: PostgresDatabase) -> None:
    """Issue 25's reproduction: ten 9 MB replies grew the table by ~90 MB (here from ten owners, each
    within its share: the whole bound is what is tested)."""
    cache = PostgresIdempotencyCache(database)
    for n in range(10):
        await _keep(cache, owner_key(f"/key{n}", f"k{n}"),
                    CachedReply(200, bytes(range(256)) * (9 * 1024 * 1024 // 256), HEADERS, "fp"))
    kept = await database.run(lambda conn: conn.fetchval(
        "SELECT coalesce(sum(octet_length(body)), 0) FROM idempotency WHERE status IS NOT NULL"))
    assert kept <= 32 * 1024 * 1024
    assert [await _is_kept(cache, owner_key(f"/key{n}", f"k{n}")) for n in range(10)][-3:] == [True, True, True]


async def test_one_owner_keeps_at_most_its_share_of_the_bytes(database: PostgresDatabase) -> None:
    cache = PostgresIdempotencyCache(database)
    for n in range(3):
        await _keep(cache, owner_key("/alice", f"k{n}"), CachedReply(200, b"x" * (9 * 1024 * 1024), HEADERS, "fp"))
    assert [await _is_kept(cache, owner_key("/alice", f"k{n}")) for n in range(3)] == [False, False, True]


def owner_key(owner: str, key: str) -> str:
    """A cache key as the front door makes it (http/idempotency.py cache_key): the owner's scope first."""
    return f"owner:{owner}:anonymous\nPOST\n/v1/chat/completions\n{key}"


async def test_one_keys_replies_never_evict_another_keys_reply(database: PostgresDatabase) -> None:
    cache = PostgresIdempotencyCache(database, max_entries=10, max_owner_entries=5)
    await _keep(cache, owner_key("/bob", "retry-me"), reply(10))
    for n in range(30):
        await _keep(cache, owner_key("/alice", f"k{n}"), reply(10))
    assert await _is_kept(cache, owner_key("/bob", "retry-me"))
    assert [await _is_kept(cache, owner_key("/alice", f"k{n}")) for n in (24, 25, 29)] == [False, True, True]


async def test_past_the_whole_byte_bound_the_largest_owner_gives_up_its_oldest_first(
        database: PostgresDatabase) -> None:
    cache = PostgresIdempotencyCache(database, max_bytes=5_000, max_owner_bytes=4_000)
    await _keep(cache, owner_key("/bob", "k0"), reply(1_000))
    for n in range(3):
        await _keep(cache, owner_key("/alice", f"k{n}"), reply(1_000))
    await _keep(cache, owner_key("/carol", "k0"), reply(1_000))
    assert await _is_kept(cache, owner_key("/bob", "k0")) and await _is_kept(cache, owner_key("/carol", "k0"))
    assert [await _is_kept(cache, owner_key("/alice", f"k{n}")) for n in range(3)] == [False, True, True]
