"""The SQLite backend beyond the shared contract (test_store_contract.py): group commit, durability
against kill -9, file faults, cancellation, and the migration of an older file."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.store.api import Conversation
from gateway.store.owned import OwnedStore
from gateway.store.owners import DEFAULT_OWNER
from gateway.store.sqlite.store import SCHEMA_VERSION, SQLiteResponseStore, StoreUnavailableError
from tests.store.records import record

REPO_ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def locked_by_another_connection(path: Path) -> Iterator[None]:
    """The database held under an exclusive lock by another connection (another process would)."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


@pytest.fixture
async def store(tmp_path: Path):
    async with SQLiteResponseStore(tmp_path / "responses.db", max_responses=100) as opened:
        yield opened


async def test_a_concurrent_burst_of_puts_loses_nothing(tmp_path: Path) -> None:
    async with SQLiteResponseStore(tmp_path / "r.db", max_responses=1000) as store:
        ids = [f"resp_{n}" for n in range(200)]

        async def writer(chunk: list[str]) -> None:
            for rid in chunk:
                await store.put(record(rid, conversation=f"c{int(rid[5:]) % 7}"))
                assert await store.get(rid, touch=False) is not None

        await asyncio.gather(*(writer(ids[i::20]) for i in range(20)))
        assert await store.count() == 200
        for rid in ids:
            assert await store.get(rid) is not None



async def test_concurrent_puts_end_as_if_put_one_by_one(tmp_path: Path) -> None:
    # 60 puts at once (as 60 concurrent Responses requests): they are written in groups, and the
    # store ends exactly as if they had been put one by one, in the order they were called
    async with SQLiteResponseStore(tmp_path / "r.db", max_responses=25) as store:
        ids = [f"resp_{n:02d}" for n in range(60)]
        await asyncio.gather(*(store.put(record(rid, conversation=f"c{n % 4}")) for n, rid in enumerate(ids)))
        assert await store.count() == 25
        kept = [rid for rid in ids if await store.get(rid, touch=False) is not None]
        assert kept == ids[-25:]
        for name in range(4):
            head = await store.conversation_head(f"c{name}", touch=False)
            assert head is not None and head.id == ids[-4 + name]


async def test_a_failed_group_fails_each_of_its_puts_with_its_own_503(tmp_path: Path) -> None:
    path = tmp_path / "responses.db"
    async with SQLiteResponseStore(path, max_responses=10, busy_timeout=0.1) as store:
        with locked_by_another_connection(path):
            outcomes = await asyncio.gather(*(store.put(record(f"resp_{n}")) for n in range(5)),
                                            return_exceptions=True)
        assert all(isinstance(outcome, StoreUnavailableError) and outcome.status == 503 for outcome in outcomes)
        assert len({id(outcome) for outcome in outcomes}) == 5
        assert await store.count() == 0
        await asyncio.gather(*(store.put(record(f"resp_{n}")) for n in range(5)))
        assert await store.count() == 5

_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from gateway.store.sqlite.store import SQLiteResponseStore, StoredResponse

    async def main() -> None:
        async with SQLiteResponseStore(sys.argv[1], max_responses=100_000) as store:
            n = 0
            while True:
                rid = f"resp_{n}"
                await store.put(StoredResponse(
                    id=rid, created_at=0, response={"id": rid, "pad": "x" * 2000},
                    transcript=[{"role": "user", "content": "y" * 2000}], input_items=[],
                    conversation="chat"))
                print(rid, flush=True)
                n += 1

    asyncio.run(main())
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")
async def test_kill_9_while_writing_loses_no_acknowledged_response(tmp_path: Path) -> None:
    path = tmp_path / "responses.db"
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    acknowledged: list[str] = []
    try:
        assert child.stdout is not None
        while len(acknowledged) < 60:
            line = await asyncio.to_thread(child.stdout.readline)
            if not line:
                break
            acknowledged.append(line.strip())
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert len(acknowledged) == 60, "the writer died before acknowledging enough puts"

    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    async with SQLiteResponseStore(path, max_responses=100_000) as store:
        for rid in acknowledged:
            assert await store.get(rid, touch=False) is not None, rid
        head = await store.conversation_head("chat")
        assert head is not None and int(head.id[5:]) >= int(acknowledged[-1][5:])


