"""Where replies kept for an Idempotency-Key live: a two-call interface and the in-memory cache.

`acquire` either hands back the kept reply (after waiting for a request that holds the key), or
gives the caller the key; `release` gives it back with the reply to keep (or None). A shared
backend (for several gateway replicas) implements the same two calls.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from gateway.errors import UnprocessableError

#: The bounds of the kept replies, in memory and in PostgreSQL alike: entries, and bytes of bodies
#: and headers, for all owners together and for each owner (its share, so one key's replies never
#: evict another key's). A reply over its owner's byte share on its own is not kept (a retry runs
#: again). Past the whole bound, the owner with the most kept goes first, oldest first.
MAX_ENTRIES = 1000
MAX_BYTES = 32 * 1024 * 1024
MAX_OWNER_ENTRIES = MAX_ENTRIES // 4
MAX_OWNER_BYTES = MAX_BYTES // 2


def owner_of_key(key: str) -> str:
    """The owner part of a cache key (http/idempotency.py `cache_key`: the owner's scope, then a
    newline); "" for a key without one (one shared share)."""
    scope, newline, _ = key.partition("\n")
    return scope if newline else ""


class IdempotencyKeyReusedError(UnprocessableError):
    code = "idempotency_key_reused"


@dataclass(frozen=True)
class CachedReply:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...]
    fingerprint: str  # SHA-256 of the request body that produced it

    @property
    def size(self) -> int:
        return len(self.body) + sum(len(k) + len(v) for k, v in self.headers)


class IdempotencyCache(Protocol):
    async def acquire(self, key: str, fingerprint: str) -> CachedReply | None:
        """The reply kept for `key` (waiting while another request holds the key), or None: the
        caller now holds the key and must call `release`. Raises IdempotencyKeyReusedError when
        the key belongs to a different body."""

    async def release(self, key: str, reply: CachedReply | None) -> None:
        """Give up the key; `reply` is kept and handed to waiters, None lets waiters run themselves."""


@dataclass
class _Running:
    fingerprint: str
    done: asyncio.Future[CachedReply | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass
class _Entry:
    reply: CachedReply
    expires_at: float


class InMemoryIdempotencyCache:
    """One process's cache: bounded by entries and bytes, each owner's and all together (see
    MAX_ENTRIES); least recently used first within an owner; expiry by the injected clock."""

    def __init__(self, *, ttl: float = 300.0, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES,
                 max_owner_entries: int = MAX_OWNER_ENTRIES, max_owner_bytes: int = MAX_OWNER_BYTES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_owner_entries = min(max_owner_entries, max_entries)
        self.max_owner_bytes = min(max_owner_bytes, max_bytes)
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        #: per owner, its keys least recently used first, and their bytes
        self._owners: dict[str, OrderedDict[str, None]] = {}
        self._owner_bytes: dict[str, int] = {}
        self._running: dict[str, _Running] = {}
        self.total_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def acquire(self, key: str, fingerprint: str) -> CachedReply | None:
        while True:
            entry = self._live_entry(key)
            if entry is not None:
                _check_same_body(entry.reply.fingerprint, fingerprint)
                self._owners[owner_of_key(key)].move_to_end(key)
                return entry.reply
            running = self._running.get(key)
            if running is None:
                self._running[key] = _Running(fingerprint)
                return None
            _check_same_body(running.fingerprint, fingerprint)
            # shield: a waiter that gives up must not cancel the answer other waiters share
            reply = await asyncio.shield(running.done)
            if reply is not None:
                return reply
            # the owner's reply was not kept: take the key ourselves (or wait on whoever did)

    async def release(self, key: str, reply: CachedReply | None) -> None:
        running = self._running.pop(key, None)
        if reply is not None:
            self._store(key, reply)
        if running is not None and not running.done.done():
            running.done.set_result(reply)

    def _live_entry(self, key: str) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None and entry.expires_at <= self._clock():
            self._remove(key)
            return None
        return entry

    def _store(self, key: str, reply: CachedReply) -> None:
        if reply.size > self.max_owner_bytes or self.ttl <= 0:
            return  # waiters still get it through the future; later retries run again
        if key in self._entries:
            self._remove(key)
        now = self._clock()
        for stale in [k for k, e in self._entries.items() if e.expires_at <= now]:
            self._remove(stale)
        owner = owner_of_key(key)
        self._entries[key] = _Entry(reply, now + self.ttl)
        self._owners.setdefault(owner, OrderedDict())[key] = None
        self._owner_bytes[owner] = self._owner_bytes.get(owner, 0) + reply.size
        self.total_bytes += reply.size
        mine = self._owners[owner]
        while len(mine) > self.max_owner_entries or self._owner_bytes[owner] > self.max_owner_bytes:
            self._remove(next(iter(mine)))  # the owner's least recently used first
        while len(self._entries) > self.max_entries or self.total_bytes > self.max_bytes:
            self._remove(next(iter(self._owners[self._largest_owner(by_bytes=self.total_bytes > self.max_bytes)])))

    def _largest_owner(self, *, by_bytes: bool) -> str:
        if by_bytes:
            return max(self._owner_bytes, key=self._owner_bytes.__getitem__)
        return max(self._owners, key=lambda name: len(self._owners[name]))

    def _remove(self, key: str) -> None:
        entry = self._entries.pop(key)
        owner = owner_of_key(key)
        mine = self._owners[owner]
        del mine[key]
        self._owner_bytes[owner] -= entry.reply.size
        if not mine:
            del self._owners[owner], self._owner_bytes[owner]
        self.total_bytes -= entry.reply.size


def _check_same_body(kept: str, presented: str) -> None:
    if kept != presented:
        raise IdempotencyKeyReusedError(
            "This Idempotency-Key was already used with a different request body. Send a new key for a "
            "new request; reuse a key only to retry the very same request.", param=None)
