"""The background runs' contract (gateway/store/runs.py) against both backends: a SQLite file and
PostgreSQL on the session's throwaway cluster. Two store objects on one database are two replicas
(with SQLite, two connections' worth of writers on one file, serialised by its lock)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.store.api import ResponseStore, StoreUnavailableError
from gateway.store.observed import ObservedStore
from gateway.store.owned import OwnedStore
from gateway.store.runs import TERMINAL, LostRunError, OwnerQueueFullError, QueueFullError, Run
from tests.store.records import MakeStore, record

LEASE = 60.0  # a lease that does not run out during a test
#: how long a follower may take to be woken before the test says it only timed out: far under the
#: waits' own timeouts (30 s), far over any wake-up on a loaded machine
GUARD = 10.0


@pytest.fixture
async def two(make_store: MakeStore) -> AsyncIterator[tuple[ResponseStore, ResponseStore]]:
    """Two replicas on one database."""
    async with make_store(100) as a, make_store(100) as b:
        yield a, b


def frames(*texts: str) -> list[bytes]:
    return [f"event: x\ndata: {text}\n\n".encode() for text in texts]


async def test_a_run_begins_renews_streams_its_events_and_finishes(store: ResponseStore) -> None:
    runs = store.runs
    assert await runs.get("resp_1") is None
    await runs.begin("resp_1", "/alice", replica="r1", lease_seconds=LEASE)
    assert await runs.get("resp_1") == Run("resp_1", "/alice", "in_progress", "r1", False, b"", -1)
    assert await runs.events_after("resp_1", -1) == []

    await runs.append_events("resp_1", 0, frames("a", "b"), replica="r1")
    await runs.append_events("resp_1", 2, frames("c"), replica="r1")
    assert await runs.events_after("resp_1", -1) == list(enumerate(frames("a", "b", "c")))
    assert await runs.events_after("resp_1", 0) == [(1, frames("b")[0]), (2, frames("c")[0])]
    assert await runs.events_after("resp_1", 0, limit=1) == [(1, frames("b")[0])]
    assert await runs.events_after("resp_1", 2) == []
    assert await runs.renew("r1", ["resp_1", "resp_unknown"], lease_seconds=LEASE) == {"resp_1": False}
    assert await runs.renew("r2", ["resp_1"], lease_seconds=LEASE) == {}  # not r2's
    assert (await runs.get("resp_1")) == Run("resp_1", "/alice", "in_progress", "r1", False, b"", 2)

    await runs.finish("resp_1", "completed", replica="r1")
    ended = await runs.get("resp_1")
    assert ended is not None and ended.status == "completed" and ended.replica == "" and ended.last_seq == 2
    assert await runs.events_after("resp_1", -1) == list(enumerate(frames("a", "b", "c")))  # kept for replays
    assert await runs.renew("r1", ["resp_1"], lease_seconds=LEASE) == {}  # ended: no lease to renew
    with pytest.raises(LostRunError):
        await runs.append_events("resp_1", 3, frames("late"), replica="r1")
    with pytest.raises(LostRunError):
        await runs.finish("resp_1", "failed", replica="r1")
    with pytest.raises(ValueError):
        await runs.begin("resp_1", "/alice", replica="r1", lease_seconds=LEASE)  # an id runs once


async def test_every_view_of_the_store_hands_its_runs_through(store: ResponseStore) -> None:
    # runs are addressed by id once the route has read the response through its owner's view
    assert OwnedStore(store, "/alice").runs is store.runs
    assert ObservedStore(store, lambda *_: None).runs is store.runs


async def test_runs_survive_a_reopen(make_store: MakeStore) -> None:
    async with make_store(100) as store:
        await store.runs.begin("resp_1", "/alice", replica="r1", lease_seconds=LEASE)
        await store.runs.append_events("resp_1", 0, frames("a"), replica="r1")
        await store.runs.enqueue("resp_2", "/bob", b'{"input": "hi"}', max_queued=10)
    async with make_store(100) as store:
        assert await store.runs.events_after("resp_1", -1) == list(enumerate(frames("a")))
        claimed = await store.runs.claim(replica="r2", lease_seconds=LEASE)
        assert claimed == Run("resp_2", "/bob", "in_progress", "r2", False, b'{"input": "hi"}', -1)


async def test_a_gap_or_a_repeat_in_the_numbering_is_a_value_error_and_stores_nothing(store: ResponseStore) -> None:
    runs = store.runs
    await runs.begin("resp_1", "", replica="r1", lease_seconds=LEASE)
    with pytest.raises(ValueError, match="from 0"):
        await runs.append_events("resp_1", 1, frames("gap"), replica="r1")
    await runs.append_events("resp_1", 0, frames("a", "b"), replica="r1")
    for first in (0, 1, 3):  # a repeat of the batch, of its last event, and a gap
        with pytest.raises(ValueError, match="from 2"):
            await runs.append_events("resp_1", first, frames("x", "y"), replica="r1")
    assert await runs.events_after("resp_1", -1) == list(enumerate(frames("a", "b")))
    assert (await runs.get("resp_1")).last_seq == 1  # type: ignore[union-attr]
    await runs.append_events("resp_1", 2, frames("c"), replica="r1")  # still usable
    with pytest.raises(ValueError, match="one of"):
        await runs.finish("resp_1", "in_progress", replica="r1")


async def test_a_run_whose_lease_ran_out_is_failed_once_and_its_holder_loses_it(
        two: tuple[ResponseStore, ResponseStore]) -> None:
    a, b = two
    await a.runs.begin("resp_stale", "/alice", replica="ra", lease_seconds=0)  # ran out at once
    await a.runs.begin("resp_live", "/alice", replica="ra", lease_seconds=LEASE)
    await a.runs.append_events("resp_stale", 0, frames("a"), replica="ra")  # not expired by anyone yet
    expired = await b.runs.expire()
    assert expired == [Run("resp_stale", "/alice", "failed", "ra", False, b"", 0)]  # replica: who held it
    assert await a.runs.expire() == [] and await b.runs.expire() == []
    assert (await a.runs.get("resp_stale")).status == "failed"  # type: ignore[union-attr]
    # the old holder's renew no longer lists it; its writes are refused
    assert await a.runs.renew("ra", ["resp_stale", "resp_live"], lease_seconds=LEASE) == {"resp_live": False}
    with pytest.raises(LostRunError):
        await a.runs.append_events("resp_stale", 1, frames("b"), replica="ra")
    with pytest.raises(LostRunError):
        await a.runs.finish("resp_stale", "completed", replica="ra")
    assert await a.runs.events_after("resp_stale", -1) == list(enumerate(frames("a")))
    # a renewed lease keeps a run: renewing with 0 makes it run out now
    assert await a.runs.renew("ra", ["resp_live"], lease_seconds=0) == {"resp_live": False}
    assert [run.response_id for run in await a.runs.expire()] == ["resp_live"]


async def test_two_replicas_expiring_at_once_mark_each_run_once(two: tuple[ResponseStore, ResponseStore]) -> None:
    a, b = two
    for i in range(20):
        await a.runs.begin(f"resp_{i}", "", replica="gone", lease_seconds=0)
    marked = await asyncio.gather(*(store.runs.expire() for store in (a, b, a, b)))
    ids = [run.response_id for runs in marked for run in runs]
    assert sorted(ids) == sorted(f"resp_{i}" for i in range(20))  # each once, by whichever asked first


async def test_the_queue_holds_max_queued_runs_then_is_a_429_saying_how_many(store: ResponseStore) -> None:
    runs = store.runs
    for i in range(3):
        await runs.enqueue(f"resp_{i}", "/alice", b"request %d" % i, max_queued=3)
    with pytest.raises(QueueFullError) as full:
        await runs.enqueue("resp_3", "/alice", b"request 3", max_queued=3)
    assert full.value.status == 429 and full.value.retry_after
    assert "3 background responses are queued" in full.value.message and "retry" in full.value.message
    assert await runs.get("resp_3") is None
    # a running one does not count, a claimed one leaves the queue
    await runs.begin("resp_running", "", replica="r1", lease_seconds=LEASE)
    claimed = await runs.claim(replica="r1", lease_seconds=LEASE)
    assert claimed is not None and claimed.response_id == "resp_0"  # the oldest first
    await runs.enqueue("resp_3", "/alice", b"request 3", max_queued=3)
    assert await runs.get("resp_3") == Run("resp_3", "/alice", "queued", "", False, b"request 3", -1)


async def test_an_owner_holds_at_most_its_share_and_a_claim_skips_the_owners_it_is_told(
        two: tuple[ResponseStore, ResponseStore]) -> None:
    """Issue 42 (item 6): `max_per_owner` bounds one owner's queued runs (the others still queue),
    and `skip_owners` leaves those owners' runs queued while later runs of others are claimed."""
    a, b = two
    for i in range(2):
        await a.runs.enqueue(f"resp_a{i}", "/alice", b"", max_queued=10, max_per_owner=2)
    with pytest.raises(OwnerQueueFullError) as full:
        await b.runs.enqueue("resp_a2", "/alice", b"", max_queued=10, max_per_owner=2)
    assert full.value.status == 429 and "share" in full.value.message
    await b.runs.enqueue("resp_b0", "/bob", b"", max_queued=10, max_per_owner=2)
    claimed = await b.runs.claim(replica="rb", lease_seconds=LEASE, skip_owners=["/alice"])
    assert claimed is not None and claimed.response_id == "resp_b0"
    assert await a.runs.claim(replica="ra", lease_seconds=LEASE, skip_owners=["/alice", "/bob"]) is None
    assert (await a.runs.get("resp_a0")) is not None and (await a.runs.get("resp_a0")).status == "queued"
    claimed = await a.runs.claim(replica="ra", lease_seconds=LEASE)
    assert claimed is not None and claimed.response_id == "resp_a0"


