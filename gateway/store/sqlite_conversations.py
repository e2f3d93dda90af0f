"""The Conversations API's part of the SQLite backend: conversation objects and their items.

A mixin of `SQLiteResponseStore` (gateway/store/sqlite.py), which provides the connections: a write
is one `_transaction` on the writer connection, a read one or two statements on the reader. The
tables are created with the rest of the schema (sqlite.py's `_SCHEMA`). Items keep their order in
`position` (the last one's + 1); their JSON is TEXT, as the responses' is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiosqlite

from gateway.store.api import (
    Conversation,
    ConversationConflictError,
    ConversationItem,
    DuplicateItemError,
    ItemPage,
    StoredResponse,
    UnknownConversationError,
    UnknownItemError,
)
from gateway.store.json_columns import from_text, from_text_or_none, to_text, to_text_or_none

T = TypeVar("T")

CONVERSATION_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS conversation_objects (
        id TEXT PRIMARY KEY,
        created_at INTEGER NOT NULL,
        metadata TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS conversation_items (
        conversation_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        id TEXT NOT NULL,
        item TEXT NOT NULL,
        model TEXT,
        PRIMARY KEY (conversation_id, id)
    )""",
    "CREATE UNIQUE INDEX IF NOT EXISTS conversation_items_in_order ON conversation_items (conversation_id, position)",
    # a trigger rather than a foreign key: SQLite enforces those only with a per-connection pragma
    """CREATE TRIGGER IF NOT EXISTS conversations_take_their_items AFTER DELETE ON conversation_objects
    BEGIN DELETE FROM conversation_items WHERE conversation_id = old.id; END""",
)

_SELECT_CONVERSATION = "SELECT id, created_at, metadata FROM conversation_objects WHERE id = ?"
_INSERT_ITEM = "INSERT INTO conversation_items (conversation_id, position, id, item, model) VALUES (?, ?, ?, ?, ?)"
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
    return Conversation(id=row[0], created_at=int(row[1]), metadata=from_text(row[2]))


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

    async def create_conversation(self, conversation: Conversation, items: list[ConversationItem]) -> None:
        DuplicateItemError.check(conversation.id, items, set())

        async def body(db: aiosqlite.Connection) -> None:
            await db.execute("INSERT INTO conversation_objects (id, created_at, metadata) VALUES (?, ?, ?)",
                             (conversation.id, conversation.created_at, to_text(conversation.metadata)))
            await _insert(db, conversation.id, items, 1)

        await self._transaction(body)

    async def get_conversation(self, conversation_id: str) -> Conversation:
        rows = await self._read(_SELECT_CONVERSATION, (conversation_id,))
        if not rows:
            raise UnknownConversationError.on(conversation_id)
        return _conversation(rows[0])

    async def update_conversation(self, conversation_id: str, metadata: dict[str, str]) -> Conversation:
        async def body(db: aiosqlite.Connection) -> Conversation:
            cursor = await db.execute("UPDATE conversation_objects SET metadata = ? WHERE id = ?",
                                      (to_text(metadata), conversation_id))
            if cursor.rowcount == 0:
                raise UnknownConversationError.on(conversation_id)
            return Conversation(id=conversation_id, created_at=await _created_at(db, conversation_id),
                                metadata=dict(metadata))

        return await self._transaction(body)

    async def delete_conversation(self, conversation_id: str) -> None:
        async def body(db: aiosqlite.Connection) -> None:
            cursor = await db.execute("DELETE FROM conversation_objects WHERE id = ?", (conversation_id,))
            if cursor.rowcount == 0:
                raise UnknownConversationError.on(conversation_id)

        await self._transaction(body)

    async def append_items(self, conversation_id: str, items: list[ConversationItem], *,
                           expected_last: str | None = None, response: StoredResponse | None = None) -> None:
        DuplicateItemError.check(conversation_id, items, set())

        async def body(db: aiosqlite.Connection) -> None:
            await _lock(db, conversation_id)
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

        await self._transaction(body)

    async def conversation_items(self, conversation_id: str) -> list[ConversationItem]:
        rows = await self._read(_ALL_ITEMS, (conversation_id,))
        if not rows:
            raise UnknownConversationError.on(conversation_id)
        return [_item(row[0], row[1]) for row in rows if row[0] is not None]

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
            return conversation

        return await self._transaction(body)


async def _lock(db: aiosqlite.Connection, conversation_id: str) -> None:
    """Opens the write transaction (BEGIN IMMEDIATE: the file's write lock, so another process on
    the same file cannot append between our check and our insert) and checks the conversation
    exists, in one statement: sqlite3 begins a transaction before a write, never before a read."""
    cursor = await db.execute("UPDATE conversation_objects SET created_at = created_at WHERE id = ?",
                              (conversation_id,))
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
        await db.executemany(_INSERT_ITEM, [
            (conversation_id, first_position + offset, item.id, to_text(item.item),
             to_text_or_none(item.model))
            for offset, item in enumerate(items)])


async def _created_at(db: aiosqlite.Connection, conversation_id: str) -> int:
    rows = list(await db.execute_fetchall("SELECT created_at FROM conversation_objects WHERE id = ?",
                                          (conversation_id,)))
    return int(rows[0][0])
