"""A key's token limits (tpm, a budget per period) and, behind several replicas, all its limits.

Two ways to count, chosen by the store:
- **one process** (SQLite): in memory, exactly. Requests per minute and concurrent runs are the
  ring's (keys/ring.py); tokens per minute a sliding minute of (time, tokens) here; a budget's
  period counter here too, added to the store's `key_budgets` with each usage write and read back
  from it at each refresh (so it survives a restart).
- **replicas** (PostgreSQL): every limit of a limited key in one round trip to the database per
  request (store/postgres/limits.py), exact across replicas; a run's slot is freed when it ends
  and its lease renewed with the ring's refresh, so a dead replica's slots free themselves.

Tokens are reserved from an estimate when a run is admitted (its input as the context budget
counts it, plus its max_output_tokens or DEFAULT_OUTPUT) and corrected once it ends with what the
upstream reported (`Ticket.used`, counted by keys/usage.py): in memory at once, in the database
with the next refresh (every 2 s, no request waits on it). A request is admitted while the key's
tokens of the minute (or of the period) are under its limit, so the request that crosses a limit
runs to its end and the next one is refused.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Awaitable
from contextvars import ContextVar
from dataclasses import dataclass, field

from gateway.keys.caller import Caller
from gateway.store.keys import KeyStore
from gateway.store.limits import RATE_WINDOW, Admission, Ask, Correction, LimitStore, period_end, period_start

#: Output tokens reserved for a request that sets no max_output_tokens / max_tokens.
DEFAULT_OUTPUT = 1024
#: A run's slot in the database lasts this long unless its replica renews it (every refresh).
RUN_LEASE_SECONDS = 10.0


@dataclass
class Ticket:
    """One admitted run of a token-limited key: what it reserved and what it used."""

    caller: Caller
    estimate: int
    used: int = 0  # reported by the upstream (keys/usage.py), all rounds of the run
    period_start: int | None = None
    admission_id: int | None = None  # its row of the minute (replicas)
    entry: list[float] | None = None  # its (time, tokens) of the minute (one process)
    minute: bool = False  # no row: its tokens go into the minute when it ends (a queued run)
    run_id: str | None = None  # its run slot (replicas)
    done: bool = False


#: The token ticket of the run this task serves (None: none); read by the usage observer.
CURRENT_TICKET: ContextVar[Ticket | None] = ContextVar("current_ticket", default=None)
#: The token figures of the current request for its headers: (limit, remaining, seconds to reset or None).
CURRENT_TOKENS: ContextVar[tuple[int, int, float | None] | None] = ContextVar("current_tokens", default=None)


@dataclass
class _Budget:
    start: int = 0
    stored: int = 0  # as the store said at the last refresh


@dataclass
class _Minute:
    """A key's sliding minute of tokens: (time, tokens) per run, oldest first, and their sum (kept
    as they come and go, so a request's check does not walk the minute)."""

    entries: deque[list[float]] = field(default_factory=deque)
    total: float = 0.0

    def prune(self, now: float) -> None:
        entries = self.entries
        while entries and entries[0][0] <= now - RATE_WINDOW:
            self.total -= entries.popleft()[1]

    def add(self, entry: list[float]) -> None:
        self.entries.append(entry)
        self.total += entry[1]

    def correct(self, entry: list[float], delta: float, now: float) -> None:
        self.prune(now)
        if entry[0] > now - RATE_WINDOW:  # still in the minute (an entry leaves it only through prune)
            entry[1] += delta
            self.total += delta


