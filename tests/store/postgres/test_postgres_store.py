"""What only the PostgreSQL backend has: replicas racing on one database, an unreachable server,
a URL whose password must never show, and migrating a database an older gateway wrote."""

from __future__ import annotations

import asyncio
import dataclasses
import socket

import asyncpg
import pytest

from gateway.store.api import (
    ConversationConflictError,
    DuplicateItemError,
    StoreUnavailableError,
)
from gateway.store.json_columns import to_text
from gateway.store.owned import OwnedStore
from gateway.store.owners import DEFAULT_OWNER
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from gateway.store.postgres.store import _UPSERT_HEAD, PostgresResponseStore
from tests.store.test_conversation_store import conv, ids, item
from tests.store.test_store_contract import record
from tests.support.postgres import PASSWORD, Cluster


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_turns_racing_on_two_replicas_keep_one_and_refuse_the_other(postgres_url: str) -> None:
    async with PostgresResponseStore(PostgresDatabase(postgres_url), 100) as a, \
            PostgresResponseStore(PostgresDatabase(postgres_url), 100) as b:
        await a.put(record("resp_0", conversation="chat", expected_head=""))
        for round_ in range(10):
            head = await a.conversation_head("chat", touch=False)
            assert head is not None
            results = await asyncio.gather(
                a.put(record(f"resp_a{round_}", conversation="chat", expected_head=head.id)),
                b.put(record(f"resp_b{round_}", conversation="chat", expected_head=head.id)),
                return_exceptions=True)
            assert sum(isinstance(r, ConversationConflictError) for r in results) == 1
            assert sum(r is None for r in results) == 1


async def test_eviction_racing_reads_returns_whole_records_or_none(postgres_url: str) -> None:
    async with PostgresResponseStore(PostgresDatabase(postgres_url), 5) as writer, \
            PostgresResponseStore(PostgresDatabase(postgres_url), 5) as reader:
        expected = {f"resp_{i}": record(f"resp_{i}", text=f"turn {i} " * 200) for i in range(60)}

        async def write() -> None:
            for rid in expected:
                await writer.put(expected[rid])

        async def read() -> list[object]:
            seen: list[object] = []
            for _ in range(150):
                for i in range(0, 60, 7):
                    seen.append(await reader.get(f"resp_{i}"))
            return seen

        _, seen = await asyncio.gather(write(), read())
        for got in seen:
            assert got is None or got == expected[got.id]  # type: ignore[attr-defined]
        assert await reader.count() == 5


async def test_an_unreachable_server_is_a_503_that_never_shows_the_password() -> None:
    url = f"postgresql://gateway:{PASSWORD}@127.0.0.1:{_closed_port()}/db"
    store = PostgresResponseStore(PostgresDatabase(url, connect_timeout=2), 10)
    with pytest.raises(StoreUnavailableError) as opening:
        await store.open()
    try:
        assert opening.value.retry_after is not None
        assert PASSWORD not in opening.value.message
        assert "gateway:***@127.0.0.1" in opening.value.detail and PASSWORD not in opening.value.detail
        with pytest.raises(StoreUnavailableError) as reading:
            await store.get("resp_1")
        assert PASSWORD not in reading.value.message + reading.value.detail
        with pytest.raises(StoreUnavailableError):
            await store.check()
    finally:
        await store.close()


async def test_a_server_down_at_start_is_used_once_it_is_up_without_a_restart(
        postgres_cluster: Cluster, postgres_url: str) -> None:
    postgres_cluster.stop()
    database = PostgresDatabase(postgres_url, connect_timeout=1)
    store = PostgresResponseStore(database, 10)
    try:
        with pytest.raises(StoreUnavailableError):
            await store.open()
        with pytest.raises(StoreUnavailableError):
            await store.put(record("resp_1"))
        postgres_cluster.start()
        async with asyncio.timeout(30):  # the background retry backs off up to 10 s
            while True:
                try:
                    await store.check()
                    break
                except StoreUnavailableError:
                    await asyncio.sleep(0.2)
        await store.put(record("resp_1"))
        assert await store.get("resp_1") is not None
    finally:
        postgres_cluster.start_if_stopped()
        await store.close()


