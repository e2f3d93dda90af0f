"""The limits replicas share on PostgreSQL (store/postgres/limits.py): two databases objects on one
database stand for two replicas admitting one key at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from gateway.store.api import StoreUnavailableError
from gateway.store.limits import Ask, Correction
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.limit_tables import KEY_LOCK_SPACE
from gateway.store.postgres.limits import PostgresLimits
from tests.support.tcp_gate import TcpGate


@pytest.fixture
async def replicas(postgres_url: str) -> AsyncIterator[list[PostgresLimits]]:
    databases = [PostgresDatabase(postgres_url, max_size=8) for _ in range(2)]
    for database in databases:
        await database.open()
    try:
        yield [PostgresLimits(database, f"replica-{i}") for i, database in enumerate(databases)]
    finally:
        for database in databases:
            await database.close()


async def test_requests_per_minute_from_two_replicas_at_once_are_admitted_exactly_to_the_limit(
        replicas: list[PostgresLimits]) -> None:
    asks = [replicas[i % 2].admit(Ask("p", "alice", rpm=30)) for i in range(80)]
    answers = await asyncio.gather(*asks)
    admitted = [a for a in answers if a.refused is None]
    assert len(admitted) == 30
    assert {a.refused for a in answers if a.refused is not None} == {"requests"}
    assert sorted(a.requests for a in admitted) == list(range(1, 31))  # each saw the ones before it
    refused = [a for a in answers if a.refused is not None]
    assert all(0 < a.retry_after <= 60 for a in refused)
    other = await replicas[0].admit(Ask("p", "bob", rpm=30))  # another key has its own minute
    assert other.refused is None and other.requests == 1


async def test_concurrent_runs_are_shared_released_and_expire_with_their_lease(
        replicas: list[PostgresLimits]) -> None:
    first = await replicas[0].admit(Ask("p", "alice", max_runs=1, run_id="run-1"))
    second = await replicas[1].admit(Ask("p", "alice", max_runs=1, run_id="run-2"))
    assert first.refused is None and second.refused == "runs"
    await replicas[0].release(["run-1"])
    third = await replicas[1].admit(Ask("p", "alice", max_runs=1, run_id="run-3"), lease_seconds=0.2)
    assert third.refused is None
    assert (await replicas[0].admit(Ask("p", "alice", max_runs=1, run_id="run-4"))).refused == "runs"
    await asyncio.sleep(0.4)  # replica 1 died: its lease ran out unrenewed
    assert (await replicas[0].admit(Ask("p", "alice", max_runs=1, run_id="run-5"))).refused is None
    await replicas[0].renew(["run-5"], 30)
    assert (await replicas[1].admit(Ask("p", "alice", max_runs=1, run_id="run-6"))).refused == "runs"


async def test_tokens_are_reserved_then_corrected_and_the_request_crossing_the_limit_is_the_last(
        replicas: list[PostgresLimits]) -> None:
    ask = Ask("p", "alice", tpm=1000, budget=5000, period_start=100, tokens=600)
    first = await replicas[0].admit(ask)
    assert first.refused is None and first.tokens == 600 and first.budget_used == 600
    second = await replicas[1].admit(ask)  # 600 < 1000: admitted, and it crosses the limit
    assert second.refused is None and second.tokens == 1200
    third = await replicas[0].admit(ask)
    assert third.refused == "tokens" and 0 < third.retry_after <= 60 and third.tokens == 1200
    # the runs used less than reserved: corrected, the minute has room again
    await replicas[1].reconcile([Correction("p", "alice", -550, first.admission_id, 100),
                                 Correction("p", "alice", -550, second.admission_id, 100)])
    fourth = await replicas[1].admit(ask)
    assert fourth.refused is None and fourth.tokens == 700 and fourth.budget_used == 700
    await replicas[0].reconcile([Correction("p", "alice", 4400, fourth.admission_id, 100)])
    assert (await replicas[0].admit(ask)).refused == "budget"  # 5100 used of 5000
    assert (await replicas[0].admit(Ask("p", "alice", budget=5000, period_start=200,
                                        tokens=10))).refused is None  # the next period starts afresh


async def test_stored_bytes_checked_from_two_replicas_at_once_never_pass_the_quota(
        replicas: list[PostgresLimits]) -> None:
    at = await replicas[0].clock()
    await replicas[0].measured("p", {"alice": 400}, at)
    answers = await asyncio.gather(*(replicas[i % 2].room("p", "alice", 100, 1000) for i in range(10)))
    assert answers.count(None) == 6  # 400 + 6 x 100 = 1000
    assert all(held is not None and held + 100 > 1000 for held in answers if held is not None)
    # a later measure holds what was written (and a delete's room): writes checked since count on top
    await asyncio.sleep(0.05)
    await replicas[1].measured("p", {"alice": 300}, await replicas[1].clock())
    await replicas[0].measured("p", {"alice": 900}, at)  # an older measure arriving late changes nothing
    held = await replicas[1].room("p", "alice", 800, 1000)
    assert held == 300 + 600  # the writes checked within the grace before the measure count twice


async def test_an_admission_is_one_round_trip_to_the_database_release_and_all(postgres_url: str) -> None:
    """Counted in what the client sends (each Sync or simple Query is a round trip it waits on): a
    pooled connection is given back without a reset query of its own."""
    port = int(postgres_url.rsplit(":", 1)[1].split("/")[0])
    gate = TcpGate(port)
    await gate.start()
    database = PostgresDatabase(postgres_url.replace(f":{port}/", f":{gate.port}/"), max_size=8)
    try:
        await database.open()
        limits = PostgresLimits(database, "replica-0")
        await limits.admit(Ask("p", "alice", rpm=100))  # the pool's connection made and warm
        before = gate.round_trips.count
        answers = [await limits.admit(Ask("p", "alice", rpm=100, max_runs=20, run_id=f"run-{i}", tpm=10**6,
                                          tokens=10)) for i in range(10)]
        assert [a.requests for a in answers] == list(range(2, 12)) and all(a.refused is None for a in answers)
        assert gate.round_trips.count - before == 10
    finally:
        await database.close()
        await gate.stop()


async def test_admissions_on_a_kept_connection_fail_while_the_database_is_cut_off_and_heal_after(
        postgres_url: str) -> None:
    port = int(postgres_url.rsplit(":", 1)[1].split("/")[0])
    gate = TcpGate(port)
    await gate.start()
    database = PostgresDatabase(postgres_url.replace(f":{port}/", f":{gate.port}/"), max_size=8, connect_timeout=2)
    try:
        await database.open()
        limits = PostgresLimits(database, "replica-0")
        assert (await limits.admit(Ask("p", "alice", rpm=100))).requests == 1  # its connection now kept
        gate.close()
        await asyncio.sleep(0.1)
        for _ in range(2):  # closed: never admitted unchecked
            with pytest.raises(StoreUnavailableError):
                await limits.admit(Ask("p", "alice", rpm=100))
        gate.open()
        assert (await limits.admit(Ask("p", "alice", rpm=100))).requests == 2  # a fresh connection, same minute
    finally:
        await database.close()
        await gate.stop()


async def test_an_admission_cancelled_while_it_waits_for_the_key_leaves_its_connection_usable(
        postgres_url: str) -> None:
    database = PostgresDatabase(postgres_url, max_size=8)
    await database.open()
    holder = await asyncpg.connect(postgres_url)
    try:
        limits = PostgresLimits(database, "replica-0")
        await limits.admit(Ask("p", "alice", rpm=100))
        async with holder.transaction():  # another replica holds the key's lock
            await holder.execute("SELECT pg_advisory_xact_lock($1, hashtext('p/alice'))", KEY_LOCK_SPACE)
            waiting = asyncio.ensure_future(limits.admit(Ask("p", "alice", rpm=100)))
            await asyncio.sleep(0.3)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
        answers = [await limits.admit(Ask("p", "alice", rpm=100)) for _ in range(3)]
        assert [a.requests for a in answers] == [2, 3, 4]  # the cancelled one was not counted
    finally:
        await holder.close()
        await asyncio.wait_for(database.close(), 15)  # nothing kept out of the pool holds its close
