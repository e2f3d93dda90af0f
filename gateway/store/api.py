"""The Responses store's contract: what the routes need, whatever database sits behind it.

`ResponseStore` is implemented by `gateway.store.sqlite.SQLiteResponseStore` (the embedded
default, a file in the profile home) and `gateway.store.postgres.PostgresResponseStore` (one
database shared by several replicas, `API_SERVER_DATABASE_URL`); tests/store/test_store_contract.py
runs the same cases against both. The contract speaks only records and ids (no rowids, no SQL,
no connection objects), so a route never learns which backend it talks to.

What every backend guarantees:
- **Durable on return**: when `put` or `delete` returns, the change survives a killed process
  (and, for a backend on a local disk, a power cut); a client may chain on an id at once.
- **Whole records**: a record carries the whole transcript of its conversation, so continuing
  from it never needs its ancestors, and evicting an old response cannot break a newer one. A
  read never returns half a record.
- **LRU bound**: at most `max_responses` records are kept; a `put` evicts the least recently
  accessed beyond it, where a `put` and a touching read (`touch=True`) count as an access.
- **Named conversations**: a `put` with `conversation` set makes the record that conversation's
  head; deleting or evicting the head ends the name (the next turn starts fresh).
- **Faults are 503**: any database fault (unreachable, read-only, full disk, locked, corrupt)
  is raised as `StoreUnavailableError`, whose message says what is wrong and where (never a
  password) and which carries `retry_after`; the error middleware renders it as 503 with
  `Retry-After`. A backend that failed to open tries again on the next operation, so a fixed
  fault heals without a restart.
- **Conversation turns never lost**: a record naming a conversation with `expected_head` set
  (the id of the head the turn continued from, or "" for a fresh start) is stored only if that is
  still the head (or the name has no head any more: deleted or evicted meanwhile, nothing to lose);
  otherwise the put raises `ConversationConflictError` (409) and stores nothing.
  Two turns racing on one conversation (two replicas, or one) thus end with one stored and the
  other told to retry, never with one silently dropped from the chain.
- **Schema versions**: the backend creates and migrates its own tables, with a `schema_version`
  table; a database newer than the backend knows is a `SchemaVersionError` (serve exits 1).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import AgentGatewayError, ConflictError, ServiceUnavailableError


class StoreUnavailableError(ServiceUnavailableError):
    """The store cannot read or write (read-only file, disk full, locked, corrupt): 503."""


class ConversationConflictError(ConflictError):
    """Another turn of the same conversation was stored first: 409, nothing of this one kept."""

    code = "conversation_conflict"

    @classmethod
    def on(cls, name: str) -> ConversationConflictError:
        return cls(f"Another turn of conversation '{name}' was stored while this one ran; nothing of "
                   "this turn was kept. Send it again to continue from the new head.", param="conversation")


class SchemaVersionError(AgentGatewayError):
    """The database was written by a newer gateway (a higher schema version): serve exits 1."""


@dataclass
class StoredResponse:
    id: str
    created_at: int
    #: The response object exactly as returned to the client.
    response: dict[str, Any]
    #: Chat-format messages of the whole conversation so far, this turn's input, tool calls, tool
    #: results and the final assistant message included; never the agent's system prompt nor
    #: `instructions` (those are per request).
    transcript: list[dict[str, Any]] = field(default_factory=list)
    #: This turn's input items, each with an `id`, for `/input_items`.
    input_items: list[dict[str, Any]] = field(default_factory=list)
    #: The named conversation this response continues, if any.
    conversation: str | None = None
    #: With `conversation`: the head this turn continued from ("" = it started fresh); the put
    #: fails with ConversationConflictError if the head moved meanwhile. None: no check.
    expected_head: str | None = None


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
    async def delete(self, response_id: str) -> bool:
        """Remove the record, and end the conversation it heads, if any. False if it is unknown.
        Durable when this returns."""

    @abstractmethod
    async def conversation_head(self, name: str, *, touch: bool = True) -> StoredResponse | None:
        """The latest record of conversation `name` (the one to continue from); None if the name
        is unknown or its head was deleted or evicted (the conversation then starts fresh).
        `touch` as for `get`."""

    @abstractmethod
    async def check(self) -> None:
        """Raises StoreUnavailableError unless the store can be read now (the readiness probe)."""

    @abstractmethod
    async def count(self) -> int:
        """How many records are stored now (at most the bound)."""

    async def __aenter__(self) -> ResponseStore:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
