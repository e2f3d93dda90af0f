"""Uploaded files (store/files.py) in the SQLite file, schema version 9: `SQLiteResponseStore.files`.

One row per file in `files`, its bytes a BLOB in the last column (a read of the metadata or of the
cached text never walks the BLOB's overflow pages). Writes are the store's transactions (durable on
return), each ending with the byte bound, which evicts files as it evicts responses (sqlite/space.py).
A use (its text or content read) stamps `last_access` in its own small write: files are used far
less often than responses are read, so a write per use costs little and needs no batching.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import aiosqlite

from gateway.store.files import FilePage, FileStore, FileText, StoredFile, UnknownFileError, stored_bytes

T = TypeVar("T")

_META = "id, created_at, filename, purpose, size, media_type, owner"
_INSERT = ("INSERT INTO files (id, created_at, filename, purpose, size, media_type, owner, last_access, seq, bytes,"
           " data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10)")
_GET = f"SELECT {_META} FROM files WHERE id = ? AND owner = ?"
_TEXT = f"SELECT {_META}, text, note FROM files WHERE id = ? AND owner = ?"
_CONTENT = "SELECT data FROM files WHERE id = ? AND owner = ?"
_TOUCH = "UPDATE files SET last_access = max(last_access, ?) WHERE id = ? AND owner = ?"
_KEEP_TEXT = "UPDATE files SET text = ?, note = ?, bytes = ? WHERE id = ? AND owner = ? AND text IS NULL"
_DELETE = "DELETE FROM files WHERE id = ? AND owner = ?"
_CURSOR = "SELECT seq FROM files WHERE id = ? AND owner = ?"
_PAGE = {
    "desc": f"SELECT {_META} FROM files WHERE owner = ?1 AND (?2 IS NULL OR purpose = ?2)"
            " AND (?3 IS NULL OR seq < ?3) ORDER BY seq DESC LIMIT ?4",
    "asc": f"SELECT {_META} FROM files WHERE owner = ?1 AND (?2 IS NULL OR purpose = ?2)"
           " AND (?3 IS NULL OR seq > ?3) ORDER BY seq LIMIT ?4",
}


class _Store(Protocol):
    """What the files use of `SQLiteResponseStore`: its transactions, reads, clock and byte bound."""

    async def _transaction(self, body: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T: ...

    async def _read(self, sql: str, parameters: tuple[Any, ...]) -> list[Any]: ...

    async def _bound(self, db: aiosqlite.Connection, keep: set[str]) -> None: ...

    def _tick(self) -> int: ...


def _file(row: Any) -> StoredFile:
    return StoredFile(id=row[0], created_at=int(row[1]), filename=row[2], purpose=row[3], size=int(row[4]),
                      media_type=row[5], owner=row[6])


class SQLiteFiles(FileStore):
    def __init__(self, store: _Store) -> None:
        self._store = store

    async def add(self, file: StoredFile, data: bytes | bytearray) -> None:
        async def body(db: aiosqlite.Connection) -> None:
            await db.execute(_INSERT, (file.id, file.created_at, file.filename, file.purpose, file.size,
                                       file.media_type, file.owner, self._store._tick(), stored_bytes(file), data))
            await self._store._bound(db, {file.id})

        await self._store._transaction(body)

    async def get(self, owner: str, file_id: str) -> StoredFile | None:
        rows = await self._store._read(_GET, (file_id, owner))
        return _file(rows[0]) if rows else None

    async def _touch(self, owner: str, file_id: str) -> None:
        tick = self._store._tick()

        async def body(db: aiosqlite.Connection) -> None:
            await db.execute(_TOUCH, (tick, file_id, owner))

        await self._store._transaction(body)

    async def content(self, owner: str, file_id: str) -> bytes | None:
        rows = await self._store._read(_CONTENT, (file_id, owner))
        if not rows:
            return None
        await self._touch(owner, file_id)
        return bytes(rows[0][0])

    async def text(self, owner: str, file_id: str) -> tuple[StoredFile, FileText | None] | None:
        rows = await self._store._read(_TEXT, (file_id, owner))
        if not rows:
            return None
        file, (text, note) = _file(rows[0]), rows[0][7:9]
        if text is None:
            return file, None  # the text is read now and kept (keep_text): that write is its use
        await self._touch(owner, file_id)
        return file, FileText(text, note or "")

    async def keep_text(self, owner: str, file_id: str, text: FileText) -> None:
        file = await self.get(owner, file_id)
        if file is None:
            return
        tick = self._store._tick()

        async def body(db: aiosqlite.Connection) -> None:
            await db.execute(_KEEP_TEXT, (text.text, text.note, stored_bytes(file, text), file_id, owner))
            await db.execute(_TOUCH, (tick, file_id, owner))
            await self._store._bound(db, {file_id})

        await self._store._transaction(body)

    async def list(self, owner: str, *, limit: int, order: str = "desc", after: str | None = None,
                   purpose: str | None = None) -> FilePage:
        since: int | None = None
        if after is not None:
            found = await self._store._read(_CURSOR, (after, owner))
            if not found:
                raise UnknownFileError.on(after, param="after")
            since = int(found[0][0])
        rows = await self._store._read(_PAGE[order], (owner, purpose, since, limit + 1))
        return FilePage([_file(row) for row in rows[:limit]], has_more=len(rows) > limit)

    async def delete(self, owner: str, file_id: str) -> bool:
        async def body(db: aiosqlite.Connection) -> bool:
            cursor = await db.execute(_DELETE, (file_id, owner))
            return cursor.rowcount > 0

        return await self._store._transaction(body)

