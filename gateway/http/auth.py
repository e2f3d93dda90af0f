"""The front door's part of the keys: who a request is (its key), its limits, and its view of the store.

`authenticate` replaces the single-key check: one hash and one in-memory lookup (keys/ring.py).
API_SERVER_KEY is the key named `default`; with no key at all (no API_SERVER_KEY, no live key in
the store) every request is `default`'s and the loopback-only Host rules apply (checks.py).

Limits, each off unless the key has it (`agent-gateway keys create ... --rpm/--max-concurrent/
--max-stored-mb/--tpm/--token-budget`):
- requests per minute: a sliding minute, in memory with one process (SQLite: admission costs no
  round trip); behind replicas (PostgreSQL) in the database, one round trip (http/key_limits.py).
  Every response of such a key carries OpenAI's x-ratelimit-*-requests headers; past it, 429 with
  Retry-After.
- concurrent runs (chat completions and responses being generated; a background response for its
  whole run, not only its create request): 429 with Retry-After.
- tokens per minute and a token budget: http/key_limits.py.
- stored bytes: a store that would pass it is a 429 `insufficient_quota` (store/owned.py); reads
  and deletes still work.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway.errors import AuthenticationError, InsufficientQuotaError, RateLimitError, ServiceUnavailableError
from gateway.http import appkeys
from gateway.keys.limits import CURRENT_TICKET, CURRENT_TOKENS
from gateway.keys.ring import CURRENT_CALLER, CURRENT_RATE, REFRESH_SECONDS, Caller, KeyRing
from gateway.store.keys import key_hash
from gateway.store.limits import LimitStore
from gateway.store.owned import OwnedStore

RUN_PATHS = frozenset({"/v1/chat/completions", "/v1/responses"})


def authenticate(ring: KeyRing, presented: str | None, open_path: bool) -> KeyRing:
    """Sets the request's caller among `ring`'s keys, or raises 401/429. `open_path`: a route
    that needs no key."""
    CURRENT_RATE.set(None)
    if CURRENT_TOKENS.get() is not None or CURRENT_TICKET.get() is not None:  # a keep-alive's previous request's
        CURRENT_TOKENS.set(None)
        CURRENT_TICKET.set(None)
    if open_path:
        CURRENT_CALLER.set(None)
        return ring
    if ring.keyless:
        caller = ring.default
    else:
        found = None if presented is None else ring.find(presented)
        if found is None:
            if ring.unread:  # keys fail closed: the key may be one of those not read yet
                raise ServiceUnavailableError("The API keys cannot be read yet (the store is unavailable); "
                                              "retry shortly.", retry_after=REFRESH_SECONDS)
            if presented is None:
                raise AuthenticationError(
                    "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.", code=None)
            raise AuthenticationError("Incorrect API key provided.")
        caller = found
    CURRENT_CALLER.set(caller)
    usage = ring.usage_of(caller.name)
    usage.last_used_at = int(time.time())
    if caller.rpm is not None and ring.limits.shared is None:  # replicas: counted in the database (key_limits.py)
        remaining, reset, admitted = ring.rate(caller, time.monotonic())
        CURRENT_RATE.set((caller.rpm, remaining, reset))
        if not admitted:
            raise RateLimitError(f"Rate limit reached for key '{caller.name}': {caller.rpm} requests per minute. "
                                 f"Try again in {math.ceil(reset)} s.", retry_after=max(1.0, reset))
    usage.requests += 1  # admitted requests (the usage by day's `requests`)
    return ring


class KeyRunSlot:
    """One run of a key with a concurrent-runs limit or token limits: held by the request, or
    handed over to the background run it starts (which holds it for its whole life). `release`
    may return what frees it in the database (replicas), for a request to wait on."""

    def __init__(self, release: Callable[[], Awaitable[None] | None] | None) -> None:
        self._release = release

    def release(self) -> Awaitable[None] | None:
        if self._release is not None:
            release, self._release = self._release, None
            return release()
        return None

    def hand_over(self) -> KeyRunSlot:
        """A slot holding this one's place, whose release is now the taker's (this one's is a no-op)."""
        taken, self._release = KeyRunSlot(self._release), None
        return taken


KEY_RUN_SLOT = web.RequestKey("key_run_slot", KeyRunSlot)


def enter_run(request: web.Request, caller: Caller) -> KeyRunSlot:
    """A run's slot for a key with a concurrent-runs limit (`caller.max_concurrent`), or a 429;
    its `release` gives it back."""
    ring = request.app[appkeys.KEYRING]
    if not ring.enter_run(caller):
        raise RateLimitError(f"Key '{caller.name}' already has {caller.max_concurrent} runs in progress, its "
                             "limit; retry when one ends.", retry_after=1)
    slot = request[KEY_RUN_SLOT] = KeyRunSlot(lambda: ring.leave_run(caller))
    return slot


def hand_over_key_slot(request: web.Request) -> KeyRunSlot | None:
    """The request's key run slot, now the caller's to release (a background run's, for its life);
    the request's end then gives nothing back."""
    slot = request.get(KEY_RUN_SLOT)
    return slot.hand_over() if slot is not None else None


def add_rate_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Part of the response-prepare hook: every response of a key with an rpm or token limits,
    errors and streams alike."""
    rate = CURRENT_RATE.get()
    tokens = CURRENT_TOKENS.get()
    if rate is None and tokens is None:
        return
    headers = response.headers  # a property: read once
    if rate is not None:
        limit, remaining, reset = rate
        headers["x-ratelimit-limit-requests"] = str(limit)
        headers["x-ratelimit-remaining-requests"] = str(remaining) if remaining > 0 else "0"
        headers["x-ratelimit-reset-requests"] = duration(reset)
    if tokens is not None:
        limit, remaining, token_reset = tokens
        headers["x-ratelimit-limit-tokens"] = str(limit)
        headers["x-ratelimit-remaining-tokens"] = str(remaining) if remaining > 0 else "0"
        if token_reset is not None:
            headers["x-ratelimit-reset-tokens"] = duration(token_reset)


def duration(seconds: float) -> str:
    """As OpenAI writes it (Go's duration format): `17ms`, `8.64s`, `1m0s`. In whole milliseconds
    or centiseconds, formatted as integers (a float's rounding and formatting cost more)."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms" if seconds > 0 else "0ms"
    minutes, centis = divmod(round(seconds * 100), 6000)
    whole, part = divmod(centis, 100)
    text = f"{whole}s" if not part else f"{whole}.{part // 10}s" if not part % 10 else f"{whole}.{part:02d}s"
    return f"{minutes}m{text}" if minutes else text


def owner_key(request: web.Request, presented: str | None) -> str:
    """Who an Idempotency-Key belongs to: the caller's owner (profile and key name) and a hash of
    the token presented (never the token): on a keyless gateway, where everyone is `default`,
    two clients sending different tokens still keep their replies apart."""
    caller = CURRENT_CALLER.get()
    owner = caller.owner if caller is not None else request.app[appkeys.KEYRING].default.owner
    return f"owner:{owner}:" + ("anonymous" if presented is None else key_hash(presented))


def quota_before_run(request: web.Request, size: int) -> None:
    """A run that will store at least `size` bytes (its request's input) is refused before it
    runs, not after (its model calls and searches paid for, then its record refused), when its
    key's stored bytes would pass the key's quota (429 `insufficient_quota`)."""
    caller = CURRENT_CALLER.get()
    if caller is None or caller.max_stored_bytes is None:
        return
    used = request.app[appkeys.KEYRING].stored_bytes.get(caller.name, 0)
    if used + size > caller.max_stored_bytes:
        raise _over_quota(caller, used)


def _over_quota(caller: Caller, used: int) -> InsufficientQuotaError:
    return InsufficientQuotaError(
        f"Key '{caller.name}' stores {used} bytes; storing this would pass its quota of {caller.max_stored_bytes} "
        "bytes. Delete stored responses, conversations or files to make room, or send \"store\": false.", param=None)


def store_of(request: web.Request) -> OwnedStore:
    """The request's view of the store: its caller's objects only."""
    return store_for(request.app, CURRENT_CALLER.get())


#: records per key whose last stored size is remembered for upserts (a bound on memory)
COUNTED_PUTS = 1024


def store_for(app: web.Application, caller: Caller | None) -> OwnedStore:
    """`caller`'s view of the store (None: the default key's), its stored-bytes quota checked."""
    ring = app[appkeys.KEYRING]
    caller = caller or ring.default
    room = None
    if caller.max_stored_bytes is not None:
        room = _room(ring, caller, caller.max_stored_bytes)
    return OwnedStore(app[appkeys.STORE], caller.owner, room)


def _room(ring: KeyRing, caller: Caller, limit: int) -> Callable[[int, str | None], Awaitable[None] | None]:
    shared = ring.limits.shared

    def growth(size: int, object_id: str | None) -> int:
        # a record put again (a background response: in progress, then finished) adds only its
        # growth: the refresh's exact sum holds its last size, not both
        counted = ring.counted_puts.setdefault(caller.name, {})
        added = size - counted.get(object_id, 0) if object_id is not None else size
        if object_id is not None:
            counted.pop(object_id, None)
            counted[object_id] = size
            if len(counted) > COUNTED_PUTS:  # the oldest go: a record is rarely put again much later
                del counted[next(iter(counted))]
        return added

    def room(size: int, object_id: str | None) -> Awaitable[None] | None:
        added = growth(size, object_id)
        if shared is not None:  # replicas: the database counts every replica's writes (store/limits.py)
            return _shared_room(shared, ring, caller, added, limit) if added > 0 else None
        used = ring.stored_bytes.get(caller.name, 0)
        if added > 0 and used + added > limit:
            raise _over_quota(caller, used)
        ring.stored_bytes[caller.name] = used + added  # until the next refresh counts it exactly
        return None

    return room


async def _shared_room(shared: LimitStore, ring: KeyRing, caller: Caller, added: int, limit: int) -> None:
    held = await shared.room(ring.limits.profile, caller.name, added, limit)
    if held is not None:
        raise _over_quota(caller, held)
