"""Background runs in the store (schema version 5): status, lease, queue and events, for every replica.

A background response (`background: true`) is two things in the store: its response record (the
`ResponseStore`'s, the Response object a poll returns) and its *run* here: who runs it, until when
(the lease), whether a cancel was asked, the request a queued run starts from, and every event it
streamed (SSE frames by sequence number), so that a poll, a resumed stream or a cancel may reach
any replica and get the same answer.

The contract (tests/store/test_runs_contract.py runs it against both backends):
- **One writer per run.** `begin` and `claim` give the run to one replica (`replica`, a name unique
  per process) with a lease `lease_seconds` long, counted on the database's clock (replicas' clocks
  may disagree). The holder renews it (`renew`, one round trip for all its runs); a run whose lease
  ran out is `expire`d by any replica: marked `failed` here, never run again (its searches were paid
  for and may be visible), and the caller writes the response record's `failed` status. After that
  the old holder's `renew` no longer lists it, and its `append_events` and `finish` raise
  `LostRunError`: it must stop.
- **Queue.** `enqueue` stores a run `queued` with the request it starts from (opaque bytes: the
  http layer's to write and read) unless `max_queued` runs are queued already (`QueueFullError`,
  429). `claim` takes the oldest queued run, once, whatever the number of replicas asking at once
  (PostgreSQL: `FOR UPDATE SKIP LOCKED`; SQLite: one writer).
- **Events.** `append_events(id, first_seq, frames)` stores frames numbered first_seq, first_seq+1,
  ... (a gap or a repeat is a `ValueError`: the caller numbers them); `events_after(id, after)`
  reads them in order. A finished run's events are dropped by `purge_finished` after their keep
  time; the run row goes with them (the response record stays, as any stored response).
- **Cancel.** `request_cancel` marks a run: a queued one becomes `cancelled` at once (it never
  starts); a running one keeps running until its holder sees the mark (a notification, or `renew`'s
  answer) and stops it. A finished one is unchanged.
- **Changes are announced.** Every write that a follower waits for (events appended, a run ended or
  cancelled, a run queued) wakes `wait(id)` on every replica (PostgreSQL: NOTIFY on one channel, one
  LISTEN connection per replica; SQLite: in this process), so followers never poll in a loop.
  `wait` returning means only "look again": callers re-read, and bound each wait by a timeout (a
  notification lost with a dropped listener connection costs one timeout, never the answer).
  No wake-up is lost between a read and the wait: a change announced after a task's last `get` or
  `events_after` of a run makes that task's next `wait` on it return at once (and after its last
  `claim`, its next `wait_queued`), so the loop "read; nothing new; wait" never sleeps through a
  change that landed in between (store/run_waits.py).
- **Faults are 503**, as the rest of the store (`StoreUnavailableError`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.errors import AgentGatewayError, RateLimitError

#: a run's statuses; the terminal ones are the Response object's
QUEUED, IN_PROGRESS = "queued", "in_progress"
TERMINAL = frozenset({"completed", "incomplete", "failed", "cancelled"})


class QueueFullError(RateLimitError):
    """`max_queued` background runs are waiting already: 429, retry later."""

    @classmethod
    def of(cls, queued: int) -> QueueFullError:
        return cls(f"{queued} background responses are queued already, the most this gateway holds; "
                   "retry later.", retry_after=2)


class OwnerQueueFullError(QueueFullError):
    """`max_per_owner` background runs of this owner are waiting already: its share of the queue."""

    @classmethod
    def of_owner(cls, queued: int) -> OwnerQueueFullError:
        return cls(f"{queued} background responses of this key are queued already, its share of the queue; "
                   "retry when one has started.", retry_after=2)


class LostRunError(AgentGatewayError):
    """This replica no longer holds the run (its lease expired and another replica failed it)."""


@dataclass(frozen=True)
class Run:
    response_id: str
    #: the owner of the response (store/owned.py), so a replica claiming a queued run acts as it
    owner: str
    #: QUEUED, IN_PROGRESS or one of TERMINAL
    status: str
    #: the replica running it ("" while queued or once ended)
    replica: str
    cancel_requested: bool
    #: what a queued run starts from (opaque to the store; b"" for a run begun at once)
    request: bytes
    #: the sequence number of the last event stored (-1: none)
    last_seq: int

    @classmethod
    def from_row(cls, row: Any) -> Run:
        """A run from a row of the backends' run columns, in the order above (both select them so)."""
        return cls(response_id=row[0], owner=row[1], status=row[2], replica=row[3],
                   cancel_requested=bool(row[4]), request=bytes(row[5]), last_seq=int(row[6]))


