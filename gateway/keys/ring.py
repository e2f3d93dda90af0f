"""The keys a running gateway accepts, held in memory and refreshed from the store.

Auth is one SHA-256 of the presented key and one dict lookup (`KeyRing.find`): no database round
trip per request. Every `REFRESH_SECONDS` a background task (`run`) reads the profile's keys again
when their version moved (one row otherwise: a ring of 10k keys rebuilt every 2 s cost ~0.2-0.5 s of
a core, bench/README.md), so a key revoked or created by `agent-gateway keys` on any machine is seen
by every replica within that time, no restart; writes the usage this replica counted since the last refresh in one
transaction (so replicas add up and no request waits on a usage write), and reads each key's stored
bytes (what the stored-bytes quota is checked against). An expired key is refused at once: its
expiry is checked on each lookup. A refresh that fails keeps the ring it had and tries again.

Keys fail closed: with a store to read keys from, the gateway is keyless only once a read found no
key ever made. Until the first read succeeds (the database down at start), the ring is `unread`
and every authenticated route answers 503 (http/auth.py), never open.

Limits that need an answer per request: with one process (SQLite), rpm and concurrent runs are
counted here in memory and tokens in keys/limits.py; behind replicas (PostgreSQL, `limits.shared`)
every limit of a limited key is counted in the database (keys/limits.py), and this ring only
writes their corrections and renews their run slots with its refresh.

Each key's access (model routes, configured MCP servers, web tools) and admin flag ride on its
`Caller`, so a `keys update` reaches every replica with the next refresh, like a revocation. The
usage write also adds the UTC day's row of each key (and its stored bytes, when read since the
last write) and, once a day, deletes the days older than `usage_days` (API_SERVER_USAGE_DAYS).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from gateway.keys.caller import Caller
from gateway.keys.limits import KeyLimits
from gateway.store.api import StoreUnavailableError
from gateway.store.keys import ApiKey, KeyStore, UsageDelta, UsageWrite, key_hash
from gateway.store.limits import LimitStore
from gateway.store.owners import DEFAULT_KEY, owner_of, profile_label

log = logging.getLogger("agent_gateway.keys")

#: A revoked key is refused by every replica within 5 s: the refresh runs well inside that.
REFRESH_SECONDS = 2.0
RATE_WINDOW = 60.0
STORED_BYTES_EVERY = 15
DAY = 86400


def utc_day(at: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(at))


#: The caller of the request this task serves (None: an open route), and its rate state for a key
#: with an rpm: (limit, remaining, seconds until a slot frees). Set by http/auth.py on every
#: request, open ones too (a keep-alive connection serves its requests in one task, so nothing of
#: the previous request's is left); read by the prepare hook, the access log (which runs in a copy
#: of the request's context), the store's view and the agent's usage counts. A context variable
#: rather than a request key: a read is one C call on the hot path.
CURRENT_CALLER: ContextVar[Caller | None] = ContextVar("current_caller", default=None)
CURRENT_RATE: ContextVar[tuple[int, int, float] | None] = ContextVar("current_rate", default=None)


@dataclass
class _Counters:
    window: deque[float] = field(default_factory=deque)  # this minute's request times (rpm only)
    running: int = 0


class KeyRing:
    def __init__(self, profile: str | None, api_key: str | None, store: KeyStore | None,
                 shared: LimitStore | None = None, *, usage_days: int = 90) -> None:
        self.profile = profile
        self.usage_days = usage_days
        self._pruned_day: str | None = None  # the day whose older rows were last deleted
        self._stored_fresh = False  # stored_bytes read since the last usage write
        self._stored_written: dict[str, int] = {}  # the day's stored bytes as last written, per key
        self.store = store
        #: token limits, and every limit behind replicas (`limits.shared`: the database counts them)
        self.limits = KeyLimits(profile_label(profile), shared)
        self.default = Caller(DEFAULT_KEY, owner_of(profile, DEFAULT_KEY))
        self._api_key_hash = key_hash(api_key) if api_key else None
        self._by_hash: dict[str, Caller] = {}
        self._keys_made = False
        self._read = store is None  # the store's keys were read once (nothing to read without a store)
        self._quotas = False  # a live key has a stored-bytes quota
        self._refreshes = 0
        self._keys_version = -1  # the store's keys_version at the last read of its keys
        if self._api_key_hash is not None:
            self._by_hash[self._api_key_hash] = self.default
        self._counters: dict[str, _Counters] = {}
        self.pending: dict[str, UsageDelta] = {}  # counted here, not yet written
        self.stored_bytes: dict[str, int] = {}  # per key name, as of the last refresh
        #: per key name, the size last put of each record this replica stored (gateway/http/auth.py room):
        #: a record put again adds only its growth, before and after a refresh alike
        self.counted_puts: dict[str, dict[str, int]] = {}
        self._task: asyncio.Task[None] | None = None
        self.on_refresh: Callable[[], None] | None = None  # after each refresh (the metrics' gauge)
        #: with each batch of usage, before it is written (the metrics' per-key counters)
        self.on_counted: Callable[[dict[str, UsageDelta]], None] | None = None
        #: with the owner of each key run that ends (the queue's cue: that key's queued runs may start)
        self.on_run_left: Callable[[str], None] | None = None

    @property
    def keyless(self) -> bool:
        """No API_SERVER_KEY and no key ever made in the store (as read): today's loopback-only rules,
        every object `default`'s. Once a key was made, keys are required even when all are revoked or
        expired (revoking the last key must not open the gateway); a store never read is not keyless."""
        return not self._by_hash and not self._keys_made and self._read

    @property
    def unread(self) -> bool:
        """The store's keys were never read (it was down from the start): a key not found may be one
        of them, so it is a 503 rather than a 401, and no request is served as `default` without one."""
        return not self._read

    def find(self, presented: str) -> Caller | None:
        caller = self._by_hash.get(key_hash(presented))
        if caller is not None and caller.expires_at is not None and caller.expires_at <= time.time():
            return None
        return caller

    def by_name(self, name: str) -> Caller | None:
        """The live key named `name` (a queued background response acts as the key that made it)."""
        if name == DEFAULT_KEY:
            return self.default
        for caller in self._by_hash.values():
            if caller.name == name:
                return None if caller.expires_at is not None and caller.expires_at <= time.time() else caller
        return None

    # ---- per-request limits and usage --------------------------------------------------------

    def rate(self, caller: Caller, now: float) -> tuple[int, float, bool]:
        """For a key with an rpm: (remaining after this request, seconds until a slot frees,
        whether this request is admitted). A sliding minute: each request frees its slot 60 s later."""
        assert caller.rpm is not None
        counters = self._counters.get(caller.name)  # not setdefault: that would make a _Counters per request
        if counters is None:
            counters = self._counters[caller.name] = _Counters()
        window = counters.window
        while window and window[0] <= now - RATE_WINDOW:
            window.popleft()
        admitted = len(window) < caller.rpm
        if admitted:
            window.append(now)
        reset = window[0] + RATE_WINDOW - now if window else 0.0
        return caller.rpm - len(window), reset, admitted

    def enter_run(self, caller: Caller) -> bool:
        counters = self._counters.setdefault(caller.name, _Counters())
        if caller.max_concurrent is not None and counters.running >= caller.max_concurrent:
            return False
        counters.running += 1
        return True

    def take_run(self, caller: Caller) -> None:
        """A run counted whatever the limit (a claimed queued run whose slot a request took while
        the claim was on its way: it runs, and the key's next runs wait for both)."""
        self._counters.setdefault(caller.name, _Counters()).running += 1

    def leave_run(self, caller: Caller) -> None:
        counters = self._counters[caller.name]
        counters.running = max(0, counters.running - 1)
        if self.on_run_left is not None:
            self.on_run_left(caller.owner)

    def full_owners(self) -> list[str]:
        """The owners of the keys with no free run slot on this replica: their queued runs stay queued."""
        full = []
        for caller in self._by_hash.values():
            limit = caller.max_concurrent
            if limit is not None:
                counters = self._counters.get(caller.name)
                if counters is not None and counters.running >= limit:
                    full.append(caller.owner)
        return full

    def queue_share(self, max_queued: int) -> int:
        """How many of the queue's `max_queued` places one key may hold: an equal share among the
        live keys (at least 1), so that one key cannot fill the queue for the others."""
        return max(1, max_queued // max(1, len(self._by_hash)))

    def usage_of(self, name: str) -> UsageDelta:
        delta = self.pending.get(name)
        if delta is None:
            delta = self.pending[name] = UsageDelta()
        return delta

    # ---- the refresh -------------------------------------------------------------------------

    def _load(self, keys: list[ApiKey]) -> None:
        by_hash: dict[str, Caller] = {}
        for key in keys:
            if key.revoked_at is None and key.name != DEFAULT_KEY:
                by_hash[key.key_hash] = Caller.of(key, owner_of(self.profile, key.name))
        if self._api_key_hash is not None:
            by_hash[self._api_key_hash] = self.default
        self._by_hash = by_hash  # swapped whole: a request sees the old ring or the new one
        self._keys_made = self._keys_made or bool(keys)
        self._quotas = any(caller.max_stored_bytes is not None for caller in by_hash.values())
        self._read = True

    async def reload_keys(self) -> None:
        """The keys read again now (an admin API change, seen by this replica at once)."""
        if self.store is not None:
            self._load(await self.store.keys())

    async def refresh(self) -> None:
        if self.store is None:
            return
        pending, self.pending = self.pending, {}
        if self.on_counted is not None and pending:
            self.on_counted(pending)
        await self._write(pending)
        version = await self.store.keys_version()
        if version < 0 or version != self._keys_version or not self._read:
            self._load(await self.store.keys())
            self._keys_version = version
        await self.limits.refresh(self.store, [c for c in self._by_hash.values() if c.limited])
        self._refreshes += 1
        # The stored bytes are a sum over every stored object: read at each refresh only while a
        # live key has a quota to check; otherwise every STORED_BYTES_EVERY refreshes (the gauge).
        if self._quotas or self._refreshes % STORED_BYTES_EVERY == 1:
            shared = self.limits.shared if self._quotas else None
            started = await shared.clock() if shared is not None else 0.0  # before the sum is read
            self.stored_bytes = {name: usage.stored_bytes for name, usage in (await self.store.usage()).items()}
            self._stored_fresh = True
            if shared is not None:  # replicas check writes against this measure (store/limits.py)
                await shared.measured(self.limits.profile, {
                    c.name: self.stored_bytes.get(c.name, 0) for c in self._by_hash.values()
                    if c.max_stored_bytes is not None}, started)
            if self.on_refresh is not None:
                self.on_refresh()

    async def _write(self, pending: dict[str, UsageDelta]) -> None:
        """The usage counted since the last write, in one transaction: totals, the day's rows, the
        day's stored bytes (when read since) and, on a new day, the deletion of the days past keeping."""
        assert self.store is not None
        now = time.time()
        day = utc_day(now)
        new_day = day != self._pruned_day
        if new_day:
            self._stored_written = {}
        stored = {name: size for name, size in self.stored_bytes.items()
                  if self._stored_written.get(name) != size} if self._stored_fresh else {}  # changed ones only
        if not pending and not stored:
            # Nothing counted: no write, so a store that can only be read still hands out its keys
            # (the keys are read after this). The day's pruning waits for the next write.
            return
        write = UsageWrite(pending, day, stored, utc_day(now - (self.usage_days - 1) * DAY) if new_day else None)
        try:
            await self.store.add_usage(write)
        except StoreUnavailableError:
            for name, delta in pending.items():  # kept for the next refresh
                self.usage_of(name).add(delta)
            raise
        self._stored_fresh = False
        self._stored_written.update(stored)
        self._pruned_day = day

    async def start(self) -> None:
        if self.store is None:
            return
        try:
            await self.store.open()
            await self.refresh()
        except StoreUnavailableError as exc:
            log.warning("the API keys could not be read yet (%s); retrying every %.0f s", exc.message,
                        REFRESH_SECONDS)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        failing = False
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                await self.refresh()
                failing = False
            except StoreUnavailableError as exc:
                if not failing:  # once per outage, not every 2 s
                    log.warning("the API keys are not being refreshed (the last ones read stay in use): %s",
                                exc.message)
                failing = True
            except Exception:  # the loop must outlive any one failure
                log.exception("the API keys were not refreshed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.store is not None:
            try:
                await self._write(self.pending)  # what was counted since the last refresh
            except Exception as exc:  # a stop must finish: the counts are lost, said once
                log.warning("the API keys' last usage was not written: %s", getattr(exc, "message", exc))
            self.pending = {}
            try:
                await self.limits.stop(self.store)  # tokens' corrections, run slots held
            except Exception as exc:  # as above: the leases run out, the corrections are lost
                log.warning("the API keys' last token counts were not written: %s", getattr(exc, "message", exc))
            await self.store.close()