def _make_read_only(path: Path) -> None:
    path.chmod(0o444)
    if os.geteuid() == 0:  # root ignores permission bits; the immutable flag still binds it
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
        if done.returncode != 0:
            pytest.skip("running as root on a filesystem without chattr +i")


def _make_writable(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)
    path.chmod(0o644)


async def test_read_only_database_file_is_a_503_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "responses.db"
    async with SQLiteResponseStore(path, max_responses=10) as store:
        await store.put(record("resp_1"))
    _make_read_only(path)
    try:
        with pytest.raises(StoreUnavailableError) as caught:
            async with SQLiteResponseStore(path, max_responses=10) as store:
                await store.put(record("resp_2"))
    finally:
        _make_writable(path)
    assert caught.value.status == 503
    # the log's detail says what and where; the client's message names no file
    assert "read-only" in caught.value.detail and str(path) in caught.value.detail
    assert caught.value.message == "The response store is unavailable; retry shortly."


async def test_a_database_locked_by_another_process_is_a_503(tmp_path: Path) -> None:
    path = tmp_path / "responses.db"
    async with SQLiteResponseStore(path, max_responses=10, busy_timeout=0.1) as store:
        with locked_by_another_connection(path), pytest.raises(StoreUnavailableError) as caught:
            await store.put(record("resp_1"))
        assert "locked" in caught.value.detail
        await store.put(record("resp_1"))  # usable again once the lock is gone
        assert await store.count() == 1


async def test_a_file_that_is_not_a_database_is_a_503_at_open(tmp_path: Path) -> None:
    path = tmp_path / "responses.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreUnavailableError, match="not a SQLite database"):
        await SQLiteResponseStore(path, max_responses=10).open()


async def test_a_store_that_failed_to_open_recovers_once_the_file_is_fixed(tmp_path: Path) -> None:
    path = tmp_path / "responses.db"
    path.write_bytes(b"garbage" * 100)
    store = SQLiteResponseStore(path, max_responses=10)
    with pytest.raises(StoreUnavailableError):
        await store.open()
    with pytest.raises(StoreUnavailableError):
        await store.put(record("resp_1"))
    path.unlink()
    try:
        await store.put(record("resp_1"))
        assert await store.count() == 1
    finally:
        await store.close()
    with pytest.raises(StoreUnavailableError, match="closed"):
        await store.count()


