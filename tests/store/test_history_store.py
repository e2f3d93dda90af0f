"""The store's bounded history (issue 25 items 3, 4, 8), on both backends: chains walked by parent
within a byte budget, a conversation's newest items within one, the byte bound over responses and
conversations, and v2 databases migrated in place."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from gateway.store.api import Conversation, ConversationItem, ResponseStore, StoredResponse
from gateway.store.owned import OwnedStore
from gateway.store.owners import DEFAULT_OWNER
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from gateway.store.postgres.store import PostgresResponseStore
from gateway.store.sqlite.store import SQLiteResponseStore

Bounded = Callable[..., ResponseStore]
TURN = "x" * 1000


@pytest.fixture(params=["sqlite", "postgres"])
def make_bounded(request: pytest.FixtureRequest, tmp_path: Path) -> Bounded:
    if request.param == "sqlite":
        return lambda cap=1000, max_bytes=None: SQLiteResponseStore(tmp_path / "r.db", cap, max_bytes=max_bytes)
    url = request.getfixturevalue("postgres_url")
    return lambda cap=1000, max_bytes=None: PostgresResponseStore(PostgresDatabase(url, max_size=4), cap,
                                                                  max_bytes=max_bytes)


def turn(rid: str, parent: str | None = None, size: int = 1000) -> StoredResponse:
    return StoredResponse(id=rid, created_at=1, response={"id": rid}, parent_id=parent,
                          transcript=[{"role": "user", "content": rid + "x" * size}],
                          input_items=[{"id": f"msg_{rid}", "type": "message"}])


async def _put_chain(store: ResponseStore, n: int) -> None:
    for index in range(n):
        await store.put(turn(f"resp_{index}", f"resp_{index - 1}" if index else None))


async def test_a_chain_is_walked_newest_first_until_the_budget_is_spent(make_bounded: Bounded) -> None:
    async with make_bounded() as store:
        await _put_chain(store, 10)
        whole = await store.chain("resp_9", max_bytes=10**9)
        assert whole is not None and whole.complete
        assert [r.id for r in whole.records] == [f"resp_{i}" for i in range(9, -1, -1)]
        assert [m["content"][:6] for m in whole.transcript()] == [f"resp_{i}" for i in range(10)]
        cut = await store.chain("resp_9", max_bytes=2500)  # each turn is some 1,030 bytes
        assert cut is not None and not cut.complete
        assert [r.id for r in cut.records] == ["resp_9", "resp_8", "resp_7"]  # the one crossing it included
        assert await store.chain("resp_missing", max_bytes=100) is None


async def test_a_chain_whose_parent_is_gone_continues_with_what_is_left(make_bounded: Bounded) -> None:
    async with make_bounded() as store:
        await _put_chain(store, 5)
        assert await store.delete("resp_2")
        chain = await store.chain("resp_4", max_bytes=10**9)
        assert chain is not None and chain.complete and [r.id for r in chain.records] == ["resp_4", "resp_3"]


async def test_reading_a_chain_keeps_all_of_it_alive(make_bounded: Bounded) -> None:
    async with make_bounded(cap=4) as store:
        await _put_chain(store, 3)
        await store.put(turn("resp_other"))
        assert await store.chain("resp_2", max_bytes=10**9) is not None  # touches resp_0..2
        await store.put(turn("resp_new"))  # evicts the least recently used: resp_other
        assert await store.get("resp_other", touch=False) is None
        assert await store.get("resp_0", touch=False) is not None


async def test_a_conversation_tail_is_its_newest_items_within_the_budget(make_bounded: Bounded) -> None:
    async with make_bounded() as store:
        items = [ConversationItem({"id": f"msg_{i}", "text": TURN}) for i in range(10)]
        await store.create_conversation(Conversation(id="conv_1", created_at=1), items)
        tail = await store.conversation_tail("conv_1", max_bytes=2500)
        assert [i.id for i in tail.items] == ["msg_7", "msg_8", "msg_9"] and not tail.complete
        assert tail.last_id == "msg_9"
        whole = await store.conversation_tail("conv_1", max_bytes=10**9)
        assert len(whole.items) == 10 and whole.complete
        checked = await store.conversation_tail("conv_1", max_bytes=100, check_ids=["msg_0", "msg_9", "msg_new"])
        assert checked.taken == {"msg_0", "msg_9"}  # wherever they are, read or not
        await store.create_conversation(Conversation(id="conv_empty", created_at=1), [])
        empty = await store.conversation_tail("conv_empty", max_bytes=100)
        assert empty.items == [] and empty.complete and empty.last_id == ""


async def test_the_byte_bound_evicts_the_oldest_responses_and_conversations(make_bounded: Bounded) -> None:
    async with make_bounded(max_bytes=20_000) as store:
        await store.create_conversation(Conversation(id="conv_old", created_at=1),
                                        [ConversationItem({"id": f"msg_{i}", "text": TURN}) for i in range(5)])
        for index in range(30):
            await store.put(turn(f"resp_{index}"))
            assert await store.size() <= 20_000
        assert await store.count() < 30
        assert await store.get("resp_29", touch=False) is not None
        assert await store.get("resp_0", touch=False) is None
        with pytest.raises(Exception, match="No conversation"):
            await store.get_conversation("conv_old")


async def test_size_counts_what_is_stored_and_what_is_deleted(make_bounded: Bounded) -> None:
    async with make_bounded() as store:
        assert await store.size() == 0
        await store.put(turn("resp_a"))
        one = await store.size()
        assert one > 1000
        await store.create_conversation(Conversation(id="conv_1", created_at=1),
                                        [ConversationItem({"id": "msg_1", "text": TURN})])
        assert await store.size() > one + 1000
        await store.delete_conversation("conv_1")
        await store.delete("resp_a")
        assert await store.size() == 0


async def test_the_sqlite_file_shrinks_after_deletes_and_evictions(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    async with SQLiteResponseStore(path, 1000) as store:
        for index in range(200):
            await store.put(turn(f"resp_{index}", size=20_000))
    full = path.stat().st_size
    async with SQLiteResponseStore(path, 10, max_bytes=100_000) as store:
        await store.put(turn("resp_new"))  # evicts down to the bounds
        for index in range(150, 200):
            await store.delete(f"resp_{index}")
    assert path.stat().st_size < full / 4


async def test_a_new_sqlite_file_reclaims_space_from_its_first_page_without_a_vacuum(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "r.db"
    with caplog.at_level("INFO", logger="agent_gateway.store"):
        async with SQLiteResponseStore(path, 1000) as store:
            await store.put(turn("resp_a"))
    assert "VACUUM" not in caplog.text  # the one-off compaction is for files made before version 3
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL


# ---- version 2 databases, migrated in place --------------------------------------------------

_V2_RECORD = ('resp_v2', 1, 1, None, '{"id": "resp_v2"}',
              '[{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"}]', '[]')


async def _continues_a_v2_chain(store: ResponseStore) -> None:
    old = await store.get("resp_v2", touch=False)
    assert old is not None and old.response == {"id": "resp_v2"}
    # made before owners (schema version 4): it belongs to the `default` key, as its conversation does
    assert old.owner == DEFAULT_OWNER and (await store.get_conversation("conv_v2")).owner == DEFAULT_OWNER
    assert await OwnedStore(store, "/alice").get("resp_v2", touch=False) is None
    assert [i.id for i in await store.conversation_items("conv_v2")] == ["msg_v2"]
    await store.put(StoredResponse(id="resp_v3", created_at=2, response={"id": "resp_v3"}, parent_id="resp_v2",
                                   transcript=[{"role": "user", "content": "Q2"}]))
    chain = await store.chain("resp_v3", max_bytes=10**6)
    assert chain is not None and chain.complete
    assert [m["content"] for m in chain.transcript()] == ["Q1", "A1", "Q2"]
    assert await store.size() > 0
    await store.append_items("conv_v2", [ConversationItem({"id": "msg_new"})])
    tail = await store.conversation_tail("conv_v2", max_bytes=10**6)
    assert [i.id for i in tail.items] == ["msg_v2", "msg_new"]


async def test_a_version_2_sqlite_file_is_migrated_and_its_chains_continue(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE responses (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, last_access INTEGER NOT NULL,
            conversation TEXT, response TEXT NOT NULL, transcript TEXT NOT NULL, input_items TEXT NOT NULL);
        CREATE INDEX responses_by_last_access ON responses (last_access);
        CREATE TABLE conversations (name TEXT PRIMARY KEY, response_id TEXT NOT NULL);
        CREATE TABLE conversation_objects (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, metadata TEXT NOT NULL);
        CREATE TABLE conversation_items (conversation_id TEXT NOT NULL, position INTEGER NOT NULL, id TEXT NOT NULL,
            item TEXT NOT NULL, model TEXT, PRIMARY KEY (conversation_id, id));
        CREATE UNIQUE INDEX conversation_items_in_order ON conversation_items (conversation_id, position);
        CREATE TABLE schema_version (version INTEGER NOT NULL);
        INSERT INTO schema_version VALUES (2);
        INSERT INTO conversation_objects VALUES ('conv_v2', 1, '{}');
        INSERT INTO conversation_items VALUES ('conv_v2', 1, 'msg_v2', '{"id": "msg_v2"}', NULL);
    """)
    old.execute("INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)", _V2_RECORD)
    old.commit()
    old.close()
    async with SQLiteResponseStore(path, 100) as store:
        await _continues_a_v2_chain(store)
    check = sqlite3.connect(path)
    assert check.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    assert check.execute("PRAGMA auto_vacuum").fetchall() == [(2,)]  # incremental from now on
    check.close()


async def test_a_version_2_postgres_database_is_migrated_and_its_chains_continue(postgres_url: str) -> None:
    conn: Any = await asyncpg.connect(postgres_url)
    try:
        await conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for version in (1, 2):
            for statement in MIGRATIONS[version]:
                await conn.execute(statement)
        await conn.execute("INSERT INTO schema_version (version) VALUES (2)")
        await conn.execute("INSERT INTO responses VALUES ($1, $2, $3, $4, $5, $6, $7)", *_V2_RECORD)
        await conn.execute("INSERT INTO conversation_objects VALUES ('conv_v2', 1, '{}')")
        await conn.execute("INSERT INTO conversation_items VALUES ($1, 1, $2, $3, NULL)",
                           "conv_v2", "msg_v2", '{"id": "msg_v2"}')
    finally:
        await conn.close()
    for _ in range(2):  # the second open finds the latest version and changes nothing
        async with PostgresResponseStore(PostgresDatabase(postgres_url), 100) as store:
            if await store.get("resp_v3", touch=False) is None:
                await _continues_a_v2_chain(store)
            version = await store.database.run(lambda c: c.fetchval("SELECT version FROM schema_version"))
            assert version == SCHEMA_VERSION
