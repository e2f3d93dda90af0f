"""The Conversations API's part of the SQLite backend: conversation objects and their items.

A mixin of `SQLiteResponseStore` (gateway/store/sqlite/store.py), which provides the connections: a write
is one `_transaction` on the writer connection, a read one or two statements on the reader. The
tables are created with the rest of the schema (sqlite/schema.py). Items keep their order in
`position` (the last one's + 1); their JSON is TEXT, as the responses' is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeVar

import aiosqlite

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

T = TypeVar("T")

_SELECT_CONVERSATION = "SELECT id, created_at, metadata, owner FROM conversation_objects WHERE id = ?"
_INSERT_ITEM = ("INSERT INTO conversation_items (conversation_id, position, id, item, model, bytes)"
                " VALUES (?, ?, ?, ?, ?, ?)")
#: A conversation's newest items within a byte budget (the third parameter), measured on the
#: covering index (conversation_items_sizes): each item whose newer ones sum under the budget.
_TAIL = (
    "SELECT o.id, i.id, i.item, i.model, i.position FROM conversation_objects o LEFT JOIN conversation_items i"
    " ON i.conversation_id = o.id AND i.position >= coalesce((SELECT min(position) FROM"
    " (SELECT position, sum(bytes) OVER (ORDER BY position DESC) - bytes AS newer"
    " FROM conversation_items WHERE conversation_id = ?) WHERE newer < ?), 1 << 62)"
    " WHERE o.id = ? ORDER BY i.position"
)
_FIRST_POSITION = "SELECT min(position) FROM conversation_items WHERE conversation_id = ?"
_LAST_ITEM = ("SELECT id, position FROM conversation_items WHERE conversation_id = ?"
              " ORDER BY position DESC LIMIT 1")
# one statement: no row at all means no such conversation, a row of NULLs an empty one
_ALL_ITEMS = ("SELECT i.item, i.model FROM conversation_objects o"
              " LEFT JOIN conversation_items i ON i.conversation_id = o.id WHERE o.id = ? ORDER BY i.position")
_AFTER = ("SELECT o.id, (SELECT position FROM conversation_items WHERE conversation_id = o.id AND id = ?)"
          " FROM conversation_objects o WHERE o.id = ?")
_PAGE = {
    "asc": ("SELECT item, model FROM conversation_items WHERE conversation_id = ? AND position > ?"
            " ORDER BY position LIMIT ?"),
    "desc": ("SELECT item, model FROM conversation_items WHERE conversation_id = ? AND position < ?"
             " ORDER BY position DESC LIMIT ?"),
}
_GET_ITEM = ("SELECT o.id, i.item, i.model FROM conversation_objects o LEFT JOIN conversation_items i"
             " ON i.conversation_id = o.id AND i.id = ? WHERE o.id = ?")


def _conversation(row: Any) -> Conversation:
    return Conversation(id=row[0], created_at=int(row[1]), metadata=from_text(row[2]), owner=row[3])


def _item(item_text: str, model_text: str | None) -> ConversationItem:
    return ConversationItem(item=from_text(item_text), model=from_text_or_none(model_text))


class SQLiteConversations:
    """The Conversations methods of `ResponseStore`, for the SQLite backend."""

    async def _transaction(self, body: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        raise NotImplementedError  # the store's

    async def _read(self, sql: str, parameters: tuple[Any, ...]) -> list[Any]:
        raise NotImplementedError  # the store's

    async def _put_in(self, db: aiosqlite.Connection, record: StoredResponse) -> None:
        raise NotImplementedError  # the store's: a put's statements inside a transaction

    async def _bound(self, db: aiosqlite.Connection, keep: set[str]) -> None:
        raise NotImplementedError  # the store's: the byte bound at the end of a write

    def _tick(self) -> int:
        raise NotImplementedError  # the store's: its access clock

    async def create_conversation(self, conversation: Conversation, items: list[ConversationItem]) -> None:
        DuplicateItemError.check(conversation.id, items, set())

        async def body(db: aiosqlite.Connection) -> None:
            metadata = to_text(conversation.metadata)
            await db.execute("INSERT INTO conversation_objects (id, created_at, metadata, last_access, bytes, owner)"
                             " VALUES (?, ?, ?, ?, ?, ?)", (conversation.id, conversation.created_at, metadata,
                                                           self._tick(), len(metadata), conversation.owner))
            await _insert(db, conversation.id, items, 1)
            await self._bound(db, {conversation.id})

        await self._transaction(body)

    async def get_conversation(self, conversation_id: str) -> Conversation:
        rows = await self._read(_SELECT_CONVERSATION, (conversation_id,))
        if not rows:
            raise UnknownConversationError.on(conversation_id)
        return _conversation(rows[0])

    async def update_conversation(self, conversation_id: str, metadata: dict[str, str]) -> Conversation:
        async def body(db: aiosqlite.Connection) -> Conversation:
            text = to_text(metadata)
            cursor = await db.execute("UPDATE conversation_objects SET metadata = ?, bytes = ? WHERE id = ?",
                                      (text, len(text), conversation_id))
            if cursor.rowcount == 0:
                raise UnknownConversationError.on(conversation_id)
            created_at, owner = await _created_at(db, conversation_id)
            return Conversation(id=conversation_id, created_at=created_at, metadata=dict(metadata), owner=owner)

        return await self._transaction(body)

    async def delete_conversation(self, conversation_id: str) -> None:
        async def body(db: aiosqlite.Connection) -> None:
            cursor = await db.execute("DELETE FROM conversation_objects WHERE id = ?", (conversation_id,))
            if cursor.rowcount == 0:
                raise UnknownConversationError.on(conversation_id)
            await self._bound(db, set())

        await self._transaction(body)

    async def append_items(self, conversation_id: str, items: list[ConversationItem], *,
                           expected_last: str | None = None, response: StoredResponse | None = None) -> None:
        DuplicateItemError.check(conversation_id, items, set())

        async def body(db: aiosqlite.Connection) -> None:
            await _lock(db, conversation_id, self._tick())
            last = list(await db.execute_fetchall(_LAST_ITEM, (conversation_id,)))
            last_id, last_position = (str(last[0][0]), int(last[0][1])) if last else ("", 0)
            if expected_last is not None and expected_last != last_id:
                raise ConversationConflictError.on(conversation_id)
            marks = ",".join("?" * len(items))
            taken = await db.execute_fetchall(
                f"SELECT id FROM conversation_items WHERE conversation_id = ? AND id IN ({marks})",
                (conversation_id, *(i.id for i in items))) if items else []
            DuplicateItemError.check(conversation_id, items, {str(row[0]) for row in taken})
            await _insert(db, conversation_id, items, last_position + 1)
            if response is not None:
                await self._put_in(db, response)
            await self._bound(db, {conversation_id} | ({response.id} if response is not None else set()))

        await self._transaction(body)

    async def conversation_items(self, conversation_id: str) -> list[ConversationItem]:
        rows = await self._read(_ALL_ITEMS, (conversation_id,))
        if not rows:
            raise UnknownConversationError.on(conversation_id)
        return [_item(row[0], row[1]) for row in rows if row[0] is not None]

    async def conversation_tail(self, conversation_id: str, *, max_bytes: int,
                                check_ids: Collection[str] = ()) -> ItemTail:
        rows = await self._read(_TAIL, (conversation_id, max_bytes, conversation_id))
        if not rows:
            raise UnknownConversationError.on(conversation_id)
        kept = [row for row in rows if row[1] is not None]
        taken: set[str] = set()
        if check_ids:
            marks = ",".join("?" * len(check_ids))
            found = await self._read(f"SELECT id FROM conversation_items WHERE conversation_id = ? AND id IN ({marks})",
                                     (conversation_id, *check_ids))
            taken = {str(row[0]) for row in found}
        if not kept:
            return ItemTail([], complete=True, last_id="", taken=taken)
        first = await self._read(_FIRST_POSITION, (conversation_id,))
        return ItemTail([_item(row[2], row[3]) for row in kept], complete=first[0][0] == kept[0][4],
                        last_id=str(kept[-1][1]), taken=taken)

    async def list_items(self, conversation_id: str, *, limit: int, order: str = "desc",
                         after: str | None = None) -> ItemPage:
        found = await self._read(_AFTER, (after, conversation_id))
        if not found:
            raise UnknownConversationError.on(conversation_id)
        if after is not None and found[0][1] is None:
            raise UnknownItemError.on(after, conversation_id, param="after")
        start = found[0][1] if after is not None else (0 if order == "asc" else 2**62)
        rows = await self._read(_PAGE[order], (conversation_id, start, limit + 1))
        return ItemPage(items=[_item(row[0], row[1]) for row in rows[:limit]], has_more=len(rows) > limit)

    async def get_item(self, conversation_id: str, item_id: str) -> ConversationItem:
        rows = await self._read(_GET_ITEM, (item_id, conversation_id))
        if not rows:
            raise UnknownConversationError.on(conversation_id)
        if rows[0][1] is None:
            raise UnknownItemError.on(item_id, conversation_id)
        return _item(rows[0][1], rows[0][2])

    async def delete_item(self, conversation_id: str, item_id: str) -> Conversation:
        async def body(db: aiosqlite.Connection) -> Conversation:
            conversation = await _locked(db, conversation_id)
            cursor = await db.execute("DELETE FROM conversation_items WHERE conversation_id = ? AND id = ?",
                                      (conversation_id, item_id))
            if cursor.rowcount == 0:
                raise UnknownItemError.on(item_id, conversation_id)
            await self._bound(db, set())
            return conversation

        return await self._transaction(body)


async def _lock(db: aiosqlite.Connection, conversation_id: str, tick: int | None = None) -> None:
    """Opens the write transaction (BEGIN IMMEDIATE: the file's write lock, so another process on
    the same file cannot append between our check and our insert) and checks the conversation
    exists, in one statement: sqlite3 begins a transaction before a write, never before a read.
    `tick`: the write's access stamp (an append makes the conversation the most recently used)."""
    cursor = await db.execute("UPDATE conversation_objects SET last_access = coalesce(?, last_access) WHERE id = ?",
                              (tick, conversation_id))
    if cursor.rowcount == 0:
        raise UnknownConversationError.on(conversation_id)


async def _locked(db: aiosqlite.Connection, conversation_id: str) -> Conversation:
    """The conversation, locked for the rest of the transaction (see `_lock`)."""
    await _lock(db, conversation_id)
    rows = list(await db.execute_fetchall(_SELECT_CONVERSATION, (conversation_id,)))
    return _conversation(rows[0])


async def _insert(db: aiosqlite.Connection, conversation_id: str, items: list[ConversationItem],
                  first_position: int) -> None:
    if items:
        await db.executemany(_INSERT_ITEM, item_rows(conversation_id, items, first_position))


async def _created_at(db: aiosqlite.Connection, conversation_id: str) -> tuple[int, str]:
    rows = list(await db.execute_fetchall("SELECT created_at, owner FROM conversation_objects WHERE id = ?",
                                          (conversation_id,)))
    return int(rows[0][0]), str(rows[0][1])
