"""The SQLite store's two aiosqlite connections: opened (and migrated) lazily, one that writes and
one that reads, and the two ways in, `_transaction` and `_read`, each turning any SQLite fault into
a 503 (`StoreUnavailableError`). A mixin of `SQLiteResponseStore` (sqlite/store.py), which holds
the state it declares here.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from gateway.common.private import private_dir, private_file
from gateway.store.api import SchemaVersionError, StoreUnavailableError
from gateway.store.sqlite.faults import describe as _describe
from gateway.store.sqlite.schema import migrate

T = TypeVar("T")


class SQLiteConnections:
    path: Path
    busy_timeout: float
    legacy_owner: str
    _db: aiosqlite.Connection | None
    _reader: aiosqlite.Connection | None
    _open_lock: asyncio.Lock
    _write_lock: asyncio.Lock
    _closed: bool

    async def _reclaim(self, db: aiosqlite.Connection) -> None:
        raise NotImplementedError  # sqlite/space.py's, after each commit

    def _fail(self, exc: sqlite3.Error) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"The response store at {self.path} is unavailable: {_describe(exc)}.", retry_after=5
        )

    async def _open(self) -> None:
        if self._db is not None:
            return
        try:
            private_dir(self.path.parent)
            private_file(self.path)  # before SQLite makes it: its -wal and -shm files take its mode
        except OSError as exc:
            raise StoreUnavailableError(
                f"The response store at {self.path} is unavailable: cannot create its directory "
                f"({exc.strerror}).", retry_after=5
            ) from exc
        opened: list[aiosqlite.Connection] = []
        try:
            # IMMEDIATE: the first write of a transaction opens it with BEGIN IMMEDIATE (sqlite3's
            # implicit transactions), which takes the write lock up front, so a writer never fails
            # mid-transaction on a lock upgrade (busy_timeout covers the wait instead); and a BEGIN
            # of our own would be one more hand-over to the connection's thread per transaction.
            writer = await self._connect(opened, isolation_level="IMMEDIATE")
            # before WAL: switching the journal writes a fresh file's first page, after which
            # auto_vacuum no longer takes (a new file would need the one-off VACUUM of an old one)
            await writer.execute("PRAGMA auto_vacuum = INCREMENTAL")
            mode = await writer.execute_fetchall("PRAGMA journal_mode = WAL")
            if not mode or str(next(iter(mode))[0]).lower() != "wal":
                raise sqlite3.OperationalError("attempt to write a readonly database (cannot enable WAL)")
            await writer.execute("PRAGMA synchronous = FULL")
            try:
                await migrate(writer, self.path, self.legacy_owner)
            except SchemaVersionError:
                for connection in opened:
                    await connection.close()
                raise
            await writer.executescript("PRAGMA incremental_vacuum;")  # what an earlier run freed
            reader = await self._connect(opened, isolation_level=None)
            await reader.execute("PRAGMA query_only = ON")
        except sqlite3.Error as exc:
            for connection in opened:
                with contextlib.suppress(sqlite3.Error):
                    await connection.close()
            raise self._fail(exc) from exc
        self._db, self._reader = writer, reader

    async def _connect(self, opened: list[aiosqlite.Connection], *,
                       isolation_level: str | None) -> aiosqlite.Connection:
        # the reader's None: autocommit, each read is one statement and sees the last commit
        connection = await aiosqlite.connect(self.path, isolation_level=isolation_level)
        opened.append(connection)
        await connection.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        return connection

    async def _connections(self) -> tuple[aiosqlite.Connection, aiosqlite.Connection]:
        if self._db is None or self._reader is None:
            async with self._open_lock:
                if self._closed:
                    raise StoreUnavailableError("The response store is closed.")
                # Opening failed at startup (say, a locked or read-only file): try again now, so a
                # fixed fault heals without a restart.
                await self._open()
        assert self._db is not None and self._reader is not None
        return self._db, self._reader

    async def _read(self, sql: str, parameters: tuple[Any, ...]) -> list[Any]:
        _, reader = await self._connections()
        try:
            return list(await reader.execute_fetchall(sql, parameters))
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc
        except ValueError as exc:  # aiosqlite: "Connection closed", a read racing close()
            raise StoreUnavailableError("The response store is closed.") from exc

    async def _transaction(self, body: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        """Runs `body` in one write transaction on the writer connection; any SQLite fault is a 503."""
        db, _ = await self._connections()
        async with self._write_lock:
            try:
                try:
                    result = await body(db)  # its first write opens the transaction (see _open)
                    await db.commit()
                    await self._reclaim(db)
                except BaseException:
                    # Queued after whatever is still running on the connection's thread (a cancelled
                    # caller does not stop a statement already handed over), so it always comes
                    # last; a no-op when no transaction is open.
                    with contextlib.suppress(sqlite3.Error):
                        await db.rollback()
                    raise
            except sqlite3.Error as exc:
                raise self._fail(exc) from exc
            except ValueError as exc:  # aiosqlite: "Connection closed", a write racing close()
                raise StoreUnavailableError("The response store is closed.") from exc
        return result
