"""Stored responses and named conversations, behind one small interface.

`ResponseStore` is what routes use; `SQLiteResponseStore` is the embedded default in the
profile home. The interface speaks only records and ids (no rowids, no SQL), and each
operation is one explicit transaction, so a PostgreSQL backend can implement it as is.

A record keeps the whole transcript of its conversation, so continuing from it never needs
its ancestors: eviction of an old response cannot break a newer one.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite

from gateway.errors import ServiceUnavailableError


class StoreUnavailableError(ServiceUnavailableError):
    """The store cannot read or write (read-only file, disk full, locked, corrupt): 503."""


@dataclass
class StoredResponse:
    id: str
    created_at: int
    #: The response object exactly as returned to the client.
    response: dict[str, Any]
    #: Chat-format messages of the whole conversation so far, this turn's input, tool calls, tool
    #: results and the final assistant message included; never the agent's system prompt nor
    #: `instructions` (those are per request).
    transcript: list[dict[str, Any]] = field(default_factory=list)
    #: This turn's input items, each with an `id`, for `/input_items`.
    input_items: list[dict[str, Any]] = field(default_factory=list)
    #: The named conversation this response continues, if any.
    conversation: str | None = None


class ResponseStore(ABC):
    """Persistent, LRU-bounded store of responses plus the heads of named conversations."""

    @abstractmethod
    async def open(self) -> None:
        """Connect and create the schema if needed; raises StoreUnavailableError."""

    @abstractmethod
    async def close(self) -> None:
        """Release the connection; safe to call twice."""

    @abstractmethod
    async def put(self, record: StoredResponse) -> None:
        """Insert or replace `record`, make it the head of its conversation (if it names one) and
        evict the least recently accessed responses beyond the bound, all in one transaction.
        When this returns, the record is durable."""

    @abstractmethod
    async def get(self, response_id: str, *, touch: bool = True) -> StoredResponse | None:
        """The record, or None. `touch` counts the read as an access for LRU."""

    @abstractmethod
    async def delete(self, response_id: str) -> bool:
        """Remove the record (and any conversation head pointing at it); False if unknown."""

    @abstractmethod
    async def conversation_head(self, name: str, *, touch: bool = True) -> StoredResponse | None:
        """The latest response of conversation `name`; None if unknown or its head was evicted
        (the conversation then starts fresh)."""

    @abstractmethod
    async def count(self) -> int:
        """Number of stored responses."""

    async def __aenter__(self) -> ResponseStore:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


#: The ids of the least recently used responses beyond the cap (a parameter), oldest first.
_OVER_CAP = ("SELECT id FROM responses ORDER BY last_access, id"
             " LIMIT max(0, (SELECT COUNT(*) FROM responses) - ?)")
_EVICT_CONVERSATIONS = f"DELETE FROM conversations WHERE response_id IN ({_OVER_CAP})"
_EVICT_RESPONSES = f"DELETE FROM responses WHERE id IN ({_OVER_CAP})"

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS responses (
        id TEXT PRIMARY KEY,
        created_at INTEGER NOT NULL,
        last_access INTEGER NOT NULL,
        conversation TEXT,
        response TEXT NOT NULL,
        transcript TEXT NOT NULL,
        input_items TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS responses_by_last_access ON responses (last_access)",
    """CREATE TABLE IF NOT EXISTS conversations (
        name TEXT PRIMARY KEY,
        response_id TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS conversations_by_response ON conversations (response_id)",
)

_COLUMNS = "id, created_at, conversation, response, transcript, input_items"


def _describe(exc: sqlite3.Error) -> str:
    text = str(exc).strip() or type(exc).__name__
    lowered = text.lower()
    if "readonly" in lowered or "read-only" in lowered:
        return "the database file is read-only"
    if "disk is full" in lowered or "database or disk is full" in lowered:
        return "the disk is full"
    if "locked" in lowered or "busy" in lowered:
        return "the database is locked by another process"
    if "not a database" in lowered or "malformed" in lowered:
        return "the database file is corrupt or not a SQLite database"
    if "unable to open" in lowered:
        return "the database file cannot be opened"
    return text


