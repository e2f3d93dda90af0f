"""One PostgreSQL database shared by every replica: the asyncpg pool, the schema's migration (its steps
are store/postgres/schema.py),
and the translation of any database fault into `StoreUnavailableError` (503 + Retry-After).

The response store (`store/postgres/store.py`) and the Idempotency-Key cache (`store/postgres/idempotency.py`)
share one `PostgresDatabase`, so one pool and one schema.

Why asyncpg rather than psycopg 3 with its pool: in one run against one throwaway cluster, a
put+get loop was faster with asyncpg at c=1 and clearly faster at c=16 (bench/pg_driver.py,
figures in bench/README.md), and it is asyncio-native with a pool that replaces broken connections
by itself (a restarted server heals without a gateway restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, TypeAlias, TypeVar

import asyncpg

from gateway.common.redact import redact_url, scrub
from gateway.errors import UnstorableValueError
from gateway.store.api import SchemaVersionError, StoreUnavailableError
from gateway.store.owners import DEFAULT_OWNER
from gateway.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

T = TypeVar("T")
#: A connection lent by the pool.
Conn: TypeAlias = "PoolConnectionProxy[asyncpg.Record]"
log = logging.getLogger("agent_gateway.store")

#: pg_advisory_xact_lock keys: schema migration, and the writes that must see each other
#: (the LRU bound and conversation heads hold for the whole cluster).
MIGRATION_LOCK = 0x6167_7701
WRITE_LOCK = 0x6167_7702
#: background runs: an enqueue's count of the queue and its insert, as one (store/postgres/runs.py)
RUN_QUEUE_LOCK = 0x6167_7703

#: connections `fetchrow_kept` keeps out of the pool: enough for admissions one after the other,
#: few enough to leave the pool's others to everything else (more at once take the pool's way)
KEPT = 2

# InternalClientError: a connection broken mid-operation (a server restart) as asyncpg finds it
FAULTS = (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError, TimeoutError)
#: What PostgreSQL refuses as data, not as an outage: a NUL or a value its type rejects (SQLSTATE
#: class 22), a key over the btree row limit (class 54). The client's doing: a 400, never a 503,
#: which the SDKs would retry and a load balancer would count against the replica. Caught before FAULTS.
REFUSED_DATA = (asyncpg.DataError, asyncpg.ProgramLimitExceededError)


def describe_url(url: str) -> str:
    """Where the database is, for messages: the URL with its password masked."""
    return redact_url(url)


class PostgresDatabase:
    """The pool, opened lazily and healed by itself. Until the schema is reachable every
    operation is a 503; a background task retries with backoff meanwhile (`start`)."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10,
                 connect_timeout: float = 5.0, command_timeout: float = 30.0,
                 legacy_owner: str = DEFAULT_OWNER) -> None:
        self.url = url
        self.legacy_owner = legacy_owner  # who owns the rows of a database made before owners
        self.where = describe_url(url)
        self.min_size, self.max_size = min_size, max_size
        self.connect_timeout, self.command_timeout = connect_timeout, command_timeout
        self._pool: asyncpg.Pool | None = None
        self._lock = asyncio.Lock()
        self._retrying: asyncio.Task[None] | None = None
        self._closed = False
        self.last_error = "not connected yet"
        #: pooled connections kept out of the pool between `fetchrow_kept` calls: at most KEPT, and
        #: a quarter of the pool at most (a small pool keeps none: everything else needs it)
        self._kept: list[Conn] = []
        self._keep = min(KEPT, max_size // 4)

    def unavailable(self, what: str) -> StoreUnavailableError:
        return StoreUnavailableError(f"The PostgreSQL store at {self.where} is unavailable: {what}.",
                                     retry_after=2)

    def fail(self, exc: BaseException) -> StoreUnavailableError:
        # never the password, whatever the driver said: the URL masked, each of its secrets too
        return self.unavailable(scrub(str(exc).strip() or type(exc).__name__, self.url))

    def refused(self, exc: BaseException) -> UnstorableValueError:
        said = scrub(str(exc).strip() or type(exc).__name__, self.url)
        return UnstorableValueError(f"PostgreSQL refused a value: {said}")

    async def open(self) -> None:
        """Connect and migrate; raises StoreUnavailableError (then retried in the background) or
        SchemaVersionError (the database is newer than this gateway: not retried)."""
        self._closed = False
        try:
            await self._ensure()
        except StoreUnavailableError:
            self._start_retrying()
            raise

    def _start_retrying(self) -> None:
        if self._retrying is None or self._retrying.done():
            self._retrying = asyncio.get_running_loop().create_task(self._retry())

    async def _retry(self) -> None:
        delay = 0.5
        while not self._closed and self._pool is None:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)
            try:
                await self._ensure()
            except StoreUnavailableError:
                continue
            except SchemaVersionError as exc:
                log.error("%s", exc)
                self.last_error = str(exc)
                return
            log.info("the PostgreSQL store at %s is reachable again", self.where)

    async def _ensure(self) -> asyncpg.Pool:
        if self._pool is not None:
            return self._pool
        async with self._lock:
            if self._closed:
                raise StoreUnavailableError("The response store is closed.")
            if self._pool is not None:
                return self._pool
            pool: asyncpg.Pool | None = None
            try:
                pool = await asyncpg.create_pool(
                    self.url, min_size=self.min_size, max_size=self.max_size,
                    timeout=self.connect_timeout, command_timeout=self.command_timeout, reset=_no_session_state)
                await _migrate(pool, self.where, self.legacy_owner)
            except SchemaVersionError:
                if pool is not None:
                    await pool.close()
                raise
            except (*FAULTS, ValueError) as exc:  # ValueError: a malformed URL
                if pool is not None:
                    pool.terminate()
                self.last_error = str(self.fail(exc))
                raise self.fail(exc) from None
            self._pool = pool
            return pool

    async def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            if self._closed:
                raise StoreUnavailableError("The response store is closed.")
            raise self.unavailable(f"not reachable yet ({self.last_error})")
        return self._pool

    async def check(self) -> None:
        """One round trip: raises StoreUnavailableError unless the database answers now."""
        await self.run(lambda conn: conn.fetchval("SELECT 1"))

    async def run(self, body: Callable[[Conn], Awaitable[T]]) -> T:
        """`body` on a pooled connection; any database fault is a 503."""
        pool = await self.pool()
        try:
            async with pool.acquire() as conn:
                return await body(conn)
        except REFUSED_DATA as exc:
            raise self.refused(exc) from None
        except FAULTS as exc:
            raise self.fail(exc) from None

    async def fetchrow_kept(self, query: str, *args: object) -> asyncpg.Record | None:
        """One statement that leaves nothing behind on its connection (no transaction, no session
        state), on a pooled connection kept out of the pool between calls: a hot path's single round
        trip without asyncpg's acquire and release around it (a proxy and a future per acquire; a
        task, a shield and a timeout per release). A connection whose call failed in any way (a
        fault, a cancellation mid-query) goes back through the pool, which ends or heals it."""
        pool = await self.pool()
        kept = self._kept
        conn = kept.pop() if kept else None
        if conn is not None:
            try:
                closed = conn.is_closed()  # the server went away while it was kept
            except asyncpg.InterfaceError:  # and the pool took it back as it closed
                conn, closed = None, False
            if closed and conn is not None:
                await self._give_back(conn)
                conn = None
        try:
            if conn is None:
                conn = await pool.acquire()
            row = await conn.fetchrow(query, *args)
        except BaseException as exc:
            if conn is not None:
                await self._give_back(conn)
            if isinstance(exc, REFUSED_DATA):
                raise self.refused(exc) from None
            if isinstance(exc, FAULTS):
                raise self.fail(exc) from None
            raise
        if len(kept) < self._keep and self._pool is pool:
            kept.append(conn)
        else:
            await self._give_back(conn)
        return row

    async def _give_back(self, conn: Conn) -> None:
        pool = self._pool
        if pool is not None:
            with contextlib.suppress(*FAULTS):
                await pool.release(conn)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        pool = await self.pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                yield conn
        except REFUSED_DATA as exc:
            raise self.refused(exc) from None
        except FAULTS as exc:
            raise self.fail(exc) from None

    async def close(self) -> None:
        self._closed = True
        if self._retrying is not None:
            self._retrying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retrying
        kept, self._kept = self._kept, []
        for conn in kept:  # the pool's close waits for every connection out of it
            await self._give_back(conn)
        pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(*FAULTS):
                await asyncio.wait_for(pool.close(), 10)


