"""One owner's view of the store: what the routes talk to, so every object is kept with its owner
and another owner's object reads exactly as an unknown one (the same 404, no existence oracle).

`OwnedStore(inner, owner)` is made per request (http/auth.py) around the app's one store. It
writes `owner` into every record and conversation object, keeps named conversations under the
owner-scoped name (store/owners.py) and checks the owner of what it reads: a record of another
owner is None, a conversation of another owner is UnknownConversationError with the message an
unknown id gets. A chain stops at a record of another owner (as at a parent no longer stored).
Operations on a conversation's items read the conversation first (one primary-key read), since
item tables carry no owner: an owner never changes, so that check cannot go stale.

`owned_files` is the owner's view of the uploaded files (store/files.py `OwnedFiles`).

`room(n)`: called with the bytes a write adds, before it; raises InsufficientQuotaError when the
key's stored-bytes quota would be passed (or returns what to await for that answer: behind
replicas it asks the database). Reads and deletes never call it, so a key at its quota can still
make room.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Collection

from gateway.store.api import (
    Chain,
    Conversation,
    ConversationConflictError,
    ConversationItem,
    ItemPage,
    ItemTail,
    ResponseStore,
    StoredResponse,
    UnknownConversationError,
)
from gateway.store.files import FileStore, OwnedFiles
from gateway.store.json_columns import to_text, to_text_or_none
from gateway.store.owners import scoped_name, unscoped_name
from gateway.store.runs import RunStore

#: room(size, object_id): the bytes a write adds, and the id of the object it replaces if an upsert
Room = Callable[[int, str | None], Awaitable[None] | None]


def _record_bytes(record: StoredResponse) -> int:
    return sum(len(to_text(part)) for part in (record.response, record.transcript, record.input_items))


def _items_bytes(items: list[ConversationItem]) -> int:
    return sum(len(to_text(i.item)) + len(to_text_or_none(i.model) or "") for i in items)


class OwnedStore(ResponseStore):
    def __init__(self, inner: ResponseStore, owner: str, room: Room | None = None) -> None:
        self.inner = inner
        self.owner = owner
        self._room = room

    # ---- what is written carries the owner; what is read must be the owner's -------------------

    def _written(self, record: StoredResponse) -> StoredResponse:
        conversation = None if record.conversation is None else scoped_name(self.owner, record.conversation)
        return dataclasses.replace(record, owner=self.owner, conversation=conversation)

    def _read(self, record: StoredResponse | None) -> StoredResponse | None:
        if record is None or record.owner != self.owner:
            return None
        if record.conversation is not None:
            record.conversation = unscoped_name(record.conversation)
        return record

    async def _own(self, conversation_id: str) -> Conversation:
        conversation = await self.inner.get_conversation(conversation_id)
        if conversation.owner != self.owner:
            raise UnknownConversationError.on(conversation_id)
        return conversation

    async def _check_room(self, size: Callable[[], int], object_id: str | None = None) -> None:
        checked = self._room(size(), object_id) if self._room is not None else None
        if checked is not None:
            await checked

    # ---- the contract ----------------------------------------------------------------------

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        pass  # the app's store outlives every view of it

    async def put(self, record: StoredResponse) -> None:
        if self._room is not None:
            await self._check_room(lambda: _record_bytes(record), record.id)  # a record put again replaces itself
        try:
            await self.inner.put(self._written(record))
        except ConversationConflictError:  # named by the client's name, not the owner-scoped one
            raise ConversationConflictError.on(str(record.conversation)) from None

    async def get(self, response_id: str, *, touch: bool = True) -> StoredResponse | None:
        return self._read(await self.inner.get(response_id, touch=touch))

    async def chain(self, response_id: str, *, max_bytes: int, touch: bool = True) -> Chain | None:
        chain = await self.inner.chain(response_id, max_bytes=max_bytes, touch=touch)
        if chain is None or not chain.records or chain.records[0].owner != self.owner:
            return None
        kept: list[StoredResponse] = []
        for record in chain.records:
            if self._read(record) is None:
                return Chain(kept, complete=True)  # a parent of another owner is not ours to read
            kept.append(record)
        return Chain(kept, complete=chain.complete)

    async def delete(self, response_id: str) -> bool:
        if await self.get(response_id, touch=False) is None:
            return False
        return await self.inner.delete(response_id)

    async def conversation_head(self, name: str, *, touch: bool = True) -> StoredResponse | None:
        return self._read(await self.inner.conversation_head(scoped_name(self.owner, name), touch=touch))

    async def create_conversation(self, conversation: Conversation, items: list[ConversationItem]) -> None:
        if self._room is not None:
            await self._check_room(lambda: len(to_text(conversation.metadata)) + _items_bytes(items))
        await self.inner.create_conversation(dataclasses.replace(conversation, owner=self.owner), items)

    async def get_conversation(self, conversation_id: str) -> Conversation:
        return await self._own(conversation_id)

    async def update_conversation(self, conversation_id: str, metadata: dict[str, str]) -> Conversation:
        await self._own(conversation_id)
        return await self.inner.update_conversation(conversation_id, metadata)

    async def delete_conversation(self, conversation_id: str) -> None:
        await self._own(conversation_id)
        await self.inner.delete_conversation(conversation_id)

    async def append_items(self, conversation_id: str, items: list[ConversationItem], *,
                           expected_last: str | None = None, response: StoredResponse | None = None) -> None:
        await self._own(conversation_id)
        if self._room is not None:
            await self._check_room(lambda: _items_bytes(items) + (_record_bytes(response) if response is not None
                                                                  else 0))
        await self.inner.append_items(conversation_id, items, expected_last=expected_last,
                                      response=None if response is None else self._written(response))

    async def conversation_items(self, conversation_id: str) -> list[ConversationItem]:
        await self._own(conversation_id)
        return await self.inner.conversation_items(conversation_id)

    async def conversation_tail(self, conversation_id: str, *, max_bytes: int,
                                check_ids: Collection[str] = ()) -> ItemTail:
        await self._own(conversation_id)
        return await self.inner.conversation_tail(conversation_id, max_bytes=max_bytes, check_ids=check_ids)

    async def list_items(self, conversation_id: str, *, limit: int, order: str = "desc",
                         after: str | None = None) -> ItemPage:
        await self._own(conversation_id)
        return await self.inner.list_items(conversation_id, limit=limit, order=order, after=after)

    async def get_item(self, conversation_id: str, item_id: str) -> ConversationItem:
        await self._own(conversation_id)
        return await self.inner.get_item(conversation_id, item_id)

    async def delete_item(self, conversation_id: str, item_id: str) -> Conversation:
        await self._own(conversation_id)
        return await self.inner.delete_item(conversation_id, item_id)

    @property
    def runs(self) -> RunStore:
        # the inner store's: runs are addressed by id once the route read the response through this view
        return self.inner.runs

    @property
    def files(self) -> FileStore:
        return self.inner.files  # the whole store's: `owned_files` is the owner's view

    @property
    def owned_files(self) -> OwnedFiles:
        """The owner's files, an upload's quota checked by `room` as any other write."""
        return OwnedFiles(self.inner.files, self.owner, self._room)

    async def check(self) -> None:
        await self.inner.check()

    async def count(self) -> int:
        return await self.inner.count()

    async def size(self) -> int:
        return await self.inner.size()