class SQLiteResponseStore(ResponseStore):
    """aiosqlite in WAL mode with `synchronous=FULL`.

    Why FULL and not NORMAL: with WAL, NORMAL already survives a killed process (kill -9), but a
    power loss or OS crash can roll back the last commits, and those were already acknowledged to
    clients that may chain on them. FULL fsyncs the WAL at each commit; one fsync per agent run
    (which takes seconds anyway) is a cost worth paying for "nothing acknowledged is lost".

    One connection, serialized by a lock: every operation is its own explicit transaction, and
    two tasks must never interleave statements inside one.
    """

    def __init__(self, path: Path | str, max_responses: int, *, busy_timeout: float = 5.0) -> None:
        if max_responses < 1:
            raise ValueError("max_responses must be at least 1")
        self.path = Path(path)
        self.max_responses = max_responses
        self.busy_timeout = busy_timeout
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        self._last_tick = 0
        self._closed = False

    def _fail(self, exc: sqlite3.Error) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"The response store at {self.path} is unavailable: {_describe(exc)}.", retry_after=5
        )

    async def open(self) -> None:
        self._closed = False
        if self._db is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailableError(
                f"The response store at {self.path} is unavailable: cannot create its directory "
                f"({exc.strerror})."
            ) from exc
        db: aiosqlite.Connection | None = None
        try:
            # isolation_level=None: no implicit transactions; we BEGIN and COMMIT ourselves.
            db = await aiosqlite.connect(self.path, isolation_level=None)
            await db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            mode = await (await db.execute("PRAGMA journal_mode = WAL")).fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise sqlite3.OperationalError("attempt to write a readonly database (cannot enable WAL)")
            await db.execute("PRAGMA synchronous = FULL")
            await db.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA:
                await db.execute(statement)
            await db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db is not None:
                await db.close()
            raise self._fail(exc) from exc
        self._db = db

    async def close(self) -> None:
        self._closed = True
        db, self._db = self._db, None
        if db is not None:
            await db.close()

    def _tick(self) -> int:
        # Strictly increasing per store, so a burst of puts within one clock tick still has an order.
        # Wall-clock based, so replicas sharing one database (PostgreSQL later) roughly agree.
        self._last_tick = max(time.time_ns() // 1000, self._last_tick + 1)
        return self._last_tick

    @asynccontextmanager
    async def _transaction(self, *, write: bool) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            if self._db is None and not self._closed:
                # Opening failed at startup (say, a locked or read-only file): try again now, so a
                # fixed fault heals without a restart.
                await self.open()
            db = self._db
            if db is None:
                raise StoreUnavailableError("The response store is closed.")
            try:
                # IMMEDIATE takes the write lock up front, so a writer never fails mid-transaction
                # on a lock upgrade (busy_timeout covers the wait instead).
                await db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield db
                except BaseException:
                    await db.execute("ROLLBACK")
                    raise
                await db.execute("COMMIT")
            except sqlite3.Error as exc:
                if db.in_transaction:
                    try:
                        await db.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                raise self._fail(exc) from exc

    @staticmethod
    def _record(row: Any) -> StoredResponse:
        return StoredResponse(
            id=row[0],
            created_at=row[1],
            conversation=row[2],
            response=json.loads(row[3]),
            transcript=json.loads(row[4]),
            input_items=json.loads(row[5]),
        )

    async def put(self, record: StoredResponse) -> None:
        values = (
            record.id,
            record.created_at,
            self._tick(),
            record.conversation,
            json.dumps(record.response, ensure_ascii=False),
            json.dumps(record.transcript, ensure_ascii=False),
            json.dumps(record.input_items, ensure_ascii=False),
        )
        async with self._transaction(write=True) as db:
            await db.execute(
                "INSERT INTO responses (id, created_at, last_access, conversation, response, transcript,"
                " input_items) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at,"
                " last_access = excluded.last_access, conversation = excluded.conversation,"
                " response = excluded.response, transcript = excluded.transcript,"
                " input_items = excluded.input_items",
                values,
            )
            if record.conversation is not None:
                await db.execute(
                    "INSERT INTO conversations (name, response_id) VALUES (?, ?)"
                    " ON CONFLICT (name) DO UPDATE SET response_id = excluded.response_id",
                    (record.conversation, record.id),
                )
            # Evict the least recently used beyond the cap. Only the rows over it are visited (the
            # last_access index, oldest first): "keep the newest N" as NOT IN over the whole table
            # made every put O(stored) (12.6 ms a put at 10,000 stored, 0.9 ms at 100).
            # A name whose head is evicted starts fresh: its pointer goes first, with the same rows.
            for statement in (_EVICT_CONVERSATIONS, _EVICT_RESPONSES):
                await db.execute(statement, (self.max_responses,))

    async def _get(self, db: aiosqlite.Connection, response_id: str, touch: bool) -> StoredResponse | None:
        if touch:
            await db.execute(
                "UPDATE responses SET last_access = ? WHERE id = ?", (self._tick(), response_id)
            )
        cursor = await db.execute(f"SELECT {_COLUMNS} FROM responses WHERE id = ?", (response_id,))
        row = await cursor.fetchone()
        return None if row is None else self._record(row)

    async def get(self, response_id: str, *, touch: bool = True) -> StoredResponse | None:
        async with self._transaction(write=touch) as db:
            return await self._get(db, response_id, touch)

    async def delete(self, response_id: str) -> bool:
        async with self._transaction(write=True) as db:
            cursor = await db.execute("DELETE FROM responses WHERE id = ?", (response_id,))
            deleted = cursor.rowcount > 0
            await db.execute("DELETE FROM conversations WHERE response_id = ?", (response_id,))
        return deleted

    async def conversation_head(self, name: str, *, touch: bool = True) -> StoredResponse | None:
        async with self._transaction(write=touch) as db:
            cursor = await db.execute("SELECT response_id FROM conversations WHERE name = ?", (name,))
            row = await cursor.fetchone()
            if row is None:
                return None
            return await self._get(db, row[0], touch)

    async def count(self) -> int:
        async with self._transaction(write=False) as db:
            cursor = await db.execute("SELECT COUNT(*) FROM responses")
            row = await cursor.fetchone()
        return int(row[0]) if row else 0