class KeyLimits:
    def __init__(self, profile: str, shared: LimitStore | None) -> None:
        self.profile = profile
        self.shared = shared
        self._minutes: dict[str, _Minute] = {}
        self._budgets: dict[str, _Budget] = {}
        self._budget_pending: dict[tuple[str, int], int] = {}
        #: being written by a refresh: still counted until the store's figures that hold it are read
        self._budget_writing: dict[tuple[str, int], int] = {}
        self._corrections: list[Correction] = []
        self._held: set[str] = set()  # run slots this replica holds in the database
        self._releases: set[asyncio.Task[None]] = set()
        #: per key, the token figures of its last admission here: (limit, remaining, reset at (monotonic))
        self.last_tokens: dict[str, tuple[int, int, float | None]] = {}

    # ---- one process -------------------------------------------------------------------------

    def admit_local(self, caller: Caller, estimate: int, now: float) -> tuple[Ticket | None, str | None, float]:
        """(the ticket, None, 0) when admitted; (None, the limit refusing, retry after) when not.
        Either way the request's token figures (its headers) are set, as `local_figures` makes them."""
        start = None
        if caller.token_budget is not None:
            start = period_start(caller.created_at, caller.budget_period, time.time())
            if self.budget_used(caller, start) >= caller.token_budget:
                CURRENT_TOKENS.set(self.local_figures(caller, now))
                return None, "budget", 0.0
        entry = None
        if caller.tpm is not None:
            minute = self._minute(caller.name)
            minute.prune(now)
            if minute.total >= caller.tpm:
                CURRENT_TOKENS.set(self.local_figures(caller, now))
                freed = 0.0
                for at, tokens in minute.entries:  # when enough has left the minute to be under the limit
                    freed += tokens
                    if minute.total - freed < caller.tpm:
                        return None, "tokens", at + RATE_WINDOW - now
                return None, "tokens", RATE_WINDOW
            entry = [now, float(estimate)]
            minute.add(entry)
            # local_figures' values, from what is at hand: the minute was pruned just now and holds this entry
            CURRENT_TOKENS.set((caller.tpm, caller.tpm - round(minute.total), minute.entries[0][0] + RATE_WINDOW - now))
        if start is not None:
            key = (caller.name, start)
            self._budget_pending[key] = self._budget_pending.get(key, 0) + estimate
            if caller.tpm is None:
                CURRENT_TOKENS.set(self.local_figures(caller, now))
        return Ticket(caller, estimate, period_start=start, entry=entry), None, 0.0

    def _minute(self, name: str) -> _Minute:
        minute = self._minutes.get(name)  # not setdefault: that would make a _Minute per call
        if minute is None:
            minute = self._minutes[name] = _Minute()
        return minute

    def budget_used(self, caller: Caller, start: int) -> int:
        budget = self._budgets.get(caller.name)
        stored = budget.stored if budget is not None and budget.start == start else 0
        key = (caller.name, start)
        return stored + self._budget_pending.get(key, 0) + self._budget_writing.get(key, 0)

    def local_figures(self, caller: Caller, now: float) -> tuple[int, int, float | None]:
        """(limit, remaining, reset) for a key's headers, from memory (one process)."""
        if caller.tpm is not None:
            minute = self._minute(caller.name)
            minute.prune(now)
            reset = minute.entries[0][0] + RATE_WINDOW - now if minute.entries else 0.0
            return caller.tpm, caller.tpm - round(minute.total), reset
        assert caller.token_budget is not None
        wall = time.time()
        used = self.budget_used(caller, period_start(caller.created_at, caller.budget_period, wall))
        end = period_end(caller.created_at, caller.budget_period, wall)
        return caller.token_budget, caller.token_budget - used, None if end is None else end - wall

    # ---- replicas ----------------------------------------------------------------------------

    def ask(self, caller: Caller, *, runs: bool, estimate: int | None) -> Ask:
        """What a request of `caller` asks the database: its rpm, a run slot (`runs`), its tokens
        (`estimate`: None when the request runs nothing)."""
        ask = Ask(self.profile, caller.name, rpm=caller.rpm)
        if runs and caller.max_concurrent is not None:
            ask.max_runs, ask.run_id = caller.max_concurrent, uuid.uuid4().hex
        if estimate is not None:
            ask.tpm, ask.budget, ask.tokens = caller.tpm, caller.token_budget, estimate
            if caller.token_budget is not None:
                ask.period_start = period_start(caller.created_at, caller.budget_period, time.time())
        return ask

    async def admit_shared(self, ask: Ask, *, force: bool = False) -> Admission:
        assert self.shared is not None
        admission = await self.shared.admit(ask, force=force, lease_seconds=RUN_LEASE_SECONDS)
        if admission.refused is None and ask.run_id is not None:
            self._held.add(ask.run_id)
        return admission

    def shared_figures(self, caller: Caller, admission: Admission) -> tuple[int, int, float | None]:
        if caller.tpm is not None:
            figures: tuple[int, int, float | None] = (caller.tpm, caller.tpm - admission.tokens,
                                                      admission.tokens_reset)
        else:
            assert caller.token_budget is not None
            wall = time.time()
            end = period_end(caller.created_at, caller.budget_period, wall)
            figures = (caller.token_budget, caller.token_budget - admission.budget_used,
                       None if end is None else end - wall)
        self.last_tokens[caller.name] = (figures[0], figures[1],
                                         None if figures[2] is None else time.monotonic() + figures[2])
        return figures

    def last_figures(self, caller: Caller) -> tuple[int, int, float | None] | None:
        """This replica's last figures of the key (for a request that asked the database nothing)."""
        last = self.last_tokens.get(caller.name)
        if last is None:
            return None
        limit, remaining, reset_at = last
        return limit, remaining, None if reset_at is None else max(0.0, reset_at - time.monotonic())

    # ---- a run's end -------------------------------------------------------------------------

    def finish(self, ticket: Ticket | None, run_id: str | None) -> Awaitable[None] | None:
        """A run ended: its tokens corrected, its slot in the database freed (the returned task)."""
        if ticket is not None and not ticket.done:
            ticket.done = True
            delta = ticket.used - ticket.estimate
            if self.shared is None:
                if ticket.entry is not None:
                    if delta:
                        self._minute(ticket.caller.name).correct(ticket.entry, delta, time.monotonic())
                elif ticket.minute and ticket.caller.tpm is not None and delta:
                    self._minute(ticket.caller.name).add([time.monotonic(), float(delta)])
                if ticket.period_start is not None and delta:
                    key = (ticket.caller.name, ticket.period_start)
                    self._budget_pending[key] = self._budget_pending.get(key, 0) + delta
            elif delta:
                self._corrections.append(Correction(self.profile, ticket.caller.name, delta, ticket.admission_id,
                                                    ticket.period_start, minute=ticket.minute))
        if run_id is None or self.shared is None:
            return None
        self._held.discard(run_id)
        task = asyncio.get_running_loop().create_task(self.shared.release([run_id]))
        self._releases.add(task)
        task.add_done_callback(self._released)
        return task

    def _released(self, task: asyncio.Task[None]) -> None:
        self._releases.discard(task)
        if not task.cancelled() and task.exception() is not None:
            pass  # the slot's lease runs out instead (RUN_LEASE_SECONDS): nothing more to do here

    # ---- with the ring's refresh -------------------------------------------------------------

    async def refresh(self, store: KeyStore, callers: list[Caller]) -> None:
        """Writes what was counted since the last refresh; renews this replica's run slots; reads
        the budgets' counters (one process)."""
        if self.shared is not None:
            corrections, self._corrections = self._corrections, []
            try:
                await self.shared.reconcile(corrections)
            except BaseException:
                self._corrections[:0] = corrections  # kept for the next refresh
                raise
            await self.shared.renew(sorted(self._held), RUN_LEASE_SECONDS)
            return
        pending, self._budget_pending = self._budget_pending, {}
        try:
            await store.add_budgets(pending)
        except BaseException:
            _add_into(self._budget_pending, pending)  # kept for the next refresh
            raise
        _add_into(self._budget_writing, pending)  # written: counted here until a read holds it
        wall = time.time()
        periods = {c.name: period_start(c.created_at, c.budget_period, wall) for c in callers
                   if c.token_budget is not None}
        used = await store.budgets(periods) if periods else {}
        self._budgets = {name: _Budget(start, used.get(name, 0)) for name, start in periods.items()}
        self._budget_writing = {}

    async def stop(self, store: KeyStore) -> None:
        if self._releases:
            await asyncio.gather(*self._releases, return_exceptions=True)
        if self.shared is not None:
            await self.shared.reconcile(self._corrections)
            await self.shared.release(sorted(self._held))
        else:
            await store.add_budgets(self._budget_pending)
        self._corrections, self._budget_pending, self._held = [], {}, set()


def _add_into(counts: dict[tuple[str, int], int], more: dict[tuple[str, int], int]) -> None:
    for key, tokens in more.items():
        counts[key] = counts.get(key, 0) + tokens
