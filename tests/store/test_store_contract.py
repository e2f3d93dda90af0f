"""The store contract (gateway/store/api.py), the same cases against every backend: a SQLite file,
and PostgreSQL on the session's throwaway cluster (skipped where its binaries are missing, never in CI)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.store.api import (
    ConversationConflictError,
    ResponseStore,
    SchemaVersionError,
    StoreUnavailableError,
)
from gateway.store.postgres.store import PostgresResponseStore
from gateway.store.sqlite.store import SCHEMA_VERSION, SQLiteResponseStore
from tests.store.records import MakeStore, record


async def test_put_then_get_returns_the_same_record(store: ResponseStore) -> None:
    original = record("resp_1", conversation="chat")
    await store.put(original)
    assert await store.get("resp_1") == original
    assert await store.count() == 1


async def test_unknown_id_is_none_and_delete_reports_whether_it_existed(store: ResponseStore) -> None:
    assert await store.get("resp_missing") is None
    await store.put(record("resp_1"))
    assert await store.delete("resp_1") is True
    assert await store.get("resp_1") is None
    assert await store.delete("resp_1") is False
    assert await store.count() == 0


async def test_put_of_an_existing_id_replaces_it(store: ResponseStore) -> None:
    await store.put(record("resp_1", text="first"))
    await store.put(record("resp_1", text="second"))
    got = await store.get("resp_1")
    assert got is not None and got.transcript[0]["content"] == "second"
    assert await store.count() == 1


async def test_lru_evicts_the_least_recently_read_not_the_oldest(make_store: MakeStore) -> None:
    async with make_store(3) as store:
        for rid in ("resp_a", "resp_b", "resp_c"):
            await store.put(record(rid))
        assert await store.get("resp_a") is not None  # touched: now the most recently used
        await store.put(record("resp_d"))
        assert await store.get("resp_b", touch=False) is None
        assert await store.get("resp_a", touch=False) is not None
        assert await store.count() == 3


async def test_get_without_touch_does_not_keep_a_record_alive(make_store: MakeStore) -> None:
    async with make_store(2) as store:
        await store.put(record("resp_a"))
        await store.put(record("resp_b"))
        assert await store.get("resp_a", touch=False) is not None
        await store.put(record("resp_c"))
        assert await store.get("resp_a", touch=False) is None


async def test_conversation_head_follows_the_latest_put(store: ResponseStore) -> None:
    assert await store.conversation_head("chat") is None
    await store.put(record("resp_1", conversation="chat"))
    await store.put(record("resp_2", conversation="chat"))
    head = await store.conversation_head("chat")
    assert head is not None and head.id == "resp_2"


async def test_a_conversation_whose_head_was_evicted_starts_fresh(make_store: MakeStore) -> None:
    async with make_store(1) as store:
        await store.put(record("resp_1", conversation="chat"))
        await store.put(record("resp_2"))
        assert await store.conversation_head("chat") is None


async def test_deleting_a_conversation_head_starts_the_conversation_fresh(store: ResponseStore) -> None:
    await store.put(record("resp_1", conversation="chat"))
    assert await store.delete("resp_1")
    assert await store.conversation_head("chat") is None


async def test_records_survive_a_reopen(make_store: MakeStore) -> None:
    async with make_store(100) as store:
        await store.put(record("resp_1", conversation="chat"))
    async with make_store(100) as again:
        assert await again.get("resp_1") == record("resp_1", conversation="chat")
        head = await again.conversation_head("chat")
        assert head is not None and head.id == "resp_1"


async def test_a_concurrent_burst_of_puts_loses_nothing(store: ResponseStore) -> None:
    await asyncio.gather(*(store.put(record(f"resp_{i}")) for i in range(50)))
    assert await store.count() == 50
    for i in range(50):
        assert await store.get(f"resp_{i}", touch=False) is not None


async def test_a_turn_from_the_head_it_continued_is_stored(store: ResponseStore) -> None:
    await store.put(record("resp_1", conversation="chat", expected_head=""))
    await store.put(record("resp_2", conversation="chat", expected_head="resp_1"))
    head = await store.conversation_head("chat")
    assert head is not None and head.id == "resp_2"


async def test_a_background_turn_stored_in_progress_then_finished_becomes_the_head(store: ResponseStore) -> None:
    """A background response (routes/responses_background.py) is put while it runs, with no
    conversation and no turn, then put again when it ends: only the second moves the head."""
    await store.put(record("resp_1", conversation="chat", expected_head=""))
    running = record("resp_2", text="running")
    running.transcript = []
    await store.put(running)
    head = await store.conversation_head("chat")
    assert head is not None and head.id == "resp_1"
    await store.put(record("resp_2", conversation="chat", text="done", expected_head="resp_1"))
    head = await store.conversation_head("chat")
    assert head is not None and head.id == "resp_2" and head.response["output"][0]["text"] == "done"
    chain = await store.chain("resp_2", max_bytes=10_000)
    assert chain is not None and [r.id for r in chain.records] == ["resp_2"]
    assert await store.count() == 2


async def test_a_turn_whose_head_moved_meanwhile_is_a_409_and_stores_nothing(store: ResponseStore) -> None:
    await store.put(record("resp_1", conversation="chat", expected_head=""))
    # two turns both continued from resp_1; whichever commits second is refused
    results = await asyncio.gather(
        store.put(record("resp_a", conversation="chat", expected_head="resp_1")),
        store.put(record("resp_b", conversation="chat", expected_head="resp_1")),
        return_exceptions=True)
    refused = [r for r in results if isinstance(r, ConversationConflictError)]
    assert len(refused) == 1 and refused[0].status == 409
    head = await store.conversation_head("chat")
    assert head is not None and head.id in ("resp_a", "resp_b")
    loser = "resp_b" if head.id == "resp_a" else "resp_a"
    assert await store.get(loser, touch=False) is None
    assert await store.count() == 2


async def test_a_turn_whose_head_was_deleted_meanwhile_starts_the_name_afresh(store: ResponseStore) -> None:
    await store.put(record("resp_1", conversation="chat"))
    await store.delete("resp_1")  # no other turn was stored: nothing to lose
    await store.put(record("resp_2", conversation="chat", expected_head="resp_1"))
    head = await store.conversation_head("chat")
    assert head is not None and head.id == "resp_2"


async def test_a_fresh_turn_racing_another_fresh_turn_of_the_same_name_is_a_409(store: ResponseStore) -> None:
    await store.put(record("resp_1", conversation="chat", expected_head=""))
    with pytest.raises(ConversationConflictError):
        await store.put(record("resp_2", conversation="chat", expected_head=""))


async def test_the_readiness_check_passes_on_an_open_store(store: ResponseStore) -> None:
    await store.check()


async def test_operations_after_close_are_a_503(make_store: MakeStore) -> None:
    store = make_store(10)
    await store.open()
    await store.close()
    with pytest.raises(StoreUnavailableError):
        await store.get("resp_1")
    await store.close()  # twice is fine


async def _set_newer_schema(store: ResponseStore) -> None:
    if isinstance(store, SQLiteResponseStore):
        import aiosqlite

        async with aiosqlite.connect(store.path) as db:
            await db.execute("UPDATE schema_version SET version = 99")
            await db.commit()
    else:
        assert isinstance(store, PostgresResponseStore)
        await store.database.run(lambda conn: conn.execute("UPDATE schema_version SET version = 99"))


async def test_a_database_with_a_newer_schema_is_refused_naming_both_versions(make_store: MakeStore) -> None:
    async with make_store(10) as store:
        await _set_newer_schema(store)
    with pytest.raises(SchemaVersionError, match=f"schema version 99, newer than version {SCHEMA_VERSION}"):
        await make_store(10).open()


async def test_two_stores_on_one_database_share_records_and_the_lru_bound(make_store: MakeStore) -> None:
    """Two replicas (on SQLite: two processes' stores on one file)."""
    async with make_store(3) as a, make_store(3) as b:
        await a.put(record("resp_1", conversation="chat"))
        await b.put(record("resp_2"))
        got = await b.get("resp_1")
        assert got is not None and got.id == "resp_1"  # and touched, cluster-wide
        head = await b.conversation_head("chat")
        assert head is not None and head.id == "resp_1"
        await a.put(record("resp_3"))
        await b.put(record("resp_4"))  # evicts resp_2: resp_1 was read since
        assert await a.count() == 3
        assert await a.get("resp_2", touch=False) is None
        assert await a.get("resp_1", touch=False) is not None