async def test_claims_take_the_oldest_first_each_run_once_across_replicas(
        two: tuple[ResponseStore, ResponseStore]) -> None:
    a, b = two
    n = 12
    for i in range(n):
        await (a if i % 2 else b).runs.enqueue(f"resp_{i:02}", "/o", b"r%d" % i, max_queued=100)
    claims = await asyncio.gather(*(store.runs.claim(replica=name, lease_seconds=LEASE)
                                    for _ in range(n) for store, name in ((a, "ra"), (b, "rb"))))
    won = [run for run in claims if run is not None]
    assert sorted(run.response_id for run in won) == [f"resp_{i:02}" for i in range(n)]  # each exactly once
    for run in won:
        assert run.status == "in_progress" and run.request == b"r%d" % int(run.response_id[5:])
        stored = await a.runs.get(run.response_id)
        assert stored is not None and stored.replica == run.replica  # the one that got it holds it
    assert await a.runs.claim(replica="ra", lease_seconds=LEASE) is None
    # one after another, the oldest first
    for i in range(3):
        await a.runs.enqueue(f"resp_q{i}", "", b"", max_queued=100)
    order = [await b.runs.claim(replica="rb", lease_seconds=LEASE) for _ in range(3)]
    assert [run.response_id for run in order if run] == ["resp_q0", "resp_q1", "resp_q2"]


