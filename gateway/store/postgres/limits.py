"""The limits replicas share, in PostgreSQL (store/limits.py): one function call per admission.

`agent_gateway_admit` takes a transaction-scoped advisory lock of the key (so two replicas
admitting one key take turns; other keys never wait), then reads and writes with a fresh snapshot
per statement (a PL/pgSQL function in READ COMMITTED), so each admission sees every admission
committed before it: the counts are exact, on the database's clock. One statement from the
gateway, so one round trip, whatever the key limits. The tables and the function are in
store/postgres/limit_tables.py (schema v7).
"""

from __future__ import annotations

from gateway.store.limits import Admission, Ask, Correction, LimitStore
from gateway.store.postgres.database import Conn, PostgresDatabase

_ADMIT = "SELECT * FROM agent_gateway_admit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
_MINUTE_FIX = "UPDATE key_admissions SET tokens = tokens + $2 WHERE id = $1"
_MINUTE_ADD = ("INSERT INTO key_admissions (profile, name, at, requests, tokens)"
               " VALUES ($1, $2, extract(epoch FROM clock_timestamp()), 0, $3)")
_BUDGET_ADD = ("INSERT INTO key_budgets AS b (profile, name, period_start, tokens) VALUES ($1, $2, $3, $4)"
               " ON CONFLICT (profile, name, period_start) DO UPDATE SET tokens = b.tokens + excluded.tokens")


_MEASURED = ("INSERT INTO key_store_room AS s (profile, name, measured, measured_at) VALUES ($1, $2, $3, $4)"
             " ON CONFLICT (profile, name) DO UPDATE SET measured = excluded.measured,"
             " measured_at = excluded.measured_at WHERE s.measured_at < excluded.measured_at")
#: how long after its check a write is assumed committed (and so in any measure begun later)
ROOM_GRACE_SECONDS = 5.0


class PostgresLimits(LimitStore):
    def __init__(self, database: PostgresDatabase, replica: str) -> None:
        self.database = database
        self.replica = replica

    async def admit(self, ask: Ask, *, force: bool = False, lease_seconds: float = 10.0) -> Admission:
        # one statement, nothing left on its connection: on a kept connection (database.fetchrow_kept)
        row = await self.database.fetchrow_kept(
            _ADMIT, ask.profile, ask.name, ask.rpm, ask.max_runs, ask.run_id, self.replica, lease_seconds, force,
            ask.tpm, ask.budget, ask.period_start, ask.tokens)
        assert row is not None  # the function returns one row on every path
        # its columns are Admission's fields in order, typed by the function (BIGINT, DOUBLE PRECISION);
        # only a 'tokens' refusal's retry may be NULL
        admission = Admission(*row)
        if admission.retry_after is None:
            admission.retry_after = 1.0
        return admission

    async def release(self, run_ids: list[str]) -> None:
        if run_ids:
            await self.database.run(lambda conn: conn.execute(
                "DELETE FROM key_runs WHERE run_id = ANY($1::text[])", run_ids))

    async def renew(self, run_ids: list[str], lease_seconds: float) -> None:
        if run_ids:
            await self.database.run(lambda conn: conn.execute(
                "UPDATE key_runs SET lease_until = extract(epoch FROM clock_timestamp()) + $2"
                " WHERE run_id = ANY($1::text[])", run_ids, lease_seconds))

    async def reconcile(self, corrections: list[Correction]) -> None:
        fixes = [(c.admission_id, c.tokens) for c in corrections if c.admission_id is not None and c.tokens]
        adds = [(c.profile, c.name, c.tokens) for c in corrections if c.admission_id is None and c.minute and c.tokens]
        budgets = [(c.profile, c.name, c.period_start, c.tokens) for c in corrections
                   if c.period_start is not None and c.tokens]
        if not (fixes or adds or budgets):
            return

        async def body(conn: Conn) -> None:
            async with conn.transaction():
                if fixes:
                    await conn.executemany(_MINUTE_FIX, fixes)
                if adds:
                    await conn.executemany(_MINUTE_ADD, adds)
                if budgets:
                    await conn.executemany(_BUDGET_ADD, sorted(budgets))

        await self.database.run(body)

    async def clock(self) -> float:
        return float(await self.database.run(lambda conn: conn.fetchval(
            "SELECT extract(epoch FROM clock_timestamp())::float8")))

    async def room(self, profile: str, name: str, added: int, limit: int) -> int | None:
        held = await self.database.run(lambda conn: conn.fetchval(
            "SELECT agent_gateway_room($1, $2, $3, $4, $5)", profile, name, added, limit, ROOM_GRACE_SECONDS))
        return None if held is None else int(held)

    async def measured(self, profile: str, sizes: dict[str, int], at: float) -> None:
        if not sizes:
            return
        rows = [(profile, name, size, at) for name, size in sorted(sizes.items())]

        async def body(conn: Conn) -> None:
            async with conn.transaction():
                await conn.executemany(_MEASURED, rows)
                await conn.execute("DELETE FROM key_store_puts WHERE profile = $1 AND name = ANY($2::text[])"
                                   " AND at < $3", profile, sorted(sizes), at - ROOM_GRACE_SECONDS)

        await self.database.run(body)
