"""The background runs (store/runs.py) in the PostgreSQL database every replica shares, schema
version 5: `PostgresResponseStore.runs`.

- **Clock**: leases and end times are the database's (`clock_timestamp()`), so replicas whose
  clocks disagree still agree on when a lease ran out.
- **One taker**: `claim` takes the oldest queued run `FOR UPDATE SKIP LOCKED`, and `expire` the
  runs whose lease ran out the same way, so of replicas asking at once each run goes to one.
  `enqueue` counts the queue and inserts under an advisory lock (RUN_QUEUE_LOCK), so `max_queued`
  holds for the whole cluster.
- **One round trip per write**: each is one statement (a data-modifying CTE), `append_events`
  included: the holder check, the numbering check and the batch's insert (`unnest`) together; only
  a refused append reads the run again, to say why.
- **Announcements**: every write a follower waits for calls `pg_notify` on CHANNEL in its own
  statement, so inside its transaction: PostgreSQL delivers it at commit, never before the rows are
  visible. The payload is the response id and what changed (`events`, `ended`, `cancel`,
  `queued`, `claimed`). Each store listens on one connection of its own (not the pool's: it is
  held for the store's life), opened on the first `wait`/`wait_queued`/`claim` and reopened with
  backoff after it drops (logged once a minute at most). Followers are woken when it drops and when
  it is back, since anything may have changed unheard meanwhile; a lost notification costs a
  follower at most its timeout. So a replica uses up to the pool's size plus one connection.

Events count toward the store's byte bound and their owner's stored bytes (schema version 6, a
generated size column under the store's size trigger), and go with their run: `purge_finished`'s
keep time after it ended, or at once when their response is deleted or evicted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

import asyncpg

from gateway.store.owners import owner_prefix
from gateway.store.postgres.database import FAULTS, RUN_QUEUE_LOCK, Conn, PostgresDatabase
from gateway.store.run_waits import QUEUE, Announcements
from gateway.store.runs import (
    TERMINAL,
    LostRunError,
    OwnerQueueFullError,
    QueueFullError,
    Run,
    RunStore,
    append_refusal,
)

log = logging.getLogger("agent_gateway.store")

CHANNEL = "agent_gateway_runs"
#: how the listener connection shows in pg_stat_activity
APPLICATION_NAME = "agent-gateway runs listener"
#: the listener's health check when nothing arrives (a network that drops silently sends no FIN)
PING_SECONDS = 30.0
#: at most one warning about a dropped listener per this many seconds
LOG_EVERY = 60.0

_COLUMNS = "response_id, owner, status, replica, cancel_requested, request, last_seq"
_R_COLUMNS = ", ".join("r." + c for c in _COLUMNS.split(", "))
_LEASE = "clock_timestamp() + make_interval(secs => {})"


def _told(what: str) -> str:
    return f"pg_notify('{CHANNEL}', response_id || ' {what}')"


_GET = f"SELECT {_COLUMNS} FROM background_runs WHERE response_id = $1"
_BEGIN = (f"WITH made AS (INSERT INTO background_runs (response_id, owner, status, replica, lease_until, request)"
          f" VALUES ($1, $2, 'in_progress', $3, {_LEASE.format('$4')}, ''::bytea)"
          " ON CONFLICT (response_id) DO NOTHING RETURNING response_id)"
          f" SELECT {_told('claimed')} FROM made")
_QUEUED = "SELECT count(*) FROM background_runs WHERE status = 'queued'"
_QUEUED_OF = "SELECT count(*) FROM background_runs WHERE status = 'queued' AND owner = $1"
_ENQUEUE = ("WITH made AS (INSERT INTO background_runs (response_id, owner, status, request)"
            " VALUES ($1, $2, 'queued', $3) ON CONFLICT (response_id) DO NOTHING RETURNING response_id)"
            f" SELECT {_told('queued')} FROM made")
# $3: the owner prefix of the claiming profile (NULL: any), so a replica runs only its own profile's runs
_CLAIM = ("WITH next AS (SELECT response_id FROM background_runs WHERE status = 'queued'"
          " AND ($3::text IS NULL OR starts_with(owner, $3::text))"
          " AND NOT (owner = ANY($4::text[]))"
          " ORDER BY created_at, response_id LIMIT 1 FOR UPDATE SKIP LOCKED),"
          f" claimed AS (UPDATE background_runs r SET status = 'in_progress', replica = $1,"
          f" lease_until = {_LEASE.format('$2')} FROM next WHERE r.response_id = next.response_id"
          f" RETURNING {_R_COLUMNS})"
          f" SELECT {_COLUMNS}, {_told('claimed')} FROM claimed")
_RENEW = (f"UPDATE background_runs SET lease_until = {_LEASE.format('$3')}"
          " WHERE response_id = ANY($2::text[]) AND replica = $1 AND status = 'in_progress'"
          " RETURNING response_id, cancel_requested")
# $2: the first event's number, $3: the frames; the run's row is locked by the UPDATE, so the
# holder and the numbering checked are those the insert goes on from
_APPEND = ("WITH run AS (UPDATE background_runs SET last_seq = $2 + cardinality($3::bytea[]) - 1"
           " WHERE response_id = $1 AND replica = $4 AND status = 'in_progress' AND last_seq = $2 - 1"
           " RETURNING response_id),"
           " stored AS (INSERT INTO background_events (response_id, seq, frame)"
           " SELECT run.response_id, $2 + f.n - 1, f.frame FROM run, unnest($3::bytea[]) WITH ORDINALITY AS f(frame, n)"
           " RETURNING 1)"
           f" SELECT (SELECT count(*) FROM stored), {_told('events')} FROM run")
_EVENTS = "SELECT seq, frame FROM background_events WHERE response_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
_FINISH = ("WITH ended AS (UPDATE background_runs SET status = $3, replica = '', lease_until = NULL,"
           " ended_at = clock_timestamp() WHERE response_id = $1 AND replica = $2 AND status = 'in_progress'"
           f" RETURNING response_id) SELECT {_told('ended')} FROM ended")
# a queued run ends at once; a running one is marked for its holder (the CASEs read the row as it
# is when the UPDATE gets it, so a cancel racing a claim marks the claimed run)
_CANCEL = ("WITH marked AS (UPDATE background_runs SET cancel_requested = true,"
           " status = CASE WHEN status = 'queued' THEN 'cancelled' ELSE status END,"
           " ended_at = CASE WHEN status = 'queued' THEN clock_timestamp() ELSE ended_at END"
           f" WHERE response_id = $1 AND status IN ('queued', 'in_progress') RETURNING {_COLUMNS})"
           f" SELECT {_COLUMNS}, {_told('cancel')} FROM marked")
# now() (the statement's start, here) rather than clock_timestamp() where a scan compares times:
# a stable value bounds an index scan, a volatile one is a filter over every row of the index
_EXPIRE = ("WITH stale AS (SELECT response_id, replica FROM background_runs WHERE status = 'in_progress'"
           " AND lease_until <= now() FOR UPDATE SKIP LOCKED),"
           " failed AS (UPDATE background_runs r SET status = 'failed', replica = '', lease_until = NULL,"
           " ended_at = clock_timestamp() FROM stale WHERE r.response_id = stale.response_id"
           " RETURNING r.response_id, r.owner, r.status, stale.replica, r.cancel_requested, r.request, r.last_seq)"
           f" SELECT {_COLUMNS}, {_told('ended')} FROM failed ORDER BY response_id")
_PURGE = ("DELETE FROM background_runs WHERE ended_at IS NOT NULL"
          " AND ended_at <= now() - make_interval(secs => $1)")


class PostgresRuns(RunStore):
    def __init__(self, database: PostgresDatabase, profile: str | None = None) -> None:
        self.database = database
        self._claims = owner_prefix(profile)
        self._announcements = Announcements()
        self._listening: asyncio.Task[None] | None = None
        self._closed = False
        self._warned_at = -LOG_EVERY
        self._dropped = False

    async def begin(self, response_id: str, owner: str, *, replica: str, lease_seconds: float) -> None:
        made = await self.database.run(lambda conn: conn.fetch(_BEGIN, response_id, owner, replica,
                                                               float(lease_seconds)))
        if not made:
            raise ValueError(f"a run of {response_id} is stored already")

    async def enqueue(self, response_id: str, owner: str, request: bytes, *, max_queued: int,
                      max_per_owner: int | None = None) -> None:
        async with self.database.transaction() as conn:
            await conn.execute("SELECT pg_advisory_xact_lock($1)", RUN_QUEUE_LOCK)
            queued = int(await conn.fetchval(_QUEUED))
            if queued >= max_queued:
                raise QueueFullError.of(queued)
            if max_per_owner is not None:
                of_owner = int(await conn.fetchval(_QUEUED_OF, owner))
                if of_owner >= max_per_owner:
                    raise OwnerQueueFullError.of_owner(of_owner)
            made = await conn.fetch(_ENQUEUE, response_id, owner, request)
        if not made:
            raise ValueError(f"a run of {response_id} is stored already")

    async def claim(self, *, replica: str, lease_seconds: float, skip_owners: Sequence[str] = ()) -> Run | None:
        self._listen()
        self._announcements.seen(QUEUE)
        skipped = list(skip_owners)
        row = await self.database.run(lambda conn: conn.fetchrow(_CLAIM, replica, float(lease_seconds), self._claims,
                                                                 skipped))
        return Run.from_row(row) if row is not None else None

    async def renew(self, replica: str, response_ids: list[str], *, lease_seconds: float) -> dict[str, bool]:
        if not response_ids:
            return {}
        rows = await self.database.run(lambda conn: conn.fetch(_RENEW, replica, response_ids, float(lease_seconds)))
        return {row[0]: bool(row[1]) for row in rows}

    async def append_events(self, response_id: str, first_seq: int, frames: list[bytes], *,
                            replica: str) -> None:
        if not frames:
            return

        async def body(conn: Conn) -> Exception | None:
            if await conn.fetchrow(_APPEND, response_id, first_seq, frames, replica) is not None:
                return None
            row = await conn.fetchrow(_GET, response_id)  # refused: say why
            return append_refusal(response_id, first_seq, replica, Run.from_row(row) if row is not None else None)

        refused = await self.database.run(body)
        if refused is not None:
            raise refused

    async def events_after(self, response_id: str, after: int, *, limit: int = 1000) -> list[tuple[int, bytes]]:
        self._announcements.seen(response_id)
        rows = await self.database.run(lambda conn: conn.fetch(_EVENTS, response_id, after, limit))
        return [(int(row[0]), bytes(row[1])) for row in rows]

    async def get(self, response_id: str) -> Run | None:
        self._announcements.seen(response_id)
        row = await self.database.run(lambda conn: conn.fetchrow(_GET, response_id))
        return Run.from_row(row) if row is not None else None

    async def finish(self, response_id: str, status: str, *, replica: str) -> None:
        if status not in TERMINAL:
            raise ValueError(f"a run ends with one of {sorted(TERMINAL)}, not {status!r}")
        ended = await self.database.run(lambda conn: conn.fetch(_FINISH, response_id, replica, status))
        if not ended:
            raise LostRunError(f"replica {replica} no longer holds the run of {response_id}")

    async def request_cancel(self, response_id: str) -> Run | None:
        async def body(conn: Conn) -> Any:
            row = await conn.fetchrow(_CANCEL, response_id)
            return row if row is not None else await conn.fetchrow(_GET, response_id)  # finished, or unknown

        row = await self.database.run(body)
        return Run.from_row(row) if row is not None else None

    async def expire(self) -> list[Run]:
        rows = await self.database.run(lambda conn: conn.fetch(_EXPIRE))
        return [Run.from_row(row) for row in rows]

    async def purge_finished(self, keep_seconds: float) -> int:
        status = await self.database.run(lambda conn: conn.execute(_PURGE, float(keep_seconds)))
        return int(status.split()[-1])

    async def wait(self, response_id: str, timeout: float) -> None:
        self._listen()
        await self._announcements.wait(response_id, timeout)

    async def wait_queued(self, timeout: float) -> None:
        self._listen()
        await self._announcements.wait(QUEUE, timeout)

    # ---- the LISTEN connection -------------------------------------------------------------

    def _listen(self) -> None:
        if not self._closed and (self._listening is None or self._listening.done()):
            self._listening = asyncio.get_running_loop().create_task(self._keep_listening())

    def _heard(self, _conn: Any, _pid: int, _channel: str, payload: object) -> None:
        response_id, _, what = str(payload).partition(" ")
        self._announcements.announce(response_id)
        if what in ("queued", "ended"):  # a run to take, or a slot free
            self._announcements.announce(QUEUE)

    async def _keep_listening(self) -> None:
        delay = 0.5
        while not self._closed:
            try:
                await self._listen_once()
                delay = 0.5
            except FAULTS as exc:
                self._lost(exc)
            self._announcements.announce_all()  # what changed while not listening went unheard
            if self._closed:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def _listen_once(self) -> None:
        conn: asyncpg.Connection[Any] = await asyncpg.connect(
            self.database.url, timeout=self.database.connect_timeout,
            server_settings={"application_name": APPLICATION_NAME})
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        try:
            await conn.add_listener(CHANNEL, self._heard)
            self._announcements.announce_all()  # changes before the LISTEN were not heard
            if self._dropped:
                self._dropped = False
                log.info("the background runs' LISTEN connection to %s is back", self.database.where)
            while not lost.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(lost.wait(), PING_SECONDS)
                if not lost.is_set():
                    await asyncio.wait_for(conn.fetchval("SELECT 1"), self.database.connect_timeout)
            raise ConnectionResetError("the server closed the connection")
        finally:
            conn.terminate()

    def _lost(self, exc: BaseException) -> None:
        self._dropped = True
        now = time.monotonic()
        if now - self._warned_at >= LOG_EVERY:
            self._warned_at = now
            log.warning("the background runs' LISTEN connection dropped (%s); followers fall back to their "
                        "timeouts until it is back", self.database.fail(exc).detail)

    async def close(self) -> None:
        self._closed = True
        listening, self._listening = self._listening, None
        if listening is not None:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening
        self._announcements.announce_all()
