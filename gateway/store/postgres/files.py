"""Uploaded files (store/files.py) in PostgreSQL, schema version 9: `PostgresResponseStore.files`.

One row per file in `files`, its bytes a BYTEA kept out of line (TOAST), so every replica on the
database serves every file. An upload and the text cached after a first use each end with the byte
bound (`_bound`, the store's: WRITE_LOCK taken last, only when there is eviction to do, as the
conversations' writes do), which evicts files as it evicts responses. A use stamps `last_access`
from the cluster-wide sequence in the same statement that reads the file (`UPDATE ... RETURNING`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gateway.store.files import FilePage, FileStore, FileText, StoredFile, UnknownFileError, stored_bytes
from gateway.store.postgres.database import Conn, PostgresDatabase

#: the store's byte bound: (connection, ids this write keeps, whether WRITE_LOCK is held)
Bound = Callable[..., Awaitable[None]]

_META = "id, created_at, filename, purpose, size, media_type, owner"
_INSERT = ("INSERT INTO files (id, created_at, filename, purpose, size, media_type, owner, last_access, seq, bytes,"
           " data) VALUES ($1, $2, $3, $4, $5, $6, $7, nextval('responses_access'), nextval('responses_access'),"
           " $8, $9)")
_GET = f"SELECT {_META} FROM files WHERE id = $1 AND owner = $2"
_USE = "UPDATE files SET last_access = nextval('responses_access') WHERE id = $1 AND owner = $2"
_TEXT = f"{_USE} RETURNING {_META}, text, note"
_CONTENT = f"{_USE} RETURNING data"
_KEEP_TEXT = ("UPDATE files SET text = $3, note = $4, bytes = $5, last_access = nextval('responses_access')"
              " WHERE id = $1 AND owner = $2 AND text IS NULL")
_DELETE = "DELETE FROM files WHERE id = $1 AND owner = $2"
_CURSOR = "SELECT seq FROM files WHERE id = $1 AND owner = $2"
_PAGE = {
    "desc": f"SELECT {_META} FROM files WHERE owner = $1 AND ($2::text IS NULL OR purpose = $2)"
            " AND ($3::bigint IS NULL OR seq < $3) ORDER BY seq DESC LIMIT $4",
    "asc": f"SELECT {_META} FROM files WHERE owner = $1 AND ($2::text IS NULL OR purpose = $2)"
           " AND ($3::bigint IS NULL OR seq > $3) ORDER BY seq LIMIT $4",
}


def _file(row: Any) -> StoredFile:
    return StoredFile(id=row[0], created_at=int(row[1]), filename=row[2], purpose=row[3], size=int(row[4]),
                      media_type=row[5], owner=row[6])


def _storable(text: str) -> str:
    return text.replace("\x00", "")  # a PDF's text may hold NULs, which PostgreSQL's text refuses


class PostgresFiles(FileStore):
    def __init__(self, database: PostgresDatabase, bound: Bound) -> None:
        self.database = database
        self._bound = bound

    async def add(self, file: StoredFile, data: bytes | bytearray) -> None:
        async with self.database.transaction() as conn:
            await conn.execute(_INSERT, file.id, file.created_at, file.filename, file.purpose, file.size,
                               file.media_type, file.owner, stored_bytes(file), data)
            await self._bound(conn, {file.id}, locked=False)

    async def get(self, owner: str, file_id: str) -> StoredFile | None:
        row = await self.database.run(lambda conn: conn.fetchrow(_GET, file_id, owner))
        return _file(row) if row is not None else None

    async def content(self, owner: str, file_id: str) -> bytes | None:
        data = await self.database.run(lambda conn: conn.fetchval(_CONTENT, file_id, owner))
        return bytes(data) if data is not None else None

    async def text(self, owner: str, file_id: str) -> tuple[StoredFile, FileText | None] | None:
        row = await self.database.run(lambda conn: conn.fetchrow(_TEXT, file_id, owner))
        if row is None:
            return None
        text = None if row["text"] is None else FileText(row["text"], row["note"] or "")
        return _file(row), text

    async def keep_text(self, owner: str, file_id: str, text: FileText) -> None:
        text = FileText(_storable(text.text), _storable(text.note))

        async def body(conn: Conn) -> None:
            file = await conn.fetchrow(_GET, file_id, owner)
            if file is None:
                return
            await conn.execute(_KEEP_TEXT, file_id, owner, text.text, text.note, stored_bytes(_file(file), text))
            await self._bound(conn, {file_id}, locked=False)

        async with self.database.transaction() as conn:
            await body(conn)

    async def list(self, owner: str, *, limit: int, order: str = "desc", after: str | None = None,
                   purpose: str | None = None) -> FilePage:
        async def body(conn: Conn) -> list[Any]:
            since = None
            if after is not None:
                since = await conn.fetchval(_CURSOR, after, owner)
                if since is None:
                    return []
            return list(await conn.fetch(_PAGE[order], owner, purpose, since, limit + 1))

        rows = await self.database.run(body)
        if after is not None and not rows and await self.get(owner, after) is None:
            raise UnknownFileError.on(after, param="after")
        return FilePage([_file(row) for row in rows[:limit]], has_more=len(rows) > limit)

    async def delete(self, owner: str, file_id: str) -> bool:
        status = await self.database.run(lambda conn: conn.execute(_DELETE, file_id, owner))
        return bool(status != "DELETE 0")