def append_refusal(response_id: str, first_seq: int, replica: str, run: Run | None) -> Exception:
    """Why `append_events` stored nothing, from the run as it is: not (or no longer) `replica`'s
    (LostRunError), or numbered wrong (ValueError)."""
    if run is None or run.status != IN_PROGRESS or run.replica != replica:
        return LostRunError(f"replica {replica} no longer holds the run of {response_id}")
    return ValueError(f"the events of {response_id} go on from {run.last_seq + 1}, not from {first_seq}")


class RunStore(ABC):
    """The background runs of one store; `ResponseStore.runs` of each backend."""

    @abstractmethod
    async def begin(self, response_id: str, owner: str, *, replica: str, lease_seconds: float) -> None:
        """A run that starts now on `replica` (a slot was free): stored `in_progress`, leased."""

    @abstractmethod
    async def enqueue(self, response_id: str, owner: str, request: bytes, *, max_queued: int,
                      max_per_owner: int | None = None) -> None:
        """A run that waits for a slot: stored `queued` with its request; QueueFullError if
        `max_queued` are queued already, or `max_per_owner` of `owner`'s (its share of the queue)."""

    @abstractmethod
    async def claim(self, *, replica: str, lease_seconds: float, skip_owners: Sequence[str] = ()) -> Run | None:
        """The oldest queued run of an owner not in `skip_owners` (those with no free run slot on
        `replica`: their runs stay queued), now `in_progress` on `replica`; None if none is queued."""

    @abstractmethod
    async def renew(self, replica: str, response_ids: list[str], *, lease_seconds: float) -> dict[str, bool]:
        """Extend the leases of `replica`'s runs: {id: cancel_requested} for each it still holds
        (an id missing from the answer was lost: expired, or ended)."""

    @abstractmethod
    async def append_events(self, response_id: str, first_seq: int, frames: list[bytes], *,
                            replica: str) -> None:
        """Store frames first_seq.. of the run `replica` holds; LostRunError if it does not."""

    @abstractmethod
    async def events_after(self, response_id: str, after: int, *, limit: int = 1000) -> list[tuple[int, bytes]]:
        """Up to `limit` stored frames with sequence number > `after`, in order."""

    @abstractmethod
    async def get(self, response_id: str) -> Run | None:
        """The run, or None (never a background response, or purged)."""

    @abstractmethod
    async def finish(self, response_id: str, status: str, *, replica: str) -> None:
        """The run `replica` holds ended with `status` (one of TERMINAL); LostRunError if it no
        longer holds it."""

    @abstractmethod
    async def request_cancel(self, response_id: str) -> Run | None:
        """Mark the run cancelled (queued: `cancelled` at once; running: for its holder to stop);
        the run as it is now, None if unknown."""

    @abstractmethod
    async def expire(self) -> list[Run]:
        """Mark every `in_progress` run whose lease ran out `failed`; the runs so marked (each
        once, whichever replica asks), their `replica` the one that held it."""

    @abstractmethod
    async def purge_finished(self, keep_seconds: float) -> int:
        """Drop runs (and their events) that ended more than `keep_seconds` ago; how many."""

    @abstractmethod
    async def wait(self, response_id: str, timeout: float) -> None:
        """Return when a change to this run is announced, or after `timeout` seconds."""

    @abstractmethod
    async def wait_queued(self, timeout: float) -> None:
        """Return when a run is queued (or a slot may be free elsewhere), or after `timeout`."""