async def test_a_server_restarted_mid_traffic_fails_in_flight_with_503_then_heals(
        postgres_cluster: Cluster, postgres_url: str) -> None:
    async with PostgresResponseStore(PostgresDatabase(postgres_url, connect_timeout=1), 10) as store:
        await store.put(record("resp_1"))
        postgres_cluster.stop()
        try:
            with pytest.raises(StoreUnavailableError) as failed:
                await store.get("resp_1")
            assert failed.value.retry_after is not None
        finally:
            postgres_cluster.start_if_stopped()
        async with asyncio.timeout(20):  # the pool replaces its broken connections by itself
            while True:
                try:
                    assert await store.get("resp_1") is not None
                    break
                except StoreUnavailableError:
                    await asyncio.sleep(0.2)


async def test_a_failed_group_of_puts_fails_each_put_with_its_own_503(postgres_cluster: Cluster,
                                                                     postgres_url: str) -> None:
    async with PostgresResponseStore(PostgresDatabase(postgres_url, connect_timeout=1), 100) as store:
        await store.put(record("resp_0"))
        postgres_cluster.stop()
        try:
            results = await asyncio.gather(*(store.put(record(f"resp_{i}")) for i in range(1, 6)),
                                           return_exceptions=True)
        finally:
            postgres_cluster.start_if_stopped()
        assert all(isinstance(r, StoreUnavailableError) and r.retry_after for r in results), results
        assert len({id(r) for r in results}) == 5


async def test_a_version_1_database_migrates_to_the_latest_and_keeps_its_responses_and_heads(postgres_url: str) -> None:
    # the database as a version-1 gateway left it: only its schema, one response heading "chat"
    old = record("resp_old", conversation="chat", text="kept ü")
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for statement in MIGRATIONS[1]:
            await conn.execute(statement)
        await conn.execute("INSERT INTO schema_version (version) VALUES (1)")
        # the row as version 1 wrote it (its columns, its JSON)
        await conn.execute("INSERT INTO responses VALUES ($1, $2, 1, $3, $4, $5, $6)", old.id, old.created_at,
                           old.conversation, to_text(old.response), to_text(old.transcript), to_text(old.input_items))
        await conn.execute(_UPSERT_HEAD, "chat", "resp_old")
    finally:
        await conn.close()
    for _ in range(2):  # the second open finds the latest version and changes nothing
        async with PostgresResponseStore(PostgresDatabase(postgres_url), 10) as store:
            # what was there belongs to the `default` key (schema version 4): its view reads it as it was
            default = OwnedStore(store, DEFAULT_OWNER)
            assert await default.get("resp_old", touch=False) == dataclasses.replace(old, owner=DEFAULT_OWNER)
            head = await default.conversation_head("chat", touch=False)
            assert head is not None and head.id == "resp_old"
            assert await OwnedStore(store, "/bob").get("resp_old", touch=False) is None
            version = await store.database.run(lambda c: c.fetchval("SELECT version FROM schema_version"))
            assert version == SCHEMA_VERSION
            await store.create_conversation(conv(), [item("msg_a")])
            await store.delete_conversation("conv_1")


async def test_appends_racing_on_two_replicas_keep_one_and_refuse_the_other(postgres_url: str) -> None:
    async with PostgresResponseStore(PostgresDatabase(postgres_url), 100) as a, \
            PostgresResponseStore(PostgresDatabase(postgres_url), 100) as b:
        await a.create_conversation(conv(), [item("msg_0")])
        for round_ in range(10):
            last = f"msg_{round_}"
            results = await asyncio.gather(
                a.append_items("conv_1", [item(f"msg_{round_ + 1}")], expected_last=last,
                               response=record(f"resp_a{round_}")),
                b.append_items("conv_1", [item(f"msg_{round_ + 1}")], expected_last=last,
                               response=record(f"resp_b{round_}")),
                return_exceptions=True)
            assert sum(isinstance(r, ConversationConflictError) for r in results) == 1, results
            assert sum(r is None for r in results) == 1
            kept = "a" if results[0] is None else "b"
            lost = "b" if kept == "a" else "a"
            assert await b.get(f"resp_{kept}{round_}", touch=False) is not None
            assert await a.get(f"resp_{lost}{round_}", touch=False) is None
        assert ids(await b.conversation_items("conv_1")) == [f"msg_{i}" for i in range(11)]


