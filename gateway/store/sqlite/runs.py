"""The background runs (store/runs.py) in the SQLite file, schema version 5: `SQLiteResponseStore.runs`.

Same connection discipline as the rest of the SQLite store (sqlite.py): every write is one
transaction on its one writer connection (so one writer: a claim or an expiry is decided once),
durable on return (`synchronous = FULL`); reads are single statements on its reader connection.
Times (leases, ends) are seconds on this host's clock, read by SQLite (`_NOW`), the same for every
process on the file.

Followers wait in this process (store/run_waits.py): each write that matters announces the run
after its commit, so `wait` never polls. A second process on the same file would not hear them
(its followers fall back to their timeouts): SQLite is one replica's store.

Events count toward the store's byte bound and their owner's stored bytes (schema version 6,
triggers on their frames), and go with their run: `purge_finished`'s keep time after it ended, or
at once when their response is deleted or evicted.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import aiosqlite

from gateway.store.owners import owner_prefix
from gateway.store.run_waits import QUEUE, Announcements
from gateway.store.runs import (
    TERMINAL,
    LostRunError,
    OwnerQueueFullError,
    QueueFullError,
    Run,
    RunStore,
    append_refusal,
)

T = TypeVar("T")

#: seconds since the epoch, on SQLite's clock (millisecond precision)
_NOW = "((julianday('now') - 2440587.5) * 86400.0)"
_COLUMNS = "response_id, owner, status, replica, cancel_requested, request, last_seq"
_GET = f"SELECT {_COLUMNS} FROM background_runs WHERE response_id = ?"
_BEGIN = (f"INSERT INTO background_runs (response_id, owner, status, replica, lease_until, request, created_at)"
          f" VALUES (?, ?, 'in_progress', ?, {_NOW} + ?, x'', {_NOW}) ON CONFLICT (response_id) DO NOTHING")
_QUEUED = "SELECT count(*) FROM background_runs WHERE status = 'queued'"
_QUEUED_OF = "SELECT count(*) FROM background_runs WHERE status = 'queued' AND owner = ?"
_ENQUEUE = (f"INSERT INTO background_runs (response_id, owner, status, request, created_at)"
            f" VALUES (?, ?, 'queued', ?, {_NOW}) ON CONFLICT (response_id) DO NOTHING")
# ?3: the owner prefix of the claiming profile (None: any), so a replica runs only its own profile's runs
_CLAIM = (f"UPDATE background_runs SET status = 'in_progress', replica = ?1, lease_until = {_NOW} + ?2"
          " WHERE response_id = (SELECT response_id FROM background_runs WHERE status = 'queued'"
          " AND (?3 IS NULL OR substr(owner, 1, length(?3)) = ?3)"
          " AND owner NOT IN (SELECT value FROM json_each(?4))"
          f" ORDER BY created_at, rowid LIMIT 1) RETURNING {_COLUMNS}")
_RENEW = (f"UPDATE background_runs SET lease_until = {_NOW} + ? WHERE replica = ? AND status = 'in_progress'"
          " AND response_id IN (SELECT value FROM json_each(?)) RETURNING response_id, cancel_requested")
_ADVANCE = ("UPDATE background_runs SET last_seq = ? WHERE response_id = ? AND replica = ?"
            " AND status = 'in_progress' AND last_seq = ?")
_APPEND = "INSERT INTO background_events (response_id, seq, frame) VALUES (?, ?, ?)"
_EVENTS = "SELECT seq, frame FROM background_events WHERE response_id = ? AND seq > ? ORDER BY seq LIMIT ?"
_FINISH = (f"UPDATE background_runs SET status = ?, replica = '', lease_until = NULL, ended_at = {_NOW}"
           " WHERE response_id = ? AND replica = ? AND status = 'in_progress'")
# a queued run ends at once; a running one is marked for its holder
_CANCEL = ("UPDATE background_runs SET cancel_requested = 1,"
           " status = CASE WHEN status = 'queued' THEN 'cancelled' ELSE status END,"
           f" ended_at = CASE WHEN status = 'queued' THEN {_NOW} ELSE ended_at END"
           f" WHERE response_id = ? AND status IN ('queued', 'in_progress') RETURNING {_COLUMNS}")
_STALE = f"SELECT {_COLUMNS} FROM background_runs WHERE status = 'in_progress' AND lease_until <= {_NOW}"
_FAIL = (f"UPDATE background_runs SET status = 'failed', replica = '', lease_until = NULL, ended_at = {_NOW}"
         " WHERE response_id = ? AND status = 'in_progress'")
_PURGE = f"DELETE FROM background_runs WHERE ended_at IS NOT NULL AND ended_at <= {_NOW} - ?"


class _Connections(Protocol):
    """What the runs use of `SQLiteResponseStore`: its write transaction and its reads (503 on a fault)."""

    async def _transaction(self, body: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T: ...

    async def _read(self, sql: str, parameters: tuple[Any, ...]) -> list[Any]: ...


class SQLiteRuns(RunStore):
    def __init__(self, store: _Connections, profile: str | None = None) -> None:
        self._store = store
        self._claims = owner_prefix(profile)
        self._announcements = Announcements()

    async def _write(self, body: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        # the store's _transaction reads a ValueError as "connection closed": the contract's own
        # ValueErrors (a gap in the events) travel out as results and are raised here, after it
        result = await self._store._transaction(body)
        if isinstance(result, Exception):
            raise result
        return result

    async def begin(self, response_id: str, owner: str, *, replica: str, lease_seconds: float) -> None:
        async def body(db: aiosqlite.Connection) -> Exception | None:
            cursor = await db.execute(_BEGIN, (response_id, owner, replica, lease_seconds))
            return None if cursor.rowcount else ValueError(f"a run of {response_id} is stored already")

        await self._write(body)
        self._announcements.announce(response_id)

    async def enqueue(self, response_id: str, owner: str, request: bytes, *, max_queued: int,
                      max_per_owner: int | None = None) -> None:
        async def body(db: aiosqlite.Connection) -> Exception | None:
            if not db.in_transaction:  # the count and the insert as one (a read opens none)
                await db.execute("BEGIN IMMEDIATE")
            queued = int(next(iter(await db.execute_fetchall(_QUEUED)))[0])
            if queued >= max_queued:
                return QueueFullError.of(queued)
            if max_per_owner is not None:
                of_owner = int(next(iter(await db.execute_fetchall(_QUEUED_OF, (owner,))))[0])
                if of_owner >= max_per_owner:
                    return OwnerQueueFullError.of_owner(of_owner)
            cursor = await db.execute(_ENQUEUE, (response_id, owner, request))
            return None if cursor.rowcount else ValueError(f"a run of {response_id} is stored already")

        await self._write(body)
        self._announcements.announce(response_id)
        self._announcements.announce(QUEUE)

    async def claim(self, *, replica: str, lease_seconds: float, skip_owners: Sequence[str] = ()) -> Run | None:
        self._announcements.seen(QUEUE)
        skipped = json.dumps(list(skip_owners))

        async def body(db: aiosqlite.Connection) -> Run | None:
            rows = list(await db.execute_fetchall(_CLAIM, (replica, lease_seconds, self._claims, skipped)))
            return Run.from_row(rows[0]) if rows else None

        run = await self._write(body)
        if run is not None:
            self._announcements.announce(run.response_id)
        return run

    async def renew(self, replica: str, response_ids: list[str], *, lease_seconds: float) -> dict[str, bool]:
        if not response_ids:
            return {}
        ids = json.dumps(response_ids)

        async def body(db: aiosqlite.Connection) -> dict[str, bool]:
            rows = await db.execute_fetchall(_RENEW, (lease_seconds, replica, ids))
            return {str(row[0]): bool(row[1]) for row in rows}

        return await self._write(body)

    async def append_events(self, response_id: str, first_seq: int, frames: list[bytes], *,
                            replica: str) -> None:
        if not frames:
            return
        last = first_seq + len(frames) - 1

        async def body(db: aiosqlite.Connection) -> Exception | None:
            cursor = await db.execute(_ADVANCE, (last, response_id, replica, first_seq - 1))
            if not cursor.rowcount:
                rows = list(await db.execute_fetchall(_GET, (response_id,)))
                return append_refusal(response_id, first_seq, replica, Run.from_row(rows[0]) if rows else None)
            await db.executemany(_APPEND, [(response_id, first_seq + i, f) for i, f in enumerate(frames)])
            return None

        await self._write(body)
        self._announcements.announce(response_id)

    async def events_after(self, response_id: str, after: int, *, limit: int = 1000) -> list[tuple[int, bytes]]:
        self._announcements.seen(response_id)
        rows = await self._store._read(_EVENTS, (response_id, after, limit))
        return [(int(seq), bytes(frame)) for seq, frame in rows]

    async def get(self, response_id: str) -> Run | None:
        self._announcements.seen(response_id)
        rows = await self._store._read(_GET, (response_id,))
        return Run.from_row(rows[0]) if rows else None

    async def finish(self, response_id: str, status: str, *, replica: str) -> None:
        if status not in TERMINAL:
            raise ValueError(f"a run ends with one of {sorted(TERMINAL)}, not {status!r}")

        async def body(db: aiosqlite.Connection) -> Exception | None:
            cursor = await db.execute(_FINISH, (status, response_id, replica))
            return None if cursor.rowcount else LostRunError(
                f"replica {replica} no longer holds the run of {response_id}")

        await self._write(body)
        self._announcements.announce(response_id)
        self._announcements.announce(QUEUE)  # a slot is free

    async def request_cancel(self, response_id: str) -> Run | None:
        async def body(db: aiosqlite.Connection) -> tuple[Run | None, bool]:
            rows = list(await db.execute_fetchall(_CANCEL, (response_id,)))
            if rows:
                return Run.from_row(rows[0]), True
            rows = list(await db.execute_fetchall(_GET, (response_id,)))  # finished, or unknown
            return (Run.from_row(rows[0]) if rows else None), False

        run, marked = await self._write(body)
        if marked:
            self._announcements.announce(response_id)
        return run

    async def expire(self) -> list[Run]:
        async def body(db: aiosqlite.Connection) -> list[Run]:
            if not db.in_transaction:  # the runs read are the runs failed
                await db.execute("BEGIN IMMEDIATE")
            stale = [Run.from_row(row) for row in await db.execute_fetchall(_STALE)]
            await db.executemany(_FAIL, [(run.response_id,) for run in stale])
            return [dataclasses.replace(run, status="failed") for run in stale]  # replica: who held it

        failed = await self._write(body)
        for run in failed:
            self._announcements.announce(run.response_id)
        if failed:
            self._announcements.announce(QUEUE)
        return failed

    async def purge_finished(self, keep_seconds: float) -> int:
        async def body(db: aiosqlite.Connection) -> int:
            cursor = await db.execute(_PURGE, (keep_seconds,))
            return int(cursor.rowcount)

        return await self._write(body)

    async def wait(self, response_id: str, timeout: float) -> None:
        await self._announcements.wait(response_id, timeout)

    async def wait_queued(self, timeout: float) -> None:
        await self._announcements.wait(QUEUE, timeout)

    def closed(self) -> None:
        """The store closed: no follower waits for a change that cannot come any more."""
        self._announcements.announce_all()