async def _no_session_state(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """The pool's reset of a connection given back, after asyncpg's own (which rolls back a
    transaction left open): nothing more. asyncpg's default sends `SELECT pg_advisory_unlock_all();
    CLOSE ALL; UNLISTEN *; RESET ALL;`, a second round trip after every pooled operation, to undo
    session state this gateway never leaves on a pooled connection: its advisory locks are
    transaction-scoped (pg_advisory_xact_lock), its settings local to a transaction (set_config(...,
    true)), it declares no cursor, and its LISTEN has a connection of its own (postgres/runs.py).
    A change that leaves session state on a pooled connection must undo it itself."""


async def _migrate(pool: asyncpg.Pool, where: str, legacy_owner: str) -> None:
    async with pool.acquire() as conn, conn.transaction():
        # replicas starting together migrate one at a time
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        found = await conn.fetchval("SELECT max(version) FROM schema_version")
        current = int(found) if found is not None else 0
        if current > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"the PostgreSQL store at {where} has schema version {current}, newer than version "
                f"{SCHEMA_VERSION} that this gateway knows: upgrade the gateway")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version]:
                await conn.execute(statement, *((legacy_owner,) if "$1" in statement else ()))
        if current < SCHEMA_VERSION:
            await conn.execute("DELETE FROM schema_version")
            await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", SCHEMA_VERSION)
