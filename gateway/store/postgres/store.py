"""The PostgreSQL backend of the Responses store, shared by every replica on one database.

Selected by `API_SERVER_DATABASE_URL=postgresql://...`. Every write that the LRU bound or a
conversation head depends on (a put) takes one cluster-wide advisory lock for its transaction,
so the bound holds for the whole cluster and a conversation's head is checked and moved
atomically. A touching read is one statement (`UPDATE ... RETURNING`): the record comes back
whole with its new access stamp, and an eviction racing it either deletes the row first (the read
finds nothing) or after (the read already has all of it).

Conversation objects (`conv_...`, the Conversations API) are in store/postgres/conversations.py, mixed
in; an append that stores a response writes it with `_write_rows`, the same code as a put's.
"""

from __future__ import annotations

from typing import Any

from gateway.store.api import (
    Chain,
    ConversationConflictError,
    ResponseStore,
    StoredResponse,
)
from gateway.store.eviction import BATCH, Candidate, evict_largest_first
from gateway.store.files import FileStore
from gateway.store.group_commit import GroupCommit
from gateway.store.json_columns import from_text, to_text
from gateway.store.owners import owner_prefix
from gateway.store.postgres.conversations import PostgresConversations
from gateway.store.postgres.database import WRITE_LOCK, Conn, PostgresDatabase
from gateway.store.postgres.files import PostgresFiles
from gateway.store.postgres.runs import PostgresRuns
from gateway.store.runs import RunStore

_COLUMNS = "id, created_at, conversation, response, transcript, input_items, parent_id, owner"
_R_COLUMNS = ", ".join("r." + c for c in _COLUMNS.split(", "))

_UPSERT = (
    "INSERT INTO responses (id, created_at, last_access, conversation, response, transcript, input_items,"
    " parent_id, bytes, history_bytes, owner)"
    " VALUES ($1, $2, nextval('responses_access'), $3, $4, $5, $6, $7, $8, $9, $10)"
    " ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at,"
    " last_access = excluded.last_access, conversation = excluded.conversation,"
    " response = excluded.response, transcript = excluded.transcript, input_items = excluded.input_items,"
    " parent_id = excluded.parent_id, bytes = excluded.bytes, history_bytes = excluded.history_bytes"
    # a stored record keeps its owner: a put of its id by anyone else changes nothing (a run claimed
    # by the wrong replica, a forged id), so it can never pass to another owner
    " WHERE responses.owner = excluded.owner"
)
_UPSERT_HEAD = ("INSERT INTO conversations (name, response_id) VALUES ($1, $2)"
                " ON CONFLICT (name) DO UPDATE SET response_id = excluded.response_id")
#: Each writing owner's ($1) least recently used responses beyond the cap ($2): the cap is each
#: owner's, so one key's puts never evict another key's records (nor another profile's). The count
#: is owner_usage's (schema version 10): a few rows per owner, however many it stores.
#: `= ANY(ARRAY(...))` rather than `IN (...)`: the planner made the IN a hash semi-join over a
#: sequential scan of the whole table (EXPLAIN ANALYZE at 1M rows: 83 ms for nothing to evict).
_EVICT_OVER_CAP = ("DELETE FROM responses WHERE id = ANY(ARRAY(SELECT r.id FROM unnest($1::text[]) AS o(owner)"
                   " CROSS JOIN LATERAL (SELECT id FROM responses WHERE owner = o.owner ORDER BY last_access, id"
                   " LIMIT greatest(0, (SELECT coalesce(sum(u.responses), 0) FROM owner_usage u"
                   " WHERE u.owner = o.owner) - $2)) AS r))")
_HEADS = "SELECT name, response_id FROM conversations WHERE name = ANY($1::text[])"
#: A row as the group writer holds it: the values of `_UPSERT`.
_Row = tuple[str, int, str | None, str, str, str, str | None, int, int, str]
_GET = f"SELECT {_COLUMNS} FROM responses WHERE id = $1"
_GET_TOUCH = (f"UPDATE responses SET last_access = nextval('responses_access') WHERE id = $1"
              f" RETURNING {_COLUMNS}")