async def test_cancel_ends_a_queued_run_marks_a_running_one_and_leaves_a_finished_one(
        two: tuple[ResponseStore, ResponseStore]) -> None:
    a, b = two
    await a.runs.enqueue("resp_q", "/o", b"req", max_queued=10)
    cancelled = await b.runs.request_cancel("resp_q")
    assert cancelled is not None and cancelled.status == "cancelled" and cancelled.cancel_requested
    assert await a.runs.claim(replica="ra", lease_seconds=LEASE) is None  # never starts

    await a.runs.begin("resp_r", "/o", replica="ra", lease_seconds=LEASE)
    marked = await b.runs.request_cancel("resp_r")
    assert marked == Run("resp_r", "/o", "in_progress", "ra", True, b"", -1)
    assert await a.runs.renew("ra", ["resp_r"], lease_seconds=LEASE) == {"resp_r": True}  # the holder sees it
    await a.runs.append_events("resp_r", 0, frames("cancelled"), replica="ra")  # it ends as it likes
    await a.runs.finish("resp_r", "cancelled", replica="ra")

    await a.runs.begin("resp_f", "/o", replica="ra", lease_seconds=LEASE)
    await a.runs.finish("resp_f", "completed", replica="ra")
    assert await b.runs.request_cancel("resp_f") == Run("resp_f", "/o", "completed", "", False, b"", -1)
    assert await b.runs.request_cancel("resp_unknown") is None
    assert (await a.runs.get("resp_f")).status == "completed"  # type: ignore[union-attr]


async def test_purge_drops_finished_runs_and_their_events_and_keeps_the_response(store: ResponseStore) -> None:
    runs = store.runs
    await store.put(record("resp_done"))
    await runs.begin("resp_done", "", replica="r1", lease_seconds=LEASE)
    await runs.append_events("resp_done", 0, frames("a", "b"), replica="r1")
    await runs.finish("resp_done", "completed", replica="r1")
    await runs.enqueue("resp_cancelled", "", b"", max_queued=10)
    await runs.request_cancel("resp_cancelled")
    await runs.begin("resp_running", "", replica="r1", lease_seconds=LEASE)
    await runs.append_events("resp_running", 0, frames("a"), replica="r1")
    await runs.enqueue("resp_queued", "", b"", max_queued=10)

    assert await runs.purge_finished(keep_seconds=3600) == 0  # ended just now: kept
    assert await runs.events_after("resp_done", -1) != []
    assert await runs.purge_finished(keep_seconds=0) == 2
    for gone in ("resp_done", "resp_cancelled"):
        assert await runs.get(gone) is None and await runs.events_after(gone, -1) == []
    assert await store.get("resp_done") is not None  # the response record stays, as any stored response
    assert (await runs.get("resp_running")).status == "in_progress"  # type: ignore[union-attr]
    assert await runs.events_after("resp_running", -1) == list(enumerate(frames("a")))
    assert (await runs.get("resp_queued")).status == "queued"  # type: ignore[union-attr]


