"""Owners kept apart in what they share (issue 42, items 1 and 3): the queue, the LRU bound and the
byte bound, on both backends. Two store objects on one database are two replicas; with a profile
each, two profiles sharing one database (PostgreSQL's case; a SQLite file is one profile's, but the
same rules hold there)."""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.store.api import ResponseStore, StoredResponse
from gateway.store.keys import KeyStore
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.keys import PostgresKeyStore
from gateway.store.postgres.store import PostgresResponseStore
from gateway.store.sqlite.keys import SQLiteKeyStore
from gateway.store.sqlite.store import SQLiteResponseStore
from tests.store.records import record

LEASE = 60.0
Make = Callable[..., ResponseStore]


@pytest.fixture(params=["sqlite", "postgres"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Make:
    """Unopened stores on one database: `make(cap, max_bytes=None, profile=None)`."""
    if request.param == "sqlite":
        return lambda cap=100, max_bytes=None, profile=None: SQLiteResponseStore(
            tmp_path / "responses.db", cap, max_bytes=max_bytes, profile=profile)
    url = request.getfixturevalue("postgres_url")
    return lambda cap=100, max_bytes=None, profile=None: PostgresResponseStore(
        PostgresDatabase(url, max_size=4), cap, max_bytes=max_bytes, profile=profile)


def owned(rid: str, owner: str, **kw: object) -> StoredResponse:
    return dataclasses.replace(record(rid, **kw), owner=owner)  # type: ignore[arg-type]


async def ids(store: ResponseStore, *wanted: str) -> set[str]:
    return {rid for rid in wanted if await store.get(rid, touch=False) is not None}


# ---- High 1: queued runs stay in their profile ------------------------------------------------

async def test_a_replica_claims_only_the_queued_runs_of_its_own_profile(make: Make) -> None:
    async with make(profile="alpha") as alpha, make(profile="beta") as beta:
        await alpha.runs.enqueue("resp_a", "alpha/worker", b"{}", max_queued=10)
        assert await beta.runs.claim(replica="beta-1", lease_seconds=LEASE) is None
        run = await alpha.runs.claim(replica="alpha-1", lease_seconds=LEASE)
        assert run is not None and (run.response_id, run.owner) == ("resp_a", "alpha/worker")


async def test_the_default_profile_does_not_claim_a_named_profiles_runs(make: Make) -> None:
    async with make(profile="") as default, make(profile="team") as team:
        await team.runs.enqueue("resp_t", "team/default", b"{}", max_queued=10)
        assert await default.runs.claim(replica="d-1", lease_seconds=LEASE) is None
        assert (await team.runs.claim(replica="t-1", lease_seconds=LEASE)) is not None


async def test_a_put_under_another_owner_leaves_the_record_and_its_owner_unchanged(make: Make) -> None:
    async with make() as store:
        await store.put(owned("resp_1", "alpha/worker", text="alpha's question"))
        await store.put(owned("resp_1", "beta/worker", text="beta's answer"))
        kept = await store.get("resp_1")
        assert kept is not None and kept.owner == "alpha/worker"
        assert kept.transcript[0]["content"] == "alpha's question"


# ---- High 3: the bounds are each owner's ------------------------------------------------------

async def test_one_keys_puts_never_evict_another_keys_records(make: Make) -> None:
    async with make(3, profile="") as store:
        await store.put(owned("resp_b1", "/bob"))
        await store.put(owned("resp_b2", "/bob", conversation="/bob:notes"))
        for n in range(10):
            await store.put(owned(f"resp_a{n}", "/alice"))
        assert await ids(store, "resp_b1", "resp_b2") == {"resp_b1", "resp_b2"}
        head = await store.conversation_head("/bob:notes")
        assert head is not None and head.id == "resp_b2"
        assert await ids(store, *(f"resp_a{n}" for n in range(10))) == {"resp_a7", "resp_a8", "resp_a9"}


async def test_each_profiles_cap_applies_to_its_own_rows_only(make: Make) -> None:
    async with make(100, profile="big") as big, make(2, profile="small") as small:
        for n in range(6):
            await big.put(owned(f"resp_big{n}", "big/k"))
        for n in range(4):
            await small.put(owned(f"resp_small{n}", "small/k"))
        assert len(await ids(big, *(f"resp_big{n}" for n in range(6)))) == 6
        assert await ids(small, *(f"resp_small{n}" for n in range(4))) == {"resp_small2", "resp_small3"}


async def test_the_byte_bound_evicts_the_largest_owners_oldest_first(make: Make) -> None:
    async with make(1000) as probe:
        await probe.put(owned("resp_probe", "/x"))
        one = await probe.size()
        await probe.delete("resp_probe")
    async with make(1000, max_bytes=one * 8 + one // 2, profile="") as store:
        for n in range(3):
            await store.put(owned(f"resp_b{n}", "/bob"))
        for n in range(10):
            await store.put(owned(f"resp_a{n}", "/alice"))
        assert await store.size() <= one * 8 + one // 2
        assert await ids(store, "resp_b0", "resp_b1", "resp_b2") == {"resp_b0", "resp_b1", "resp_b2"}
        assert await ids(store, *(f"resp_a{n}" for n in range(10))) == {f"resp_a{n}" for n in range(5, 10)}


async def test_the_byte_bound_weighs_only_its_own_profiles_rows(make: Make) -> None:
    async with make(1000) as probe:
        await probe.put(owned("resp_probe", "/x"))
        one = await probe.size()
        await probe.delete("resp_probe")
    async with make(1000, profile="roomy") as roomy, make(1000, max_bytes=one * 3, profile="tight") as tight:
        for n in range(6):
            await roomy.put(owned(f"resp_r{n}", "roomy/k"))
        await tight.put(owned("resp_t0", "tight/k"))
        await tight.put(owned("resp_t1", "tight/k"))
        assert len(await ids(roomy, *(f"resp_r{n}" for n in range(6)))) == 6
        assert await ids(tight, "resp_t0", "resp_t1") == {"resp_t0", "resp_t1"}


# ---- Low: the profile home and its database are the owner's alone ----------------------------

async def test_the_database_and_its_folder_are_owner_only_even_under_a_lax_umask(tmp_path: Path) -> None:
    home = tmp_path / "home"
    old = os.umask(0o022)
    try:
        async with SQLiteResponseStore(home / "responses.db", 10) as store:
            await store.put(owned("resp_1", "/default"))
            files = [home / name for name in ("responses.db", "responses.db-wal", "responses.db-shm")]
            assert [oct(stat.S_IMODE(f.stat().st_mode)) for f in files if f.exists()] == ["0o600"] * sum(
                f.exists() for f in files)
        assert oct(stat.S_IMODE(home.stat().st_mode)) == "0o700"
    finally:
        os.umask(old)


async def test_an_existing_lax_home_and_database_are_tightened_when_opened(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with SQLiteResponseStore(home / "responses.db", 10):
        pass
    os.chmod(home, 0o755)
    os.chmod(home / "responses.db", 0o644)
    async with SQLiteResponseStore(home / "responses.db", 10):
        pass
    assert oct(stat.S_IMODE(home.stat().st_mode)) == "0o700"
    assert oct(stat.S_IMODE((home / "responses.db").stat().st_mode)) == "0o600"


# ---- Medium 7: a background run's events are stored bytes, and go with their response --------

async def test_a_background_runs_events_count_in_the_stored_bytes_and_go_with_its_response(make: Make) -> None:
    async with make() as store:
        await store.put(owned("resp_bg", "/alice"))
        before = await store.size()
        await store.runs.begin("resp_bg", "/alice", replica="r1", lease_seconds=LEASE)
        await store.runs.append_events("resp_bg", 0, [b"x" * 1000] * 10, replica="r1")
        assert await store.size() == before + 10_000
        assert await store.delete("resp_bg")
        assert await store.runs.get("resp_bg") is None
        assert await store.runs.events_after("resp_bg", -1) == []
        assert await store.size() == 0


async def test_an_evicted_background_response_takes_its_events_with_it(make: Make) -> None:
    async with make(1) as store:
        await store.put(owned("resp_bg", "/alice"))
        await store.runs.begin("resp_bg", "/alice", replica="r1", lease_seconds=LEASE)
        await store.runs.append_events("resp_bg", 0, [b"x" * 1000] * 3, replica="r1")
        await store.put(owned("resp_next", "/alice"))  # the cap of 1 evicts resp_bg
        assert await store.get("resp_bg", touch=False) is None
        assert await store.runs.events_after("resp_bg", -1) == []


async def test_a_keys_stored_bytes_count_its_background_events_once_per_owner(make: Make, tmp_path: Path) -> None:
    async with make(profile="") as store:
        await store.put(owned("resp_bg", "/alice"))
        await store.put(owned("resp_other", "/alice"))
        keys: KeyStore
        if isinstance(store, PostgresResponseStore):
            keys = PostgresKeyStore(store.database, "")
        else:
            keys = SQLiteKeyStore(tmp_path / "responses.db", "")
        await keys.open()
        try:
            before = (await keys.usage())["alice"].stored_bytes
            await store.runs.begin("resp_bg", "/alice", replica="r1", lease_seconds=LEASE)
            await store.runs.append_events("resp_bg", 0, [b"x" * 1000] * 5, replica="r1")
            assert (await keys.usage())["alice"].stored_bytes == before + 5_000
        finally:
            await keys.close()


# ---- Issue 49: each owner's count and bytes kept as they change (schema version 10) -----------

async def test_each_keys_cap_and_stored_bytes_hold_through_puts_growth_deletes_and_evictions(
        make: Make, tmp_path: Path) -> None:
    async with make(3, profile="") as store:
        for n in range(80):  # past PostgreSQL's fold of size changes (64), more than once the cap
            await store.put(owned(f"resp_a{n}", "/alice", text="a" * n))
        await store.put(owned("resp_b0", "/bob"))
        await store.put(owned("resp_b1", "/bob"))
        await store.put(owned("resp_a79", "/alice", text="grown " * 100))  # an upsert that grows
        assert await store.delete("resp_a78")
        await store.put(owned("resp_a80", "/alice"))
        assert await ids(store, *(f"resp_a{n}" for n in range(81))) == {"resp_a77", "resp_a79", "resp_a80"}
        assert await ids(store, "resp_b0", "resp_b1") == {"resp_b0", "resp_b1"}
        keys: KeyStore
        if isinstance(store, PostgresResponseStore):
            keys = PostgresKeyStore(store.database, "")
        else:
            keys = SQLiteKeyStore(tmp_path / "responses.db", "")
        await keys.open()
        try:
            usage = await keys.usage()
            assert usage["alice"].stored_bytes + usage["bob"].stored_bytes == await store.size()
            assert usage["alice"].stored_bytes > usage["bob"].stored_bytes > 0
        finally:
            await keys.close()
    async with make(2, profile="") as reopened:  # the counts are the database's, not this object's
        await reopened.put(owned("resp_b2", "/bob"))
        assert await ids(reopened, "resp_b0", "resp_b1", "resp_b2") == {"resp_b1", "resp_b2"}


async def test_a_profiles_keys_version_moves_with_each_key_change_and_only_its_own(make: Make, tmp_path: Path) -> None:
    from gateway.keys.ring import KeyRing
    from gateway.store.keys import ApiKey, key_hash

    async with make(profile="alpha") as store:
        def key_store(profile: str) -> KeyStore:
            if isinstance(store, PostgresResponseStore):
                return PostgresKeyStore(store.database, profile)
            return SQLiteKeyStore(tmp_path / "responses.db", profile)

        alpha, beta = key_store("alpha"), key_store("beta")
        await alpha.open()
        await beta.open()
        try:
            ring = KeyRing("alpha", None, alpha)
            await ring.refresh()
            seen = [await alpha.keys_version()]
            await alpha.create(ApiKey("ci", key_hash("sk-ci-secret"), 1))
            seen.append(await alpha.keys_version())
            beta_before = await beta.keys_version()
            await ring.refresh()  # the version moved: the new key is read
            assert ring.find("sk-ci-secret") is not None
            await ring.refresh()  # nothing moved: the ring keeps what it read
            assert ring.find("sk-ci-secret") is not None
            assert await alpha.revoke("ci", 2)
            seen.append(await alpha.keys_version())
            await ring.refresh()
            assert ring.find("sk-ci-secret") is None
            assert len(set(seen)) == 3 and await beta.keys_version() == beta_before
        finally:
            await alpha.close()
            await beta.close()