_HEAD = (f"SELECT {_R_COLUMNS} FROM conversations c JOIN responses r ON r.id = c.response_id"
         " WHERE c.name = $1")
#: As SQLite's (store/sqlite/store.py): newest first, each step while the turns so far are under $2.
_CHAIN = (
    "WITH RECURSIVE chain(id, parent_id, depth, total) AS ("
    " SELECT id, parent_id, 0, history_bytes FROM responses WHERE id = $1"
    " UNION ALL SELECT r.id, r.parent_id, c.depth + 1, c.total + r.history_bytes"
    " FROM chain c JOIN responses r ON r.id = c.parent_id WHERE c.total < $2)"
    f" SELECT {_R_COLUMNS}, EXISTS (SELECT 1 FROM responses p WHERE p.id = r.parent_id) AS more"
    " FROM chain c JOIN responses r ON r.id = c.id ORDER BY c.depth"
)
_TOUCH_ALL = "UPDATE responses SET last_access = nextval('responses_access') WHERE id = ANY($1::text[])"
_USAGE = "SELECT coalesce(sum(bytes), 0), count(*) FROM store_usage"
_FOLD_USAGE = ("WITH gone AS (DELETE FROM store_usage RETURNING bytes)"
               " INSERT INTO store_usage SELECT coalesce(sum(bytes), 0) FROM gone")
#: owner_usage's changes folded with them: one row per owner again (only owners with more than one)
_FOLD_OWNERS = ("WITH gone AS (DELETE FROM owner_usage WHERE owner IN (SELECT owner FROM owner_usage"
                " GROUP BY owner HAVING count(*) > 1) RETURNING owner, responses, bytes)"
                " INSERT INTO owner_usage SELECT owner, sum(responses), sum(bytes) FROM gone GROUP BY owner")
#: The byte bound's candidates, as SQLite's: one owner's least recently used responses and conversations.
_OLDEST = (
    "(SELECT 'response' AS kind, r.id, r.last_access, r.bytes"
    " + (SELECT coalesce(sum(e.bytes), 0) FROM background_events e WHERE e.response_id = r.id) AS bytes"
    " FROM responses r WHERE r.owner = $1 ORDER BY r.last_access, r.id LIMIT $2)"
    " UNION ALL (SELECT 'conversation', o.id, o.last_access, o.bytes"
    " + (SELECT coalesce(sum(i.bytes), 0) FROM conversation_items i WHERE i.conversation_id = o.id)"
    " FROM conversation_objects o WHERE o.owner = $1 ORDER BY o.last_access, o.id LIMIT $2)"
    " UNION ALL (SELECT 'file', f.id, f.last_access, f.bytes FROM files f WHERE f.owner = $1"
    " ORDER BY f.last_access, f.id LIMIT $2) ORDER BY 3, 2"
)
#: Each owner's stored bytes, of the profile $1 starts (NULL: every owner): read only over the bound.
_OWNER_SIZES = (
    "SELECT owner, sum(bytes)::bigint FROM (SELECT owner, bytes FROM owner_usage"
    " WHERE $1::text IS NULL OR starts_with(owner, $1::text)"
    " UNION ALL SELECT o.owner, o.bytes"
    " + (SELECT coalesce(sum(i.bytes), 0) FROM conversation_items i WHERE i.conversation_id = o.id)"
    " FROM conversation_objects o WHERE $1::text IS NULL OR starts_with(o.owner, $1::text)"
    " UNION ALL SELECT r.owner, e.bytes FROM background_runs r JOIN background_events e"
    " ON e.response_id = r.response_id WHERE $1::text IS NULL OR starts_with(r.owner, $1::text)"
    " UNION ALL SELECT owner, bytes FROM files WHERE $1::text IS NULL OR starts_with(owner, $1::text)) AS s"
    " GROUP BY owner"
)
# SKIP LOCKED: a row another transaction holds (a conversation mid-append, a response being read)
# is left for a later eviction rather than waited for while holding WRITE_LOCK (postgres/conversations.py)
_EVICT = {
    "response": "DELETE FROM responses WHERE id IN (SELECT id FROM responses WHERE id = ANY($1::text[])"
                " FOR UPDATE SKIP LOCKED)",
    "conversation": "DELETE FROM conversation_objects WHERE id IN (SELECT id FROM conversation_objects"
                    " WHERE id = ANY($1::text[]) FOR UPDATE SKIP LOCKED)",
    "file": "DELETE FROM files WHERE id IN (SELECT id FROM files WHERE id = ANY($1::text[]) FOR UPDATE SKIP LOCKED)",
}
#: Size changes left unfolded after which a write holding WRITE_LOCK folds them (a put group), and
#: after which one that does not hold it takes it to fold them (an append without a response).
_FOLD_LOCKED = 64
_FOLD_AFTER = 512
_HEAD_TOUCH = (f"UPDATE responses r SET last_access = nextval('responses_access') FROM conversations c"
               f" WHERE c.name = $1 AND r.id = c.response_id RETURNING {_R_COLUMNS}")