async def test_a_follower_is_woken_by_each_change_in_this_process(store: ResponseStore) -> None:
    runs = store.runs
    await runs.begin("resp_1", "", replica="r1", lease_seconds=LEASE)
    seen: list[tuple[str, int]] = []

    async def follow() -> None:
        after = -1
        while True:
            for seq, _ in await runs.events_after("resp_1", after):
                after = seq
            run = await runs.get("resp_1")
            assert run is not None
            seen.append((run.status, after))
            if run.status in TERMINAL:
                return
            await runs.wait("resp_1", timeout=30)

    async with asyncio.timeout(GUARD):  # woken each time, never left to its 30 s timeout
        follower = asyncio.ensure_future(follow())
        for seq in range(5):
            await asyncio.sleep(0.05)
            await runs.append_events("resp_1", seq, frames(str(seq)), replica="r1")
        await runs.finish("resp_1", "completed", replica="r1")
        await follower
    assert seen[-1] == ("completed", 4)


async def test_a_change_between_a_read_and_the_wait_is_not_slept_through(store: ResponseStore) -> None:
    runs = store.runs
    await runs.begin("resp_1", "", replica="r1", lease_seconds=LEASE)
    assert await runs.events_after("resp_1", -1) == []
    await runs.append_events("resp_1", 0, frames("a"), replica="r1")  # lands after the read
    async with asyncio.timeout(GUARD):
        await runs.wait("resp_1", timeout=30)  # returns: a change came after this task's read
    assert await runs.events_after("resp_1", -1) == list(enumerate(frames("a")))
    # the same for the queue: a run queued between a claim that found none and the wait
    assert await runs.claim(replica="r1", lease_seconds=LEASE) is None
    await runs.enqueue("resp_2", "", b"", max_queued=10)
    async with asyncio.timeout(GUARD):
        await runs.wait_queued(timeout=30)


async def test_a_wait_with_no_change_returns_after_its_timeout(store: ResponseStore) -> None:
    await store.runs.begin("resp_1", "", replica="r1", lease_seconds=LEASE)
    await store.runs.wait("resp_1", timeout=0.05)
    await store.runs.wait_queued(timeout=0.05)
    await store.runs.wait("resp_unknown", timeout=0)


# ---- faults --------------------------------------------------------------------------------


def _every_call(store: ResponseStore) -> list[object]:
    runs = store.runs
    return [runs.begin("resp_new", "", replica="r1", lease_seconds=LEASE),
            runs.enqueue("resp_q", "", b"", max_queued=10), runs.claim(replica="r1", lease_seconds=LEASE),
            runs.renew("r1", ["resp_1"], lease_seconds=LEASE),
            runs.append_events("resp_1", 1, frames("b"), replica="r1"),
            runs.finish("resp_1", "completed", replica="r1"), runs.request_cancel("resp_1"),
            runs.expire(), runs.purge_finished(0)]


async def test_a_locked_sqlite_file_is_a_503_for_every_run_write(tmp_path: Path) -> None:
    from gateway.store.sqlite.store import SQLiteResponseStore
    from tests.store.test_store import locked_by_another_connection

    path = tmp_path / "responses.db"
    async with SQLiteResponseStore(path, 10, busy_timeout=0.1) as store:
        await store.runs.begin("resp_1", "", replica="r1", lease_seconds=LEASE)
        await store.runs.append_events("resp_1", 0, frames("a"), replica="r1")
        with locked_by_another_connection(path):
            for call in _every_call(store):
                with pytest.raises(StoreUnavailableError) as failed:
                    await call  # type: ignore[misc]
                assert "locked" in failed.value.detail and failed.value.retry_after
            # WAL: reads go on while another process writes
            assert await store.runs.events_after("resp_1", -1) == list(enumerate(frames("a")))
        await store.runs.append_events("resp_1", 1, frames("b"), replica="r1")  # usable again
    with pytest.raises(StoreUnavailableError, match="closed"):
        await store.runs.get("resp_1")


async def test_a_corrupt_sqlite_file_is_a_503_for_run_reads(tmp_path: Path) -> None:
    from gateway.store.sqlite.store import SQLiteResponseStore

    path = tmp_path / "responses.db"
    path.write_bytes(b"not a database" * 100)
    store = SQLiteResponseStore(path, 10)
    try:
        for call in (store.runs.get("resp_1"), store.runs.events_after("resp_1", -1)):
            with pytest.raises(StoreUnavailableError, match="not a SQLite database"):
                await call
    finally:
        await store.close()
