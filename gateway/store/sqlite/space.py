"""The SQLite backend's space: the byte bound (`max_bytes`, responses, conversation objects and
files alike, the largest owner's least recently used first) and handing free pages back to the file
system, so the file shrinks after deletes and evictions (the file is `auto_vacuum = INCREMENTAL`, sqlite/schema.py).
A mixin of `SQLiteResponseStore` (sqlite.py), called at the end of each write and after its commit.
"""

from __future__ import annotations

import contextlib
import sqlite3

import aiosqlite

from gateway.store.eviction import BATCH, Candidate, evict_largest_first

#: One owner's least recently used objects, responses and conversation objects alike, with their
#: sizes (a response's with its run's events, a conversation's with its items, summed on the covering
#: index): the byte bound's candidates.
_OLDEST = (
    "SELECT 'response', r.id, r.last_access, r.bytes"
    " + (SELECT coalesce(sum(length(e.frame)), 0) FROM background_events e WHERE e.response_id = r.id) FROM"
    " (SELECT id, last_access, bytes FROM responses WHERE owner = ?1 ORDER BY last_access, id LIMIT ?2) r"
    " UNION ALL SELECT 'conversation', o.id, o.last_access, o.bytes"
    " + (SELECT coalesce(sum(i.bytes), 0) FROM conversation_items i WHERE i.conversation_id = o.id)"
    " FROM (SELECT id, last_access, bytes FROM conversation_objects WHERE owner = ?1"
    " ORDER BY last_access, id LIMIT ?2) o"
    " UNION ALL SELECT * FROM (SELECT 'file', id, last_access, bytes FROM files WHERE owner = ?1"
    " ORDER BY last_access, id LIMIT ?2) ORDER BY 3, 2"
)
#: The stored bytes of each owner (of the profile ?1 starts, None: every owner): read only when the
#: total is over the bound. The responses' bytes are owner_usage's (one row per owner, schema
#: version 10): a store at its bound reads this on every write.
_OWNER_SIZES = (
    "SELECT owner, sum(bytes) FROM (SELECT owner, bytes FROM owner_usage"
    " WHERE ?1 IS NULL OR substr(owner, 1, length(?1)) = ?1"
    " UNION ALL SELECT o.owner, o.bytes"
    " + (SELECT coalesce(sum(i.bytes), 0) FROM conversation_items i WHERE i.conversation_id = o.id)"
    " FROM conversation_objects o WHERE ?1 IS NULL OR substr(o.owner, 1, length(?1)) = ?1"
    " UNION ALL SELECT r.owner, length(e.frame) FROM background_runs r JOIN background_events e"
    " ON e.response_id = r.response_id WHERE ?1 IS NULL OR substr(r.owner, 1, length(?1)) = ?1"
    " UNION ALL SELECT owner, bytes FROM files WHERE ?1 IS NULL OR substr(owner, 1, length(?1)) = ?1) GROUP BY owner"
)
_SPACE = ("SELECT (SELECT bytes FROM store_usage),"
          " (SELECT freelist_count FROM pragma_freelist_count()) * (SELECT page_size FROM pragma_page_size())")
#: Freed bytes after which the file hands its free pages back (PRAGMA incremental_vacuum).
RECLAIM_AFTER = 1 << 20


class SQLiteSpace:
    max_bytes: int | None
    #: what the owners of this store's profile start with (None: every owner is this profile's)
    _owner_prefix: str | None = None
    #: the file's free pages after the last write, in bytes
    _free_bytes: int = 0

    async def _bound(self, db: aiosqlite.Connection, keep: set[str]) -> None:
        """The byte bound, at the end of a write: while the stored bytes are over it, the largest
        owner's least recently used objects go first (store/eviction.py), never one of `keep`. Then
        notes the file's free space, for `_reclaim`."""
        total, self._free_bytes = await self._space(db)
        if self.max_bytes is None or total <= self.max_bytes:
            return
        rows = await db.execute_fetchall(_OWNER_SIZES, (self._owner_prefix,))
        sizes = {str(owner): int(size) for owner, size in rows}

        async def oldest(owner: str) -> list[Candidate]:
            found = await db.execute_fetchall(_OLDEST, (owner, BATCH))
            return [(str(kind), str(object_id), int(size)) for kind, object_id, _, size in found]

        async def delete(evict: dict[str, list[str]]) -> bool:
            for table, ids in (("responses", evict["response"]), ("conversation_objects", evict["conversation"]),
                               ("files", evict["file"])):
                if ids:
                    await db.execute(f"DELETE FROM {table} WHERE id IN ({','.join('?' * len(ids))})", tuple(ids))
            return True

        await evict_largest_first(sizes, sum(sizes.values()) - self.max_bytes, keep, oldest, delete)
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