async def test_the_same_item_id_appended_from_two_replicas_is_one_400_not_a_503(postgres_url: str) -> None:
    async with PostgresResponseStore(PostgresDatabase(postgres_url), 100) as a, \
            PostgresResponseStore(PostgresDatabase(postgres_url), 100) as b:
        await a.create_conversation(conv(), [])
        for round_ in range(10):
            results = await asyncio.gather(a.append_items("conv_1", [item(f"msg_{round_}")]),
                                           b.append_items("conv_1", [item(f"msg_{round_}")]),
                                           return_exceptions=True)
            assert sorted(type(r).__name__ for r in results) == ["DuplicateItemError", "NoneType"], results
            assert all(r.status == 400 for r in results if isinstance(r, DuplicateItemError))
        assert ids(await a.conversation_items("conv_1")) == [f"msg_{i}" for i in range(10)]


async def test_an_append_whose_response_lost_its_named_conversation_race_keeps_no_item(postgres_url: str) -> None:
    async with PostgresResponseStore(PostgresDatabase(postgres_url), 100) as store:
        await store.create_conversation(conv(), [])
        await store.put(record("resp_1", conversation="chat"))
        with pytest.raises(ConversationConflictError):
            await store.append_items("conv_1", [item("msg_a")],
                                     response=record("resp_2", conversation="chat", expected_head="resp_0"))
        assert await store.conversation_items("conv_1") == []
        assert await store.get("resp_2", touch=False) is None


async def test_appends_and_puts_mixed_on_two_replicas_never_deadlock(postgres_url: str) -> None:
    # appends lock their conversation then the write lock; puts take only the write lock; item
    # deletes take the conversation: all at once on two replicas, every one of them must land
    async with PostgresResponseStore(PostgresDatabase(postgres_url), 20) as a, \
            PostgresResponseStore(PostgresDatabase(postgres_url), 20) as b:
        for c in range(4):
            await a.create_conversation(conv(f"conv_{c}"), [item("msg_first")])

        async def turns(store: PostgresResponseStore, name: str) -> None:
            for turn in range(15):
                c = turn % 4
                await store.append_items(f"conv_{c}", [item(f"msg_{name}{turn}"), item(f"msg_{name}{turn}x")],
                                         response=record(f"resp_{name}{turn}", conversation=f"chat_{c}"))
                await store.put(record(f"resp_{name}{turn}p", conversation=f"chat_{c}"))
                await store.delete_item(f"conv_{c}", f"msg_{name}{turn}x")

        await asyncio.gather(*(turns(store, f"{side}{w}") for side, store in (("a", a), ("b", b))
                               for w in range(3)))
        lengths = [len(await b.conversation_items(f"conv_{c}")) for c in range(4)]
        assert sum(lengths) == 4 + 6 * 15
        assert await a.count() == 20


async def test_an_append_while_the_server_is_down_is_a_503(postgres_cluster: Cluster, postgres_url: str) -> None:
    async with PostgresResponseStore(PostgresDatabase(postgres_url, connect_timeout=1), 10) as store:
        await store.create_conversation(conv(), [])
        postgres_cluster.stop()
        try:
            for call in (store.append_items("conv_1", [item("msg_a")], response=record("resp_1")),
                         store.list_items("conv_1", limit=10), store.get_conversation("conv_1")):
                with pytest.raises(StoreUnavailableError) as failed:
                    await call
                assert failed.value.retry_after is not None and PASSWORD not in failed.value.message
        finally:
            postgres_cluster.start_if_stopped()
