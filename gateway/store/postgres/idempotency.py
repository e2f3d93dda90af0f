"""Idempotency-Key entries in PostgreSQL, shared by every replica on the database.

The same two calls as the in-memory cache (`store/idempotency.py`). A key's row is claimed by one
statement (insert, or take over an expired row), so of two duplicates racing on two replicas
exactly one runs the agent. The other polls the row until the first one's reply is there (then
replays it byte for byte) for at most `wait` seconds; past that it gets 409 with Retry-After.

A claimed row carries a lease (`lease` seconds, the agent's run timeout and a margin): a replica
killed mid-run leaves its claim behind, and that key runs again once the lease is over.

Kept replies have the in-memory cache's bounds, for the whole cluster: each owner's share
(`max_owner_entries`, `max_owner_bytes`, its oldest dropped first) and at most `max_entries` of
them and `max_bytes` of bodies and headers in all (the owner with the most bytes dropped first),
after each keep; a reply over its owner's share on its own is not kept (its duplicates then run
again). With only a TTL, ten 9 MB replies grew the table from 3.3 to 92 MB.
"""

from __future__ import annotations

import asyncio
import json
import logging

from gateway.errors import ConflictError
from gateway.store.api import StoreUnavailableError
from gateway.store.idempotency import (
    MAX_BYTES,
    MAX_ENTRIES,
    MAX_OWNER_BYTES,
    MAX_OWNER_ENTRIES,
    CachedReply,
    _check_same_body,
)
from gateway.store.postgres.database import PostgresDatabase

log = logging.getLogger("agent_gateway.idempotency")

_CLAIM = (
    "INSERT INTO idempotency (key, fingerprint, expires_at)"
    " VALUES ($1, $2, now() + make_interval(secs => $3))"
    " ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, status = NULL, body = NULL,"
    " headers = NULL, expires_at = excluded.expires_at WHERE idempotency.expires_at <= now()"
    " RETURNING key"
)
_LOOK = "SELECT fingerprint, status, body, headers FROM idempotency WHERE key = $1 AND expires_at > now()"
_KEEP = ("UPDATE idempotency SET status = $2, body = $3, headers = $4,"
         " expires_at = now() + make_interval(secs => $5) WHERE key = $1 AND status IS NULL")
_DROP = "DELETE FROM idempotency WHERE key = $1 AND status IS NULL"
_SWEEP = ("DELETE FROM idempotency WHERE key IN"
          " (SELECT key FROM idempotency WHERE expires_at <= now() LIMIT 100)")
# The kept replies beyond the bounds go, in one statement: first each owner's beyond its share ($3
# entries, $4 bytes; newest kept first), then, of what is left, beyond $1 entries or $2 bytes in all,
# the owner with the most bytes first, its oldest first (kept in order: smallest owners, newest first;
# owners of equal bytes by age).
# The owner is the cache key's scope, before its first newline (store/idempotency.py owner_of_key).
_OWNER = "CASE WHEN strpos(key, E'\\n') > 0 THEN split_part(key, E'\\n', 1) ELSE '' END"
_TRIM = (
    "WITH sized AS (SELECT key, expires_at, octet_length(body) + octet_length(headers) AS size,"
    f" {_OWNER} AS owner FROM idempotency WHERE status IS NOT NULL),"
    " shared AS (SELECT key, expires_at, size, owner, row_number() OVER mine AS n, sum(size) OVER mine AS bytes"
    " FROM sized WINDOW mine AS (PARTITION BY owner ORDER BY expires_at DESC, key DESC)),"
    " within AS (SELECT key, expires_at, size, owner, sum(size) OVER (PARTITION BY owner) AS owner_bytes"
    " FROM shared WHERE n <= $3 AND bytes <= $4),"
    " kept AS (SELECT key FROM (SELECT key, row_number() OVER all_ AS n, sum(size) OVER all_ AS bytes FROM within"
    " WINDOW all_ AS (ORDER BY owner_bytes, expires_at DESC, key DESC)) AS ranked WHERE n <= $1 AND bytes <= $2)"
    " DELETE FROM idempotency WHERE status IS NOT NULL AND key NOT IN (SELECT key FROM kept)"
)


class IdempotencyInProgressError(ConflictError):
    """A duplicate waited its bound for the first request (on any replica) to finish: 409."""

    code = "idempotency_in_progress"


class PostgresIdempotencyCache:
    def __init__(self, database: PostgresDatabase, *, ttl: float = 300.0, lease: float = 630.0,
                 wait: float = 60.0, poll: float = 0.1, max_entries: int = MAX_ENTRIES,
                 max_bytes: int = MAX_BYTES, max_owner_entries: int = MAX_OWNER_ENTRIES,
                 max_owner_bytes: int = MAX_OWNER_BYTES) -> None:
        self.database = database
        self.ttl, self.lease, self.wait, self.poll = ttl, lease, wait, poll
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.max_owner_entries = min(max_owner_entries, max_entries)
        self.max_owner_bytes = min(max_owner_bytes, max_bytes)

    async def acquire(self, key: str, fingerprint: str) -> CachedReply | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait
        delay = self.poll
        while True:
            claimed = await self.database.run(lambda conn: conn.fetchval(_CLAIM, key, fingerprint, self.lease))
            if claimed is not None:
                return None
            row = await self.database.run(lambda conn: conn.fetchrow(_LOOK, key))
            if row is None:
                continue  # expired or released between the two statements: claim again
            _check_same_body(row["fingerprint"], fingerprint)
            if row["status"] is not None:
                headers = tuple((str(k), str(v)) for k, v in json.loads(row["headers"]))
                return CachedReply(status=row["status"], body=bytes(row["body"]), headers=headers,
                                   fingerprint=row["fingerprint"])
            if loop.time() + delay > deadline:
                raise IdempotencyInProgressError(
                    "A request with this Idempotency-Key is still running; retry later to get its reply.",
                    param=None, retry_after=max(1.0, self.poll * 10))
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    async def release(self, key: str, reply: CachedReply | None) -> None:
        keep = reply is not None and self.ttl > 0 and reply.size <= self.max_owner_bytes
        try:
            if reply is not None and keep:
                headers = json.dumps([list(pair) for pair in reply.headers])
                await self.database.run(lambda conn: conn.execute(
                    _KEEP, key, reply.status, reply.body, headers, self.ttl))
                await self.database.run(lambda conn: conn.execute(
                    _TRIM, self.max_entries, self.max_bytes, self.max_owner_entries, self.max_owner_bytes))
            else:
                await self.database.run(lambda conn: conn.execute(_DROP, key))
            await self.database.run(lambda conn: conn.execute(_SWEEP))
        except StoreUnavailableError as exc:
            # the reply itself was made; only its replay is lost (the claim ends with its lease)
            log.warning("an Idempotency-Key reply was not kept: %s", exc.detail)
