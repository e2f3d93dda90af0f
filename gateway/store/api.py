"""The Responses store's contract: what the routes need, whatever database sits behind it.

`ResponseStore` is implemented by `gateway.store.sqlite.store.SQLiteResponseStore` (the embedded
default, a file in the profile home) and `gateway.store.postgres.store.PostgresResponseStore` (one
database shared by several replicas, `API_SERVER_DATABASE_URL`); tests/store/test_store_contract.py
runs the same cases against both. The contract speaks only records and ids (no rowids, no SQL,
no connection objects), so a route never learns which backend it talks to.

What every backend guarantees:
- **Durable on return**: when `put` or `delete` returns, the change survives a killed process
  (and, for a backend on a local disk, a power cut); a client may chain on an id at once.
- **Per-turn records**: a record carries its own turn only (its input, what the agent added, its
  response) and the id of the record it continued (`parent_id`); `chain` rebuilds a conversation
  by walking parents newest first, within a byte budget, so a turn reads only what it can send and
  a chain of n turns costs O(n) to keep. A parent deleted or evicted ends the walk there: the
  chain continues with what is left (a newer record never breaks). A record written before schema
  version 3 has no parent and carries the whole transcript so far, so it is a chain's start. A
  read never returns half a record.
- **LRU bound, per owner**: each owner keeps at most `max_responses` records; a `put` evicts that
  owner's least recently accessed beyond it (never another owner's), where a `put` and a touching
  read (`touch=True`; `chain` touches every record it reads) count as an access.
- **Byte bound** (`max_bytes`, None: none): each row keeps its size (`bytes`, its JSON columns'
  length; a background run's events count too, schema version 6), the store keeps their sum, and
  a write that takes its profile's objects over the bound evicts until they fit, the largest
  owner's least recently used first (store/eviction.py), responses and conversation objects alike
  (a conversation's age is its last write). `size()` is the sum now (all profiles').
- **Profiles** (`profile`, None: any): stores of several profiles on one database bound only their
  own owners' rows and claim only their own profile's queued runs; a put never changes the owner
  of a stored record (a put of another owner's id changes nothing).
- **Named conversations**: a `put` with `conversation` set makes the record that conversation's
  head; deleting or evicting the head ends the name (the next turn starts fresh).
- **Faults are 503**: any database fault (unreachable, read-only, full disk, locked, corrupt)
  is raised as `StoreUnavailableError`, whose client message says only that the store is
  unavailable, whose `detail` says what is wrong and where for the log (never a password), and
  which carries `retry_after`; the error middleware renders it as 503 with
  `Retry-After`. A backend that failed to open tries again on the next operation, so a fixed
  fault heals without a restart.
- **Conversation turns never lost**: a record naming a conversation with `expected_head` set
  (the id of the head the turn continued from, or "" for a fresh start) is stored only if that is
  still the head (or the name has no head any more: deleted or evicted meanwhile, nothing to lose);
  otherwise the put raises `ConversationConflictError` (409) and stores nothing.
  Two turns racing on one conversation (two replicas, or one) thus end with one stored and the
  other told to retry, never with one silently dropped from the chain.
- **Conversation objects** (the Conversations API, `conv_...` ids): a conversation is its
  metadata plus an ordered list of items, each kept as the client sees it (`item`) with an opaque
  `model` view beside it (how the agent reads it, see wire/conversation_items.py; the store never
  looks inside). Items are appended in order, ids unique within their conversation; an append
  with `expected_last` set (the id of the last item the turn read, "" for an empty conversation)
  is refused with `ConversationConflictError` if another append came first, like a named
  conversation's turn. An append may store a response in the same transaction, so a turn's
  response and its items are kept together or not at all. Conversations are not bounded in
  number (clients create and delete them, as OpenAI's), only by the byte bound.
  `conversation_tail` reads the newest items within a byte budget, what a turn can send.
  An unknown conversation id is `UnknownConversationError` (404), an unknown item id
  `UnknownItemError` (404).
- **Owners** (schema version 4): a record and a conversation object keep the `owner` they were
  written with and read back with it; store/owned.py makes each key's view of the store from it.
- **Schema versions**: the backend creates and migrates its own tables, with a `schema_version`
  table, in ordered steps (version n -> n+1, each in place, a database of any older version keeps
  its records); a database newer than the backend knows is a `SchemaVersionError` (serve exits 1).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import (
    AgentGatewayError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    ServiceUnavailableError,
    echo,
)
from gateway.store.files import FileStore
from gateway.store.runs import RunStore


class StoreUnavailableError(ServiceUnavailableError):
    """The store cannot read or write (read-only file, disk full, locked, corrupt): 503.

    The client reads only that the store is unavailable: `detail` (what and where: the SQLite path,
    the PostgreSQL URL with its secrets masked, the driver's words) is for the log. A client that
    could read it would learn the database's user, host and file path; /health/ready needs no key."""

    CLIENT_MESSAGE = "The response store is unavailable; retry shortly."

    def __init__(self, detail: str, *, retry_after: float | None = None) -> None:
        super().__init__(self.CLIENT_MESSAGE, retry_after=retry_after, detail=detail)

    def __str__(self) -> str:
        return self.detail or self.message


class ConversationConflictError(ConflictError):
    """Another turn of the same conversation was stored first: 409, nothing of this one kept."""

    code = "conversation_conflict"

    @classmethod
    def on(cls, name: str) -> ConversationConflictError:
        return cls(f"Another turn of conversation '{echo(name)}' was stored while this one ran; nothing of "
                   "this turn was kept. Send it again to continue from the new head.", param="conversation")


class UnknownConversationError(NotFoundError):
    """No conversation with this id (never created, or deleted): 404."""

    @classmethod
    def on(cls, conversation_id: str, param: str = "conversation_id") -> UnknownConversationError:
        return cls(f"No conversation found with id '{echo(conversation_id)}'.", param=param)


class UnknownItemError(NotFoundError):
    """No item with this id in the conversation: 404."""

    @classmethod
    def on(cls, item_id: str, conversation_id: str, param: str = "item_id") -> UnknownItemError:
        return cls(f"No item with id '{echo(item_id)}' in conversation '{echo(conversation_id)}'.", param=param)


class DuplicateItemError(InvalidRequestError):
    """An item id already in the conversation (or twice in one append): 400, nothing appended."""

    @classmethod
    def on(cls, item_id: str, conversation_id: str) -> DuplicateItemError:
        return cls(f"An item with id '{echo(item_id)}' is already in conversation '{echo(conversation_id)}'; "
                   "item ids are unique within a conversation.", param="items")

    @classmethod
    def check(cls, conversation_id: str, items: list[ConversationItem], taken: set[str]) -> None:
        """Raised for the first of `items` whose id is in `taken` or earlier in `items`: a backend
        checks before it writes, so a repeated id is never a unique violation (that would be a 503)."""
        seen = set(taken)
        for item in items:
            if item.id in seen:
                raise cls.on(item.id, conversation_id)
            seen.add(item.id)


class SchemaVersionError(AgentGatewayError):
    """The database was written by a newer gateway (a higher schema version): serve exits 1."""


@dataclass
class StoredResponse:
    id: str
    created_at: int
    #: The response object exactly as returned to the client.
    response: dict[str, Any]
    #: Chat-format messages of this turn: its input, tool calls, tool results and the final
    #: assistant message; never the agent's system prompt nor `instructions` (those are per
    #: request). A record of schema version 2 (no parent) holds the whole conversation so far.
    transcript: list[dict[str, Any]] = field(default_factory=list)
    #: This turn's input items, each with an `id`, for `/input_items`.
    input_items: list[dict[str, Any]] = field(default_factory=list)
    #: The named conversation this response continues, if any.
    conversation: str | None = None
    #: The record this turn continued (`previous_response_id`, a named conversation's head).
    parent_id: str | None = None
    #: With `conversation`: the head this turn continued from ("" = it started fresh); the put
    #: fails with ConversationConflictError if the head moved meanwhile. None: no check.
    expected_head: str | None = None
    #: Who stored it ("profile/key name", store/owned.py); "" for a record not stored through an
    #: owner's view (the contract tests). Schema version 4.
    owner: str = ""


@dataclass
class Chain:
    """A chain of records as `ResponseStore.chain` reads it within its byte budget."""

    #: Newest first: the record asked for, its parent, and so on.
    records: list[StoredResponse]
    #: True: the walk reached the chain's start (or a parent no longer stored); False: older
    #: records were left unread because the budget was spent.
    complete: bool

    def transcript(self) -> list[dict[str, Any]]:
        """The messages read, oldest first."""
        return [message for record in reversed(self.records) for message in record.transcript]


@dataclass
class Conversation:
    """A Conversations API object (`conv_...`), without its items."""

    id: str
    created_at: int
    metadata: dict[str, str] = field(default_factory=dict)
    #: As StoredResponse.owner; never part of the object a client sees.
    owner: str = ""

    def object(self) -> dict[str, Any]:
        """As OpenAI returns it."""
        return {"id": self.id, "object": "conversation", "created_at": self.created_at,
                "metadata": dict(self.metadata)}


@dataclass
class ConversationItem:
    """One item of a conversation: `item` as the client sees it (its `id` is `item["id"]`), and
    `model`, how the agent reads it (opaque to the store; None: the item speaks for itself)."""

    item: dict[str, Any]
    model: Any = None

    @property
    def id(self) -> str:
        return str(self.item["id"])


@dataclass
class ItemTail:
    """A conversation's newest items, as `ResponseStore.conversation_tail` reads them."""

    #: Oldest first.
    items: list[ConversationItem]
    #: True: the conversation's first item is among them (nothing older left unread).
    complete: bool
    #: The id of the conversation's last item ("" for an empty conversation): `expected_last`.
    last_id: str
    #: Those of the ids asked about (`check_ids`) that are in the conversation, read or not.
    taken: set[str] = field(default_factory=set)


@dataclass
class ItemPage:
    """One page of a conversation's items, in the order asked for."""

    items: list[ConversationItem]
    has_more: bool


class ResponseStore(ABC):
    """Persistent, LRU-bounded store of responses plus the heads of named conversations.

    Safe for concurrent use from one event loop: any number of requests may call any operation
    at the same time; concurrent puts end as if made one by one, in the order they were called.
    Usable as `async with store:` (open, then close)."""

    @abstractmethod
    async def open(self) -> None:
        """Connect and create (or migrate) the schema if needed. Raises StoreUnavailableError;
        the store stays usable after that, and the next operation tries to open again."""

    @abstractmethod
    async def close(self) -> None:
        """Finish the puts already made (they are written or fail, never dropped), then release
        the connections. Safe to call twice; any operation after it is a StoreUnavailableError."""

    @abstractmethod
    async def put(self, record: StoredResponse) -> None:
        """Insert `record`, or replace the record with its id; make it the head of its
        conversation if it names one; evict the least recently accessed records beyond the bound.
        All of it or none of it, and durable when this returns."""

    @abstractmethod
    async def get(self, response_id: str, *, touch: bool = True) -> StoredResponse | None:
        """The record with this id, or None if it was never stored, was deleted or was evicted.
        `touch` counts the read as an access for the LRU bound (`touch=False`: a look that does
        not keep the record alive). A touch orders eviction only, so a backend may make it
        durable lazily (with the next write) rather than pay a durable write per read."""

    @abstractmethod
    async def chain(self, response_id: str, *, max_bytes: int, touch: bool = True) -> Chain | None:
        """The record `response_id` and its ancestors, newest first, read until their turns'
        messages (`transcript`, as stored: its JSON length) add up to `max_bytes` or more; the
        record that crosses it is included, so the records read always cover the budget. None if
        the record itself is not stored. `touch` counts the read as an access of every record read."""

    @abstractmethod
    async def delete(self, response_id: str) -> bool:
        """Remove the record, and end the conversation it heads, if any. False if it is unknown.
        Durable when this returns."""

    @abstractmethod
    async def conversation_head(self, name: str, *, touch: bool = True) -> StoredResponse | None:
        """The latest record of conversation `name` (the one to continue from); None if the name
        is unknown or its head was deleted or evicted (the conversation then starts fresh).
        `touch` as for `get`."""

    # ---- conversation objects (the Conversations API) ----------------------------------------

    @abstractmethod
    async def create_conversation(self, conversation: Conversation, items: list[ConversationItem]) -> None:
        """Create it with its first items (in order). Durable when this returns."""

    @abstractmethod
    async def get_conversation(self, conversation_id: str) -> Conversation:
        """Raises UnknownConversationError."""

    @abstractmethod
    async def update_conversation(self, conversation_id: str, metadata: dict[str, str]) -> Conversation:
        """Replace its metadata; the conversation as it is now. Raises UnknownConversationError."""

    @abstractmethod
    async def delete_conversation(self, conversation_id: str) -> None:
        """Remove it and its items (responses made in it stay). Raises UnknownConversationError."""

    @abstractmethod
    async def append_items(self, conversation_id: str, items: list[ConversationItem], *,
                           expected_last: str | None = None, response: StoredResponse | None = None) -> None:
        """Append `items` after the last one, and `put` `response` (if given) in the same
        transaction. `expected_last`: see the module docstring (ConversationConflictError).
        Raises UnknownConversationError, DuplicateItemError; all or nothing, durable on return."""

    @abstractmethod
    async def conversation_items(self, conversation_id: str) -> list[ConversationItem]:
        """All its items, oldest first (what a turn continues from). Raises UnknownConversationError."""

    @abstractmethod
    async def conversation_tail(self, conversation_id: str, *, max_bytes: int,
                                check_ids: Collection[str] = ()) -> ItemTail:
        """Its newest items, read newest first until their sizes add up to `max_bytes` or more
        (the one that crosses it included), returned oldest first; and which of `check_ids` it
        holds anywhere (a turn's input ids, refused before the model runs). Raises
        UnknownConversationError."""

    @abstractmethod
    async def list_items(self, conversation_id: str, *, limit: int, order: str = "desc",
                         after: str | None = None) -> ItemPage:
        """At most `limit` items in `order` ("asc": oldest first, "desc": newest first), starting
        after the item `after` (in that order). Raises UnknownConversationError, and
        UnknownItemError (param "after") for an `after` not in the conversation."""

    @abstractmethod
    async def get_item(self, conversation_id: str, item_id: str) -> ConversationItem:
        """Raises UnknownConversationError, UnknownItemError."""

    @abstractmethod
    async def delete_item(self, conversation_id: str, item_id: str) -> Conversation:
        """Remove one item; the conversation. Raises UnknownConversationError, UnknownItemError."""

    # ---- background runs ---------------------------------------------------------------------

    @property
    @abstractmethod
    def runs(self) -> RunStore:
        """The background runs kept with this store (store/runs.py), by response id: a route
        checks ownership through the response's record before it touches the run."""

    # ---- uploaded files ----------------------------------------------------------------------

    @property
    @abstractmethod
    def files(self) -> FileStore:
        """The uploaded files kept with this store (store/files.py), every operation by owner."""

    # ---- health ------------------------------------------------------------------------------

    @abstractmethod
    async def check(self) -> None:
        """Raises StoreUnavailableError unless the store can be read now (the readiness probe)."""

    @abstractmethod
    async def count(self) -> int:
        """How many records are stored now (at most the bound)."""

    @abstractmethod
    async def size(self) -> int:
        """The stored objects' bytes now (responses and conversation objects; at most the byte
        bound after any write)."""

    async def __aenter__(self) -> ResponseStore:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