class PostgresResponseStore(PostgresConversations, ResponseStore):
    """Responses and named conversations here; conversation objects in PostgresConversations."""

    def __init__(self, database: PostgresDatabase, max_responses: int, *, max_bytes: int | None = None,
                 profile: str | None = None) -> None:
        if max_responses < 1:
            raise ValueError("max_responses must be at least 1")
        self.database = database
        self.max_responses = max_responses
        self.max_bytes = max_bytes
        self._puts: GroupCommit[_Row] = GroupCommit(self._write_group, lambda row: str(row[2]))
        # the profile whose rows the byte bound weighs and whose queued runs this store claims
        # (None: any; profiles sharing one database each bound and run their own)
        self._owner_prefix = owner_prefix(profile)
        self._runs = PostgresRuns(database, profile)
        self._files = PostgresFiles(database, self._bound)

    @property
    def runs(self) -> RunStore:
        return self._runs

    @property
    def files(self) -> FileStore:
        return self._files

    async def open(self) -> None:
        await self.database.open()

    async def close(self) -> None:
        await self._puts.drain()  # puts already accepted are written (or fail) first
        await self._runs.close()
        await self.database.close()

    async def check(self) -> None:
        await self.database.check()

    async def put(self, record: StoredResponse) -> None:
        """Group commit, as the SQLite backend: the puts that arrive while one transaction is being
        written go together in the next one (one lock, one commit, one eviction for all of them).
        Nothing waits to fill a group: a put with no write in progress starts one at once."""
        await self._puts.put(_row(record), record.expected_head)

    async def _write_group(self, puts: list[tuple[_Row, str | None]]) -> list[bool]:
        """One transaction under the cluster-wide write lock; per put, whether it was refused."""
        async with self.database.transaction() as conn:
            return await self._write_rows(conn, puts)

    async def _put_within(self, conn: Conn, record: StoredResponse) -> None:
        """A put as one of a group of one, in the caller's transaction (a conversation's append)."""
        if (await self._write_rows(conn, [(_row(record), record.expected_head)], bound=False))[0]:
            raise ConversationConflictError.on(str(record.conversation))

    async def _write_rows(self, conn: Conn, puts: list[tuple[_Row, str | None]], *,
                          bound: bool = True) -> list[bool]:
        """Takes the write lock for the rest of `conn`'s transaction; per put, whether it was refused.
        `bound`: apply the byte bound here (an append applies it itself, keeping its conversation)."""
        refused = [False] * len(puts)
        await conn.execute("SELECT pg_advisory_xact_lock($1)", WRITE_LOCK)
        checked = list({v[2] for v, expected in puts if v[2] is not None and expected is not None})
        current: dict[str, str] = {}
        if checked:
            rows = await conn.fetch(_HEADS, checked)
            current = {row["name"]: row["response_id"] for row in rows}
        kept: list[_Row] = []
        heads: list[tuple[str, str]] = []
        for index, (values, expected) in enumerate(puts):
            name = values[2]
            if name is not None and expected is not None and current.get(name, expected) != expected:
                refused[index] = True  # another turn is the head now (an earlier one in this group too)
                continue
            kept.append(values)
            if name is not None:
                heads.append((name, values[0]))
                current[name] = values[0]
        if kept:
            await conn.executemany(_UPSERT, kept)
        if heads:  # in call order, so the last put naming a conversation is its head
            await conn.executemany(_UPSERT_HEAD, heads)
        if kept:
            await conn.execute(_EVICT_OVER_CAP, sorted({values[9] for values in kept}), self.max_responses)
        if bound:
            await self._bound(conn, {values[0] for values in kept}, locked=True)
        return refused

    async def _bound(self, conn: Conn, keep: set[str], *, locked: bool) -> None:
        """The byte bound at the end of a write, as SQLite's (never one of `keep`). `locked`: the
        transaction holds WRITE_LOCK; otherwise it takes it only when there is work (eviction, or
        many size changes to fold), last, as the lock order in postgres/conversations.py says."""
        usage = await conn.fetchrow(_USAGE)
        assert usage is not None  # an aggregate: always one row
        total, changes = usage[0], usage[1]
        over = self.max_bytes is not None and total > self.max_bytes
        if not over and changes <= (_FOLD_AFTER if not locked else _FOLD_LOCKED):
            return
        if not locked:
            await conn.execute("SELECT pg_advisory_xact_lock($1)", WRITE_LOCK)
        await conn.execute(_FOLD_USAGE)
        await conn.execute(_FOLD_OWNERS)
        if self.max_bytes is None or total <= self.max_bytes:
            return
        # over the bound (all profiles' bytes): the bound is this profile's, so its own owners' bytes
        # decide, and the largest of them gives up its oldest first (store/eviction.py)
        sizes = {row[0]: int(row[1]) for row in await conn.fetch(_OWNER_SIZES, self._owner_prefix)}

        async def oldest(owner: str) -> list[Candidate]:
            return [(row["kind"], row["id"], int(row["bytes"])) for row in await conn.fetch(_OLDEST, owner, BATCH)]

        async def delete(evict: dict[str, list[str]]) -> bool:
            deleted = [await conn.execute(_EVICT[kind], ids) for kind, ids in evict.items() if ids]
            return not all(status == "DELETE 0" for status in deleted)  # all busy: left for the next write

        await evict_largest_first(sizes, sum(sizes.values()) - self.max_bytes, keep, oldest, delete)

    async def get(self, response_id: str, *, touch: bool = True) -> StoredResponse | None:
        row = await self.database.run(lambda conn: conn.fetchrow(_GET_TOUCH if touch else _GET, response_id))
        return _record(row) if row is not None else None

    async def delete(self, response_id: str) -> bool:
        async def body(conn: Conn) -> bool:
            status = await conn.execute("DELETE FROM responses WHERE id = $1", response_id)
            return bool(status != "DELETE 0")

        return await self.database.run(body)

    async def conversation_head(self, name: str, *, touch: bool = True) -> StoredResponse | None:
        row = await self.database.run(lambda conn: conn.fetchrow(_HEAD_TOUCH if touch else _HEAD, name))
        return _record(row) if row is not None else None

    async def count(self) -> int:
        return int(await self.database.run(lambda conn: conn.fetchval("SELECT count(*) FROM responses")))

    async def size(self) -> int:
        return int(await self.database.run(lambda conn: conn.fetchval(_USAGE)))

    async def chain(self, response_id: str, *, max_bytes: int, touch: bool = True) -> Chain | None:
        async def body(conn: Conn) -> list[Any]:
            rows = await conn.fetch(_CHAIN, response_id, max_bytes)
            if rows and touch:
                await conn.execute(_TOUCH_ALL, [row["id"] for row in rows])
            return list(rows)

        rows = await self.database.run(body)
        if not rows:
            return None
        return Chain([_record(row) for row in rows], complete=not rows[-1]["more"])


def _row(record: StoredResponse) -> _Row:
    response, transcript, items = to_text(record.response), to_text(record.transcript), to_text(record.input_items)
    return (record.id, record.created_at, record.conversation, response, transcript, items, record.parent_id,
            len(response) + len(transcript) + len(items), len(transcript), record.owner)


def _record(row: Any) -> StoredResponse:
    return StoredResponse(id=row[0], created_at=row[1], conversation=row[2], response=from_text(row[3]),
                          transcript=from_text(row[4]), input_items=from_text(row[5]), parent_id=row[6],
                          owner=row[7])
