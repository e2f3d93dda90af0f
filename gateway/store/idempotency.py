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
#: and headers. A reply over MAX_BYTES on its own is not kept (a retry runs again).
MAX_ENTRIES = 1000
MAX_BYTES = 32 * 1024 * 1024


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
    """One process's cache: LRU-bounded by entries and bytes; expiry by the injected clock."""

    def __init__(self, *, ttl: float = 300.0, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._running: dict[str, _Running] = {}
        self.total_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def acquire(self, key: str, fingerprint: str) -> CachedReply | None:
        while True:
            entry = self._live_entry(key)
            if entry is not None:
                _check_same_body(entry.reply.fingerprint, fingerprint)
                self._entries.move_to_end(key)
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
        if reply.size > self.max_bytes or self.ttl <= 0:
            return  # waiters still get it through the future; later retries run again
        if key in self._entries:
            self._remove(key)
        now = self._clock()
        for stale in [k for k, e in self._entries.items() if e.expires_at <= now]:
            self._remove(stale)
        self._entries[key] = _Entry(reply, now + self.ttl)
        self.total_bytes += reply.size
        while len(self._entries) > self.max_entries or self.total_bytes > self.max_bytes:
            self._remove(next(iter(self._entries)))  # least recently used first

    def _remove(self, key: str) -> None:
        entry = self._entries.pop(key)
        self.total_bytes -= entry.reply.size


def _check_same_body(kept: str, presented: str) -> None:
    if kept != presented:
        raise IdempotencyKeyReusedError(
            "This Idempotency-Key was already used with a different request body. Send a new key for a "
            "new request; reuse a key only to retry the very same request.", param=None)
