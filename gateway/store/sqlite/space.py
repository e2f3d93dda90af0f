"""The SQLite backend's space: the byte bound (`max_bytes`, responses and conversation objects
alike, least recently used first) and handing free pages back to the file system, so the file
shrinks after deletes and evictions (the file is `auto_vacuum = INCREMENTAL`, sqlite/schema.py).
A mixin of `SQLiteResponseStore` (sqlite.py), called at the end of each write and after its commit.
"""

from __future__ import annotations

import contextlib
import sqlite3

import aiosqlite

#: The least recently used objects, responses and conversation objects alike, with their sizes (a
#: conversation's with its items, summed on the covering index): the byte bound's candidates.
_OLDEST = (
    "SELECT 'response', id, last_access, bytes FROM"
    " (SELECT id, last_access, bytes FROM responses ORDER BY last_access, id LIMIT ?)"
    " UNION ALL SELECT 'conversation', o.id, o.last_access, o.bytes"
    " + (SELECT coalesce(sum(i.bytes), 0) FROM conversation_items i WHERE i.conversation_id = o.id)"
    " FROM (SELECT id, last_access, bytes FROM conversation_objects ORDER BY last_access, id LIMIT ?) o"
    " ORDER BY 3, 2"
)
_SPACE = ("SELECT (SELECT bytes FROM store_usage),"
          " (SELECT freelist_count FROM pragma_freelist_count()) * (SELECT page_size FROM pragma_page_size())")
#: Freed bytes after which the file hands its free pages back (PRAGMA incremental_vacuum).
RECLAIM_AFTER = 1 << 20


class SQLiteSpace:
    max_bytes: int | None
    #: the file's free pages after the last write, in bytes
    _free_bytes: int = 0

    async def _bound(self, db: aiosqlite.Connection, keep: set[str]) -> None:
        """The byte bound, at the end of a write: the least recently used objects go, oldest first,
        until the stored bytes fit (never one of `keep`, what this write wrote: an object larger than
        the bound alone stays until the next write). Then notes the file's free space, for `_reclaim`."""
        total, self._free_bytes = await self._space(db)
        while self.max_bytes is not None and total > self.max_bytes:
            evict: dict[str, list[str]] = {"response": [], "conversation": []}
            over = total - self.max_bytes
            for kind, object_id, _, size in await db.execute_fetchall(_OLDEST, (64, 64)):
                if over <= 0:
                    break
                if object_id not in keep:
                    evict[kind].append(object_id)
                    over -= size
            if not evict["response"] and not evict["conversation"]:
                break  # only what this write wrote is left
            for table, ids in (("responses", evict["response"]), ("conversation_objects", evict["conversation"])):
                if ids:
                    await db.execute(f"DELETE FROM {table} WHERE id IN ({','.join('?' * len(ids))})", tuple(ids))
            total, self._free_bytes = await self._space(db)

    @staticmethod
    async def _space(db: aiosqlite.Connection) -> tuple[int, int]:
        """The stored bytes, and the file's free pages in bytes (this write's deletes included):
        one statement, so one hand-over to aiosqlite's thread per write."""
        rows = await db.execute_fetchall(_SPACE)
        total, free = next(iter(rows))
        return int(total), int(free)

    async def _reclaim(self, db: aiosqlite.Connection) -> None:
        """After a write: once a MiB or more of the file is free (deletes, evictions), the free pages go
        back to the file system, so the file shrinks (its own transaction: a pragma that sqlite3's
        `execute` would step only once)."""
        if self._free_bytes >= RECLAIM_AFTER:
            with contextlib.suppress(sqlite3.Error):  # the write is committed: space can wait
                await db.executescript("PRAGMA incremental_vacuum;")
                self._free_bytes = 0

