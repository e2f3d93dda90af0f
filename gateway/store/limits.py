"""Limits that every replica on one database shares: the contract (schema v7).

A limited key's request is admitted by `LimitStore.admit`: one round trip that checks and counts,
under one lock per key, what the key limits (requests per minute, concurrent runs, tokens per
minute, a token budget per period) on the database's clock, so replicas whose clocks disagree
still count one minute. Nothing is counted for a refused request.

- requests and tokens per minute: a sliding minute, one row per admitted request (`key_admissions`:
  its time and the tokens it reserved), the key's rows older than a minute dropped as it goes;
- concurrent runs: one row per running run (`key_runs`) with the replica's lease, deleted when the
  run ends and ignored once the lease ran out (a replica that died gives its slots back);
- the token budget: one counter per key and period (`key_budgets`);
- stored bytes: each key's exact sum as last measured (every refresh, by each replica) plus the
  writes checked since (`room`), so two replicas writing at once cannot both pass the quota.

Tokens are reserved at admission from an estimate and corrected after the run (`reconcile`, in the
replica's batched usage write): the minute's row and the period's counter get what the upstream
reported minus the estimate.

The single-process SQLite store needs none of this: its gateway counts in memory (keys/limits.py),
exactly, and keeps only the budgets' counters in its file (store/keys.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

#: The budget periods `keys create --budget-period` accepts, in seconds (None: never resets).
BUDGET_PERIODS: dict[str, int | None] = {"1d": 86400, "7d": 7 * 86400, "30d": 30 * 86400, "total": None}
RATE_WINDOW = 60.0


def settle_budget_period(changes: dict[str, object], *, creating: bool) -> None:
    """A key's fields being set (by `keys create/update` or the admin API): a budget removed takes
    its period with it; a new key's budget without a period runs over `total`; an update naming no
    period keeps the key's."""
    if "token_budget" not in changes:
        return
    if changes["token_budget"] is None:
        changes["budget_period"] = None
    elif creating and changes.get("budget_period") is None:
        changes["budget_period"] = "total"


def period_start(created_at: int, period: str | None, now: float) -> int:
    """The start of the budget period `now` is in: periods run from the key's creation, one after
    the other (a `1d` key made at 14:00 resets every day at 14:00); `total` has one, from creation."""
    length = BUDGET_PERIODS.get(period or "total")
    if length is None:
        return created_at
    return created_at + int((now - created_at) // length) * length


def period_end(created_at: int, period: str | None, now: float) -> int | None:
    length = BUDGET_PERIODS.get(period or "total")
    return None if length is None else period_start(created_at, period, now) + length


@dataclass
class Ask:
    """What one request asks of its key's limits (None: the key has no such limit)."""

    profile: str
    name: str
    rpm: int | None = None
    max_runs: int | None = None
    run_id: str | None = None  # with max_runs: the run's slot, released by `release(run_id)`
    tpm: int | None = None
    budget: int | None = None
    period_start: int | None = None  # with budget
    tokens: int = 0  # the estimate reserved (tpm and budget)


@dataclass
class Admission:
    """The answer: `refused` is None (admitted) or which limit refused it ("requests", "runs",
    "tokens", "budget"); the figures are as the request left them (its own counted when admitted)."""

    refused: str | None
    admission_id: int | None = None  # the minute's row of this request (reconcile's target)
    requests: int = 0  # counted in the last minute
    requests_reset: float = 0.0  # seconds until the oldest of them leaves the minute
    tokens: int = 0  # reserved or used in the last minute
    tokens_reset: float = 0.0
    budget_used: int = 0  # in the period
    runs: int = 0  # running now (leases current)
    retry_after: float = 1.0  # with `refused`: when asking again may succeed


@dataclass
class Correction:
    """Tokens a run used beyond (or below: negative) what its admission reserved."""

    profile: str
    name: str
    tokens: int
    admission_id: int | None = None
    period_start: int | None = None
    minute: bool = False  # with no admission row (a queued run, counted when it ran): a new one now


class LimitStore(ABC):
    @abstractmethod
    async def admit(self, ask: Ask, *, force: bool = False, lease_seconds: float = 10.0) -> Admission:
        """Checks and counts `ask` in one round trip (StoreUnavailableError when it cannot).
        `force`: counted whatever the limits (a queued run claimed: admitted when it was queued);
        `lease_seconds`: how long a run's slot lasts unless renewed."""

    @abstractmethod
    async def release(self, run_ids: list[str]) -> None:
        """Frees these runs' slots."""

    @abstractmethod
    async def renew(self, run_ids: list[str], lease_seconds: float) -> None:
        """Extends these runs' leases to `lease_seconds` from now (the replica holding them is alive)."""

    @abstractmethod
    async def reconcile(self, corrections: list[Correction]) -> None:
        """Adds each correction to its minute's row (if still in the minute) and period's counter."""

    @abstractmethod
    async def clock(self) -> float:
        """The database's time (seconds since the epoch): what a measure of stored bytes starts at."""

    @abstractmethod
    async def room(self, profile: str, name: str, added: int, limit: int) -> int | None:
        """Counts a write of `added` bytes if the key's stored bytes stay within `limit` (None);
        otherwise counts nothing and returns the bytes the key holds as counted."""

    @abstractmethod
    async def measured(self, profile: str, sizes: dict[str, int], at: float) -> None:
        """Each key's exact stored bytes as summed by a read that started after `at`."""
