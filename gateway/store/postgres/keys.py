"""The keys and their usage in the PostgreSQL database every replica shares (store/keys.py)."""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.store.keys import COUNTERS, ApiKey, DuplicateKeyError, KeyStore, KeyUsage, UsageDelta
from gateway.store.owners import key_name_of
from gateway.store.postgres.database import Conn, PostgresDatabase

_KEY_COLUMNS = ("name, key_hash, created_at, expires_at, revoked_at, rpm, max_concurrent, max_stored_bytes, tpm,"
                " token_budget, budget_period")
_ADD_USAGE = (
    f"INSERT INTO key_usage (profile, name, {', '.join(COUNTERS)}, last_used_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
    " ON CONFLICT (profile, name) DO UPDATE SET "
    + ", ".join(f"{c} = key_usage.{c} + excluded.{c}" for c in COUNTERS)
    + ", last_used_at = greatest(key_usage.last_used_at, excluded.last_used_at)"
)
# one row per owner (a conversation object's row is summed into its owner's, not returned alone)
_STORED = (
    "SELECT owner, sum(bytes) FROM (SELECT owner, bytes FROM responses WHERE owner >= $1 AND owner < $2"
    " UNION ALL SELECT o.owner, o.bytes + (SELECT coalesce(sum(i.bytes), 0) FROM conversation_items i"
    " WHERE i.conversation_id = o.id) FROM conversation_objects o WHERE o.owner >= $1 AND o.owner < $2"
    " UNION ALL SELECT r.owner, e.bytes FROM background_runs r JOIN background_events e"
    " ON e.response_id = r.response_id WHERE r.owner >= $1 AND r.owner < $2) AS s"
    " GROUP BY owner"
)


class PostgresKeyStore(KeyStore):
    def __init__(self, database: PostgresDatabase, profile: str) -> None:
        self.database = database
        self.profile = profile

    async def open(self) -> None:
        await self.database.open()

    async def close(self) -> None:
        pass  # the database is the response store's: it closes it

    async def create(self, key: ApiKey) -> None:
        async def body(conn: Conn) -> None:
            try:
                await conn.execute(f"INSERT INTO api_keys (profile, {_KEY_COLUMNS})"
                                   " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                                   self.profile, key.name, key.key_hash, key.created_at, key.expires_at,
                                   key.revoked_at, key.rpm, key.max_concurrent, key.max_stored_bytes, key.tpm,
                                   key.token_budget, key.budget_period)
            except asyncpg.UniqueViolationError as exc:
                raise DuplicateKeyError(f"a key named '{key.name}' already exists in this profile (revoked "
                                        "names are not reused); choose another name") from exc

        await self.database.run(body)

    async def keys(self) -> list[ApiKey]:
        rows = await self.database.run(lambda conn: conn.fetch(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE profile = $1 ORDER BY name", self.profile))
        return [ApiKey(*row) for row in rows]

    async def revoke(self, name: str, at: int) -> bool:
        status = await self.database.run(lambda conn: conn.execute(
            "UPDATE api_keys SET revoked_at = $1 WHERE profile = $2 AND name = $3 AND revoked_at IS NULL",
            at, self.profile, name))
        return bool(status != "UPDATE 0")

    async def add_usage(self, deltas: dict[str, UsageDelta]) -> None:
        if not deltas:
            return
        rows = [(self.profile, name, *(getattr(d, c) for c in COUNTERS), d.last_used_at or None)
                for name, d in sorted(deltas.items())]  # sorted: two replicas lock rows in one order

        async def body(conn: Conn) -> None:
            async with conn.transaction():
                await conn.executemany(_ADD_USAGE, rows)

        await self.database.run(body)

    async def usage(self) -> dict[str, KeyUsage]:
        low, high = self._owner_range()

        async def body(conn: Conn) -> tuple[list[asyncpg.Record], list[asyncpg.Record]]:
            counted = await conn.fetch(f"SELECT name, {', '.join(COUNTERS)}, last_used_at FROM key_usage"
                                       " WHERE profile = $1", self.profile)
            return list(counted), list(await conn.fetch(_STORED, low, high))

        counted, stored = await self.database.run(body)
        found: dict[str, KeyUsage] = {}
        for row in counted:
            found[row[0]] = KeyUsage(row[0], _delta(row))
        for owner, size in stored:
            name = key_name_of(owner)
            found.setdefault(name, KeyUsage(name)).stored_bytes += int(size or 0)
        return found


    async def budgets(self, periods: dict[str, int]) -> dict[str, int]:
        if not periods:
            return {}
        names = sorted(periods)
        rows = await self.database.run(lambda conn: conn.fetch(
            "SELECT b.name, b.tokens FROM key_budgets b JOIN unnest($2::text[], $3::bigint[]) AS p(name, start)"
            " ON b.name = p.name AND b.period_start = p.start WHERE b.profile = $1",
            self.profile, names, [periods[n] for n in names]))
        return {row[0]: int(row[1]) for row in rows}

    async def add_budgets(self, deltas: dict[tuple[str, int], int]) -> None:
        if not deltas:
            return
        rows = [(self.profile, name, start, tokens) for (name, start), tokens in sorted(deltas.items())]

        async def body(conn: Conn) -> None:
            async with conn.transaction():
                await conn.executemany(_ADD_BUDGET, rows)

        await self.database.run(body)

_ADD_BUDGET = ("INSERT INTO key_budgets (profile, name, period_start, tokens) VALUES ($1, $2, $3, $4)"
               " ON CONFLICT (profile, name, period_start) DO UPDATE SET tokens = key_budgets.tokens + excluded.tokens")


def _delta(row: Any) -> UsageDelta:
    return UsageDelta(**{c: int(v) for c, v in zip(COUNTERS, row[1:6], strict=True)}, last_used_at=row[6] or 0)
