"""The SQLite backend of the Responses store (`gateway.store_api.ResponseStore`), on aiosqlite.

The embedded default: one file in the profile home, opened through two aiosqlite connections,
one that writes and one that reads (WAL lets a reader see the last commit while a write is
being fsynced, so a chained request's read never waits behind another request's write): those
are sqlite/connections.py; the byte bound sqlite/space.py; conversation objects, background runs
and uploaded files sqlite/conversations.py, runs.py and files.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from gateway.store.api import (
    Chain,
    ResponseStore,
    StoredResponse,
    StoreUnavailableError,
)
from gateway.store.files import FileStore
from gateway.store.group_commit import GroupCommit
from gateway.store.json_columns import from_text, to_text
from gateway.store.owners import DEFAULT_OWNER, owner_prefix
from gateway.store.runs import RunStore
from gateway.store.sqlite.connections import SQLiteConnections
from gateway.store.sqlite.conversations import SQLiteConversations
from gateway.store.sqlite.files import SQLiteFiles
from gateway.store.sqlite.runs import SQLiteRuns
from gateway.store.sqlite.schema import SCHEMA_VERSION
from gateway.store.sqlite.space import SQLiteSpace

# Routes, tests and tools import these names from here.
__all__ = ["SCHEMA_VERSION", "ResponseStore", "SQLiteResponseStore", "StoredResponse", "StoreUnavailableError"]

T = TypeVar("T")

#: The ids of one owner's (?1) least recently used responses beyond the cap (?2), oldest first:
#: the cap is each owner's, so one key's puts never evict another key's records.
#: Its count is owner_usage's (schema version 10), its order the (owner, last_access, id) index's: a
#: put reads no more rows with a million stored than with a thousand (bench/scale.py).
_OVER_CAP = ("SELECT id FROM responses WHERE owner = ?1 ORDER BY last_access, id"
             " LIMIT max(0, coalesce((SELECT responses FROM owner_usage WHERE owner = ?1), 0) - ?2)")
_EVICT_RESPONSES = f"DELETE FROM responses WHERE id IN ({_OVER_CAP})"

_UPSERT_RESPONSE = (
    "INSERT INTO responses (id, created_at, last_access, conversation, response, transcript, input_items,"
    " parent_id, bytes, history_bytes, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at,"
    " last_access = excluded.last_access, conversation = excluded.conversation,"
    " response = excluded.response, transcript = excluded.transcript, input_items = excluded.input_items,"
    " parent_id = excluded.parent_id, bytes = excluded.bytes, history_bytes = excluded.history_bytes"
    # a stored record keeps its owner: a put of its id by anyone else changes nothing (a run claimed
    # by the wrong replica, a forged id), so it can never pass to another owner
    " WHERE responses.owner = excluded.owner"
)
_UPSERT_HEAD = ("INSERT INTO conversations (name, response_id) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET response_id = excluded.response_id")
# max(): a touch taken before a put of the same id must not make the newer record look older
_TOUCH = "UPDATE responses SET last_access = max(last_access, ?) WHERE id = ?"

_COLUMNS = "id, created_at, conversation, response, transcript, input_items, parent_id, owner"
_R_COLUMNS = ", ".join("r." + c for c in _COLUMNS.split(", "))
_SELECT_BY_ID = f"SELECT {_COLUMNS} FROM responses WHERE id = ?"
_SELECT_HEAD = f"SELECT {_R_COLUMNS} FROM conversations c JOIN responses r ON r.id = c.response_id WHERE c.name = ?"
#: A chain, newest first: each step adds a parent while the turns read so far are under the budget
#: (the second parameter), so the walk ends on the record that crosses it or at the chain's start;
#: the last column says whether a record's parent is still stored.
_CHAIN = (
    "WITH RECURSIVE chain(id, parent_id, depth, total) AS ("
    " SELECT id, parent_id, 0, history_bytes FROM responses WHERE id = ?"
    " UNION ALL SELECT r.id, r.parent_id, c.depth + 1, c.total + r.history_bytes"
    " FROM chain c JOIN responses r ON r.id = c.parent_id WHERE c.total < ?)"
    f" SELECT {_R_COLUMNS}, EXISTS (SELECT 1 FROM responses p WHERE p.id = r.parent_id)"
    " FROM chain c JOIN responses r ON r.id = c.id ORDER BY c.depth"
)

#: A row as the group writer holds it: the values of `_UPSERT_RESPONSE`.
_Row = tuple[str, int, int, str | None, str, str, str, str | None, int, int, str]


class SQLiteResponseStore(SQLiteSpace, SQLiteConnections, SQLiteConversations, ResponseStore):
    """SQLite in WAL mode with `synchronous=FULL`, through aiosqlite.

    Why FULL and not NORMAL: with WAL, NORMAL already survives a killed process (kill -9), but a
    power loss or OS crash can roll back the last commits, and those were already acknowledged to
    clients that may chain on them. FULL fsyncs the WAL at each commit; concurrent puts share one
    (group commit, see `put`), which is a cost worth paying for "nothing acknowledged is lost".

    Every aiosqlite call is one hand-over to the connection's thread and back, so the store keeps
    them few: a group of puts is one transaction of a handful of statements whatever its size
    (one `executemany` per table), a read is one statement, and a read's LRU touch is not a write
    of its own: it is kept here and written with the next group of puts, the only place eviction
    happens. A touch lost to a killed process only reorders eviction; `close` writes the rest.
    """

    def __init__(self, path: Path | str, max_responses: int, *, max_bytes: int | None = None,
                 busy_timeout: float = 5.0, legacy_owner: str = DEFAULT_OWNER, profile: str | None = None) -> None:
        if max_responses < 1:
            raise ValueError("max_responses must be at least 1")
        self.path = Path(path)
        self.max_responses = max_responses
        self.max_bytes = max_bytes
        self.busy_timeout = busy_timeout
        self.legacy_owner = legacy_owner  # who owns what a file made before schema version 4 holds
        self._db: aiosqlite.Connection | None = None  # writes, one transaction at a time
        self._reader: aiosqlite.Connection | None = None  # single-statement reads
        self._open_lock = asyncio.Lock()  # open/close against each other and the lazy reopen
        self._write_lock = asyncio.Lock()  # a group of puts against a delete
        self._puts: GroupCommit[_Row] = GroupCommit(self._write_group, lambda row: str(row[3]))
        self._touches: dict[str, int] = {}  # id -> tick of its latest touching read, not yet written
        self._last_tick = 0
        self._closed = False
        # the profile whose rows this store bounds and whose queued runs it claims (None: any)
        self._owner_prefix = owner_prefix(profile)
        self._runs = SQLiteRuns(self, profile)
        self._files = SQLiteFiles(self)

    @property
    def runs(self) -> RunStore:
        return self._runs

    @property
    def files(self) -> FileStore:
        return self._files

    async def open(self) -> None:
        async with self._open_lock:
            self._closed = False
            await self._open()

    async def close(self) -> None:
        await self._puts.drain()  # puts already accepted are written (or fail) before the connections go
        async with self._open_lock:
            self._closed = True
            self._runs.closed()
            if self._touches and self._db is not None:
                with contextlib.suppress(StoreUnavailableError):
                    await self._write_touches()
            connections = (self._reader, self._db)
            self._db = self._reader = None
            for connection in connections:
                if connection is not None:
                    with contextlib.suppress(sqlite3.Error):
                        await connection.close()

    def _tick(self) -> int:
        # Strictly increasing per store, so a burst of puts within one clock tick still has an order.
        # Wall-clock based, so replicas sharing one database (PostgreSQL later) roughly agree.
        self._last_tick = max(time.time_ns() // 1000, self._last_tick + 1)
        return self._last_tick

    @staticmethod
    def _record(row: Any) -> StoredResponse:
        return StoredResponse(
            id=row[0],
            created_at=row[1],
            conversation=row[2],
            response=from_text(row[3]),
            transcript=from_text(row[4]),
            input_items=from_text(row[5]),
            parent_id=row[6],
            owner=row[7],
        )

    def _row(self, record: StoredResponse) -> _Row:
        response, transcript, items = to_text(record.response), to_text(record.transcript), to_text(record.input_items)
        return (record.id, record.created_at, self._tick(), record.conversation, response, transcript, items,
                record.parent_id, len(response) + len(transcript) + len(items), len(transcript), record.owner)

    async def put(self, record: StoredResponse) -> None:
        """Group commit: the puts that arrive while one transaction is being written go together in
        the next one, so concurrent requests share a transaction and its fsync. Nothing waits to
        fill a group: a put with no write in progress starts one at once."""
        await self._puts.put(self._row(record), record.expected_head)

    async def _put_in(self, db: aiosqlite.Connection, record: StoredResponse) -> None:
        """A put's statements inside another write (a conversation's append): no head check (a
        response of a conversation object names no conversation head), then the eviction."""
        await db.execute(_UPSERT_RESPONSE, self._row(record))
        if record.conversation is not None:
            await db.execute(_UPSERT_HEAD, (record.conversation, record.id))
        await db.execute(_EVICT_RESPONSES, (record.owner, self.max_responses))

    async def _write_group(self, puts: list[tuple[_Row, str | None]]) -> list[bool]:
        """Writes the group; returns, per put, whether it was refused (its conversation moved on)."""
        touches, self._touches = self._touches, {}
        refused = [False] * len(puts)
        rows: list[_Row] = []
        heads: list[tuple[str | None, str]] = []

        async def body(db: aiosqlite.Connection) -> None:
            # under the write lock (one writer per file): the heads checked are the heads written
            current = await self._heads_of(db, {v[3] for v, expected in puts if expected is not None})
            for index, (values, expected) in enumerate(puts):
                name = values[3]
                if name is not None and expected is not None and current.get(name, expected) != expected:
                    refused[index] = True
                    continue
                rows.append(values)
                if name is not None:
                    heads.append((name, values[0]))
                    current[name] = values[0]
            # the touches first, so that eviction below sees every read made before this group
            if touches:
                await db.executemany(_TOUCH, [(tick, rid) for rid, tick in touches.items()])
            if rows:
                await db.executemany(_UPSERT_RESPONSE, rows)
            if heads:  # in call order, so the last put naming a conversation is its head
                await db.executemany(_UPSERT_HEAD, heads)
            # Evict each writing owner's least recently used beyond the cap: only the owners written
            # are visited, each through its own rows (the owner index), never the whole table ("keep
            # the newest N" as NOT IN over the table made every put cost in proportion to the rows
            # stored, bench/store_put.py).
            owners = sorted({values[10] for values in rows})
            if owners:
                await db.executemany(_EVICT_RESPONSES, [(owner, self.max_responses) for owner in owners])
            await self._bound(db, {values[0] for values in rows})

        try:
            await self._transaction(body)
        except BaseException:
            self._keep_touches(touches.items())  # not written: they go with the next group
            raise
        return refused

    @staticmethod
    async def _heads_of(db: aiosqlite.Connection, names: set[str | None]) -> dict[str, str]:
        if not names:
            return {}
        # A read does not begin sqlite3's implicit transaction: begin it here, so the heads read
        # are the heads written even when another process writes the same file.
        if not db.in_transaction:
            await db.execute("BEGIN IMMEDIATE")
        marks = ",".join("?" * len(names))
        found = await db.execute_fetchall(
            f"SELECT name, response_id FROM conversations WHERE name IN ({marks})", tuple(names))
        return {str(name): str(rid) for name, rid in found}

    async def _write_touches(self) -> None:
        touches, self._touches = self._touches, {}

        async def body(db: aiosqlite.Connection) -> None:
            await db.executemany(_TOUCH, [(tick, rid) for rid, tick in touches.items()])

        await self._transaction(body)

    def _keep_touches(self, touches: Iterable[tuple[str, int]]) -> None:
        for rid, tick in touches:
            self._touches[rid] = max(tick, self._touches.get(rid, 0))

    def _found(self, rows: list[Any], touch_tick: int | None) -> StoredResponse | None:
        if not rows:
            return None
        record = self._record(rows[0])
        if touch_tick is not None:
            self._keep_touches([(record.id, touch_tick)])
        return record

    async def get(self, response_id: str, *, touch: bool = True) -> StoredResponse | None:
        tick = self._tick() if touch else None
        return self._found(await self._read(_SELECT_BY_ID, (response_id,)), tick)

    async def delete(self, response_id: str) -> bool:
        async def body(db: aiosqlite.Connection) -> bool:
            cursor = await db.execute("DELETE FROM responses WHERE id = ?", (response_id,))
            await self._bound(db, set())
            return cursor.rowcount > 0

        self._touches.pop(response_id, None)
        return await self._transaction(body)

    async def conversation_head(self, name: str, *, touch: bool = True) -> StoredResponse | None:
        tick = self._tick() if touch else None
        return self._found(await self._read(_SELECT_HEAD, (name,)), tick)

    async def chain(self, response_id: str, *, max_bytes: int, touch: bool = True) -> Chain | None:
        rows = await self._read(_CHAIN, (response_id, max_bytes))
        if not rows:
            return None
        records = [self._record(row) for row in rows]
        if touch:
            tick = self._tick()  # one tick for the whole chain: it is read as one
            self._keep_touches([(record.id, tick) for record in records])
        return Chain(records, complete=not rows[-1][8])

    async def size(self) -> int:
        rows = await self._read("SELECT bytes FROM store_usage", ())
        return int(rows[0][0])

    async def check(self) -> None:
        await self._read("SELECT 1", ())

    async def count(self) -> int:
        rows = await self._read("SELECT COUNT(*) FROM responses", ())
        return int(rows[0][0]) if rows else 0
