"""What only the PostgreSQL backend has: replicas racing on one database, an unreachable server,
and a URL whose password must never show."""

from __future__ import annotations

import asyncio
import socket

import pytest

from gateway.store.api import ConversationConflictError, StoreUnavailableError
from gateway.store.pg_database import PostgresDatabase
from gateway.store.postgres import PostgresResponseStore
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
        assert PASSWORD not in opening.value.message and "gateway:***@127.0.0.1" in opening.value.message
        with pytest.raises(StoreUnavailableError) as reading:
            await store.get("resp_1")
        assert PASSWORD not in reading.value.message
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
