"""The Conversations API's objects in PostgreSQL: the part of `PostgresResponseStore` that keeps
`conv_...` conversations and their items (tables `conversation_objects`, `conversation_items`).

Every change to a conversation's items is made holding its `conversation_objects` row lock
(`FOR UPDATE`, or the row's own insert or delete), so appends to one conversation, on any replica,
run one after the other: each sees the last item the one before it wrote, which makes the
`expected_last` check and the duplicate-id check exact and the next position (max + 1) free.

Lock order, against the response puts (`_write_group`, which takes only the cluster-wide
WRITE_LOCK and then `responses`/`conversations` rows): an append takes its conversation's row
first and WRITE_LOCK last, only when it stores a response, after its checks and its items. No
transaction takes a conversation row while holding WRITE_LOCK, so no cycle can form; and a put
never waits behind an append that is itself waiting for a conversation row. The byte bound keeps
that order: an append or a create that must evict takes WRITE_LOCK last, after its own writes, and
an eviction under WRITE_LOCK skips the rows another transaction holds (`FOR UPDATE SKIP LOCKED`)
rather than wait for them; the store's size is kept as inserted size changes, never one shared
row that every writer would lock (store/postgres/database.py, version 3).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import Any

from gateway.store.api import (
    Conversation,
    ConversationConflictError,
    ConversationItem,
    DuplicateItemError,
    ItemPage,
    ItemTail,
    StoredResponse,
    UnknownConversationError,
    UnknownItemError,
)
from gateway.store.json_columns import from_text, from_text_or_none, item_rows, to_text
from gateway.store.postgres.database import Conn, PostgresDatabase

_INSERT_CONVERSATION = ("INSERT INTO conversation_objects (id, created_at, metadata, last_access, bytes, owner)"
                        " VALUES ($1, $2, $3, nextval('responses_access'), octet_length($3), $4)")
_INSERT_ITEM = ("INSERT INTO conversation_items (conversation_id, position, id, item, model, bytes)"
                " VALUES ($1, $2, $3, $4, $5, $6)")
_TOUCH_CONVERSATION = "UPDATE conversation_objects SET last_access = nextval('responses_access') WHERE id = $1"
#: As SQLite's (sqlite/conversations.py): the newest items whose newer ones sum under $2, on the
#: covering index; the LEFT JOIN tells an unknown conversation (no row) from an empty one.
_TAIL = (
    "SELECT c.id AS conversation, i.id, i.item, i.model, i.position FROM conversation_objects c"
    " LEFT JOIN conversation_items i ON i.conversation_id = c.id AND i.position >= coalesce((SELECT min(position)"
    " FROM (SELECT position, sum(bytes) OVER (ORDER BY position DESC) - bytes AS newer"
    " FROM conversation_items WHERE conversation_id = $1) sized WHERE newer < $2), 9223372036854775807)"
    " WHERE c.id = $1 ORDER BY i.position"
)
_FIRST_POSITION = "SELECT min(position) FROM conversation_items WHERE conversation_id = $1"
_GET_CONVERSATION = "SELECT id, created_at, metadata, owner FROM conversation_objects WHERE id = $1"
_LOCK_CONVERSATION = _GET_CONVERSATION + " FOR UPDATE"
_UPDATE_CONVERSATION = ("UPDATE conversation_objects SET metadata = $2, bytes = octet_length($2) WHERE id = $1"
                        " RETURNING id, created_at, metadata, owner")
_DELETE_CONVERSATION = "DELETE FROM conversation_objects WHERE id = $1"
_LAST_ITEM = ("SELECT id, position FROM conversation_items WHERE conversation_id = $1"
              " ORDER BY position DESC LIMIT 1")
_TAKEN_IDS = "SELECT id FROM conversation_items WHERE conversation_id = $1 AND id = ANY($2::text[])"
# a LEFT JOIN: one statement tells an unknown conversation (no row) from an empty one (item NULL)
_ALL_ITEMS = ("SELECT i.item, i.model FROM conversation_objects c"
              " LEFT JOIN conversation_items i ON i.conversation_id = c.id"
              " WHERE c.id = $1 ORDER BY i.position")
_GET_ITEM = ("SELECT i.item, i.model FROM conversation_objects c"
             " LEFT JOIN conversation_items i ON i.conversation_id = c.id AND i.id = $2 WHERE c.id = $1")
_DELETE_ITEM = "DELETE FROM conversation_items WHERE conversation_id = $1 AND id = $2"
_EXISTS = "SELECT 1 FROM conversation_objects WHERE id = $1"
_POSITION = "SELECT position FROM conversation_items WHERE conversation_id = $1 AND id = $2"
# a page: LIMIT $3 is the page size + 1, the extra row only telling whether there is more;
# positions start at 1, so the coalesce bound of a first page lets every item through
_PAGE = {
    "asc": ("SELECT item, model FROM conversation_items WHERE conversation_id = $1"
            " AND position > coalesce($2::bigint, 0) ORDER BY position LIMIT $3"),
    "desc": ("SELECT item, model FROM conversation_items WHERE conversation_id = $1"
             " AND position < coalesce($2::bigint, 9223372036854775807) ORDER BY position DESC LIMIT $3"),
}


class PostgresConversations(ABC):
    """Conversation objects, mixed into `PostgresResponseStore` (which gives `database` and
    `_put_within`, its put in a transaction of ours)."""

    database: PostgresDatabase

    @abstractmethod
    async def _bound(self, conn: Conn, keep: set[str], *, locked: bool) -> None:
        """The byte bound at the end of a write (store/postgres/store.py), never evicting `keep`."""

    @abstractmethod
    async def _put_within(self, conn: Conn, record: StoredResponse) -> None:
        """`put` `record` in `conn`'s transaction: the same statements, write lock and eviction;
        raises ConversationConflictError if its named conversation's head moved."""

    async def create_conversation(self, conversation: Conversation, items: list[ConversationItem]) -> None:
        DuplicateItemError.check(conversation.id, items, set())
        async with self.database.transaction() as conn:
            await conn.execute(_INSERT_CONVERSATION, conversation.id, conversation.created_at,
                               to_text(conversation.metadata), conversation.owner)
            await _insert_items(conn, conversation.id, items, first=1)
            await self._bound(conn, {conversation.id}, locked=False)

    async def get_conversation(self, conversation_id: str) -> Conversation:
        row = await self.database.run(lambda conn: conn.fetchrow(_GET_CONVERSATION, conversation_id))
        return _conversation(row, conversation_id)

    async def update_conversation(self, conversation_id: str, metadata: dict[str, str]) -> Conversation:
        row = await self.database.run(
            lambda conn: conn.fetchrow(_UPDATE_CONVERSATION, conversation_id, to_text(metadata)))
        return _conversation(row, conversation_id)

    async def delete_conversation(self, conversation_id: str) -> None:
        # the items go by the foreign key's cascade; responses made in it are not tied to it
        status = await self.database.run(lambda conn: conn.execute(_DELETE_CONVERSATION, conversation_id))
        if status == "DELETE 0":
            raise UnknownConversationError.on(conversation_id)

    async def append_items(self, conversation_id: str, items: list[ConversationItem], *,
                           expected_last: str | None = None, response: StoredResponse | None = None) -> None:
        async with self.database.transaction() as conn:
            _conversation(await conn.fetchrow(_LOCK_CONVERSATION, conversation_id), conversation_id)
            last = await conn.fetchrow(_LAST_ITEM, conversation_id)
            if expected_last is not None and (last["id"] if last is not None else "") != expected_last:
                raise ConversationConflictError.on(conversation_id)
            taken = await conn.fetch(_TAKEN_IDS, conversation_id, [i.id for i in items])
            DuplicateItemError.check(conversation_id, items, {row["id"] for row in taken})
            await _insert_items(conn, conversation_id, items, first=(last["position"] if last else 0) + 1)
            await conn.execute(_TOUCH_CONVERSATION, conversation_id)
            keep = {conversation_id}
            if response is not None:
                await self._put_within(conn, response)  # takes WRITE_LOCK: last, see the docstring
                keep.add(response.id)
            await self._bound(conn, keep, locked=response is not None)

    async def conversation_items(self, conversation_id: str) -> list[ConversationItem]:
        rows = await self.database.run(lambda conn: conn.fetch(_ALL_ITEMS, conversation_id))
        if not rows:
            raise UnknownConversationError.on(conversation_id)
        return [_item(row) for row in rows if row["item"] is not None]

    async def conversation_tail(self, conversation_id: str, *, max_bytes: int,
                                check_ids: Collection[str] = ()) -> ItemTail:
        async def body(conn: Conn) -> ItemTail:
            rows = await conn.fetch(_TAIL, conversation_id, max_bytes)
            if not rows:
                raise UnknownConversationError.on(conversation_id)
            kept = [row for row in rows if row["id"] is not None]
            taken = {row["id"] for row in await conn.fetch(_TAKEN_IDS, conversation_id, list(check_ids))} \
                if check_ids else set()
            if not kept:
                return ItemTail([], complete=True, last_id="", taken=taken)
            first = await conn.fetchval(_FIRST_POSITION, conversation_id)
            return ItemTail([_item(row) for row in kept], complete=first == kept[0]["position"],
                            last_id=str(kept[-1]["id"]), taken=taken)

        return await self.database.run(body)

    async def list_items(self, conversation_id: str, *, limit: int, order: str = "desc",
                         after: str | None = None) -> ItemPage:
        page_sql = _PAGE.get(order)
        if page_sql is None:
            raise ValueError(f"order must be 'asc' or 'desc', not {order!r}")

        async def body(conn: Conn) -> ItemPage:
            if await conn.fetchval(_EXISTS, conversation_id) is None:
                raise UnknownConversationError.on(conversation_id)
            bound: int | None = None
            if after is not None:
                bound = await conn.fetchval(_POSITION, conversation_id, after)
                if bound is None:
                    raise UnknownItemError.on(after, conversation_id, param="after")
            rows = await conn.fetch(page_sql, conversation_id, bound, limit + 1)
            return ItemPage(items=[_item(row) for row in rows[:limit]], has_more=len(rows) > limit)

        return await self.database.run(body)

    async def get_item(self, conversation_id: str, item_id: str) -> ConversationItem:
        row = await self.database.run(lambda conn: conn.fetchrow(_GET_ITEM, conversation_id, item_id))
        if row is None:
            raise UnknownConversationError.on(conversation_id)
        if row["item"] is None:
            raise UnknownItemError.on(item_id, conversation_id)
        return _item(row)

    async def delete_item(self, conversation_id: str, item_id: str) -> Conversation:
        async with self.database.transaction() as conn:
            # the row lock, as for an append: an append's `expected_last` check sees this delete or not at all
            conversation = _conversation(await conn.fetchrow(_LOCK_CONVERSATION, conversation_id), conversation_id)
            if await conn.execute(_DELETE_ITEM, conversation_id, item_id) == "DELETE 0":
                raise UnknownItemError.on(item_id, conversation_id)
        return conversation


async def _insert_items(conn: Conn, conversation_id: str, items: list[ConversationItem], *, first: int) -> None:
    if items:
        await conn.executemany(_INSERT_ITEM, item_rows(conversation_id, items, first))


def _conversation(row: Any, conversation_id: str) -> Conversation:
    if row is None:
        raise UnknownConversationError.on(conversation_id)
    return Conversation(id=row["id"], created_at=row["created_at"], metadata=from_text(row["metadata"]),
                        owner=row["owner"])


def _item(row: Any) -> ConversationItem:
    return ConversationItem(item=from_text(row["item"]),
                            model=from_text_or_none(row["model"]))
