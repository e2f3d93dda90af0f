"""What only PostgreSQL's background runs have: followers on one replica woken by another's writes
(LISTEN/NOTIFY), a listener connection that is killed and comes back, and a server that goes away."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from gateway.store.api import StoreUnavailableError
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.runs import APPLICATION_NAME
from gateway.store.postgres.store import PostgresResponseStore
from tests.store.test_runs_contract import GUARD, LEASE, frames
from tests.support.postgres import PASSWORD, Cluster

#: a follower's timeout: a wait that returns well before it was woken, not timed out
TIMEOUT = 30.0


@pytest.fixture
async def replicas(postgres_url: str) -> AsyncIterator[tuple[PostgresResponseStore, PostgresResponseStore]]:
    """Two replicas: two stores, two pools, two listener connections, one database."""
    async with PostgresResponseStore(PostgresDatabase(postgres_url, max_size=4), 100) as a, \
            PostgresResponseStore(PostgresDatabase(postgres_url, max_size=4), 100) as b:
        yield a, b


async def _woken(wait: asyncio.Future[None]) -> None:
    async with asyncio.timeout(GUARD):  # far under TIMEOUT: it returned because of the change
        await wait


async def _listening(cluster: Cluster, database: str, count: int) -> None:
    """Until `count` listener connections are open on the database (a first wait opens one)."""
    sql = (f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}'"
           f" AND application_name = '{APPLICATION_NAME}' AND query LIKE 'LISTEN%'")
    async with asyncio.timeout(GUARD):
        while int(cluster.psql(sql).strip() or 0) < count:
            await asyncio.sleep(0.05)


async def test_a_follower_on_one_replica_is_woken_by_writes_on_another(
        replicas: tuple[PostgresResponseStore, PostgresResponseStore], postgres_cluster: Cluster,
        postgres_url: str) -> None:
    a, b = replicas
    await a.runs.begin("resp_1", "/o", replica="ra", lease_seconds=LEASE)
    assert await b.runs.events_after("resp_1", -1) == []
    first = asyncio.ensure_future(b.runs.wait("resp_1", TIMEOUT))  # opens b's listener
    await _listening(postgres_cluster, postgres_url.rsplit("/", 1)[1], 1)
    await first  # woken once by its listener coming up (what came before it was not heard)

    for step, write in enumerate((lambda: a.runs.append_events("resp_1", 0, frames("a", "b"), replica="ra"),
                                  lambda: a.runs.request_cancel("resp_1"),
                                  lambda: a.runs.finish("resp_1", "cancelled", replica="ra"))):
        before = await b.runs.get("resp_1")
        waiting = asyncio.ensure_future(b.runs.wait("resp_1", TIMEOUT))
        await asyncio.sleep(0.1)  # b is waiting when a writes
        assert not waiting.done(), step
        await write()
        await _woken(waiting)
        assert await b.runs.get("resp_1") != before, step  # it returned because the run changed
    assert [seq for seq, _ in await b.runs.events_after("resp_1", -1)] == [0, 1]

    # a run queued on a wakes b's claim loop
    assert await b.runs.claim(replica="rb", lease_seconds=LEASE) is None
    waiting = asyncio.ensure_future(b.runs.wait_queued(TIMEOUT))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    await a.runs.enqueue("resp_2", "/o", b"{}", max_queued=10)
    await _woken(waiting)
    claimed = await b.runs.claim(replica="rb", lease_seconds=LEASE)
    assert claimed is not None and claimed.response_id == "resp_2"


async def test_a_killed_listener_costs_a_follower_at_most_its_timeout_and_comes_back(
        replicas: tuple[PostgresResponseStore, PostgresResponseStore], postgres_cluster: Cluster,
        postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    a, b = replicas
    name = postgres_url.rsplit("/", 1)[1]
    await a.runs.begin("resp_1", "/o", replica="ra", lease_seconds=LEASE)
    await b.runs.wait("resp_1", 0)  # opens b's listener
    await _listening(postgres_cluster, name, 1)

    caplog.set_level(logging.INFO, "agent_gateway.store")
    waiting = asyncio.ensure_future(b.runs.wait("resp_1", TIMEOUT))
    await asyncio.sleep(0.1)
    killed = postgres_cluster.psql(f"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                   f" WHERE datname = '{name}' AND application_name = '{APPLICATION_NAME}'")
    assert killed.strip() == "1"
    await a.runs.append_events("resp_1", 0, frames("a"), replica="ra")  # maybe unheard
    await _woken(waiting)  # woken by the drop (or the reconnect), never left to its timeout
    assert [seq for seq, _ in await b.runs.events_after("resp_1", -1)] == [0]

    await _listening(postgres_cluster, name, 1)  # back by itself
    async with asyncio.timeout(GUARD):  # the wake of the reconnect, if not already taken
        await b.runs.wait("resp_1", 1.0)
    await b.runs.events_after("resp_1", -1)
    waiting = asyncio.ensure_future(b.runs.wait("resp_1", TIMEOUT))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    await a.runs.append_events("resp_1", 1, frames("b"), replica="ra")
    await _woken(waiting)  # a later write wakes it again: heard on the new connection
    assert [seq for seq, _ in await b.runs.events_after("resp_1", -1)] == [0, 1]
    logged = caplog.text
    assert "LISTEN connection dropped" in logged and "is back" in logged and PASSWORD not in logged


async def test_a_server_that_goes_away_is_a_503_for_every_run_call_then_heals(
        postgres_cluster: Cluster, postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    async with PostgresResponseStore(PostgresDatabase(postgres_url, connect_timeout=1), 10) as store:
        runs = store.runs
        await runs.begin("resp_1", "", replica="r1", lease_seconds=LEASE)
        await runs.append_events("resp_1", 0, frames("a"), replica="r1")
        await runs.wait("resp_1", 0)  # the listener, too
        postgres_cluster.stop()
        try:
            calls = [runs.begin("resp_new", "", replica="r1", lease_seconds=LEASE),
                     runs.enqueue("resp_q", "", b"", max_queued=10), runs.claim(replica="r1", lease_seconds=LEASE),
                     runs.renew("r1", ["resp_1"], lease_seconds=LEASE),
                     runs.append_events("resp_1", 1, frames("b"), replica="r1"),
                     runs.events_after("resp_1", -1), runs.get("resp_1"),
                     runs.finish("resp_1", "completed", replica="r1"), runs.request_cancel("resp_1"),
                     runs.expire(), runs.purge_finished(0)]
            for call in calls:
                with pytest.raises(StoreUnavailableError) as failed:
                    await call
                assert failed.value.retry_after and PASSWORD not in failed.value.detail
            async with asyncio.timeout(GUARD):
                await runs.wait("resp_1", 0.2)  # a wait is no error: it returns, the read after says 503
        finally:
            postgres_cluster.start_if_stopped()
        async with asyncio.timeout(20):  # the pool heals by itself
            while True:
                try:
                    await runs.append_events("resp_1", 1, frames("b"), replica="r1")
                    break
                except StoreUnavailableError:
                    await asyncio.sleep(0.2)
        assert [seq for seq, _ in await runs.events_after("resp_1", -1)] == [0, 1]
    assert PASSWORD not in caplog.text