async def test_close_lets_puts_already_made_finish_durably(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    store = SQLiteResponseStore(path, max_responses=100)
    await store.open()
    puts = [asyncio.ensure_future(store.put(record(f"resp_{n}"))) for n in range(20)]
    await asyncio.sleep(0)  # the puts are queued; the first group is being written
    await store.close()
    assert all(put.done() and put.exception() is None for put in puts)
    async with SQLiteResponseStore(path, max_responses=100) as reopened:
        assert await reopened.count() == 20


async def test_a_reads_touch_outlives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    async with SQLiteResponseStore(path, max_responses=2) as store:
        await store.put(record("resp_a"))
        await store.put(record("resp_b"))
        assert await store.get("resp_a") is not None  # the last access before the restart
    async with SQLiteResponseStore(path, max_responses=2) as store:
        await store.put(record("resp_c"))
        assert await store.get("resp_b", touch=False) is None
        assert await store.get("resp_a", touch=False) is not None


async def test_a_read_does_not_wait_for_a_write_that_waits_for_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    async with SQLiteResponseStore(path, max_responses=10, busy_timeout=3) as store:
        await store.put(record("resp_a", conversation="chat"))
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            put = asyncio.ensure_future(store.put(record("resp_b")))
            await asyncio.sleep(0.2)
            started = time.monotonic()
            assert await store.get("resp_a") is not None
            head = await store.conversation_head("chat")
            assert head is not None and head.id == "resp_a"
            assert await store.count() == 1
            assert time.monotonic() - started < 1.5
            assert not put.done()
        finally:
            other.execute("ROLLBACK")
            other.close()
        await put
        assert await store.count() == 2


@pytest.mark.parametrize("yields", range(8))
async def test_a_delete_cancelled_at_any_point_leaves_the_store_usable(tmp_path: Path, yields: int) -> None:
    # a client that hangs up cancels its handler, wherever the delete's transaction is
    async with SQLiteResponseStore(tmp_path / "r.db", max_responses=10) as store:
        await store.put(record("resp_a", conversation="chat"))
        delete = asyncio.ensure_future(store.delete("resp_a"))
        for _ in range(yields):
            await asyncio.sleep(0)
        delete.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await delete
        await store.put(record("resp_b", conversation="chat"))
        head = await store.conversation_head("chat")
        assert head is not None and head.id == "resp_b"
        assert await store.delete("resp_b") is True
        assert await store.count() in (0, 1)  # resp_a is gone or not, never half gone
        if await store.get("resp_a") is not None:
            assert (await store.get("resp_a")) == record("resp_a", conversation="chat")


@pytest.mark.parametrize("yields", range(4))
async def test_operations_racing_close_are_a_503_not_a_crash(tmp_path: Path, yields: int) -> None:
    store = SQLiteResponseStore(tmp_path / "r.db", max_responses=10)
    await store.open()
    await store.put(record("resp_a", conversation="chat"))
    racing = [asyncio.ensure_future(operation) for operation in (
        store.put(record("resp_b")), store.delete("resp_a"), store.get("resp_a"),
        store.conversation_head("chat"), store.count())]
    for _ in range(yields):
        await asyncio.sleep(0)
    await store.close()
    for outcome in await asyncio.gather(*racing, return_exceptions=True):
        assert not isinstance(outcome, BaseException) or isinstance(outcome, StoreUnavailableError), outcome


async def test_a_version_1_file_is_migrated_and_keeps_its_responses(tmp_path: Path) -> None:
    """A file written before the Conversations API (schema version 1) opens: its responses and
    named conversations are kept, the new tables are there, and the version is moved on."""
    path = tmp_path / "responses.db"
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE responses (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, last_access INTEGER NOT NULL,
            conversation TEXT, response TEXT NOT NULL, transcript TEXT NOT NULL, input_items TEXT NOT NULL);
        CREATE TABLE conversations (name TEXT PRIMARY KEY, response_id TEXT NOT NULL);
        CREATE TABLE schema_version (version INTEGER NOT NULL);
        INSERT INTO schema_version VALUES (1);
        INSERT INTO responses VALUES ('resp_old', 1700000000, 1, 'chat', '{"id": "resp_old"}',
            '[{"role": "user", "content": "hi"}]', '[]');
        INSERT INTO conversations VALUES ('chat', 'resp_old');
    """)
    old.close()
    async with SQLiteResponseStore(path, max_responses=10) as store:
        kept = await store.get("resp_old")
        assert kept is not None and kept.transcript == [{"role": "user", "content": "hi"}]
        # the `default` key's named conversation now (schema version 4)
        head = await OwnedStore(store, DEFAULT_OWNER).conversation_head("chat")
        assert head is not None and head.id == "resp_old" and head.conversation == "chat"
        await store.create_conversation(Conversation(id="conv_1", created_at=1), [])
        assert (await store.get_conversation("conv_1")).id == "conv_1"
    versions = sqlite3.connect(path).execute("SELECT version FROM schema_version").fetchall()
    assert versions == [(SCHEMA_VERSION,)] and SCHEMA_VERSION == 7
