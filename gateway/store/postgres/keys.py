"""The keys and their usage in the PostgreSQL database every replica shares (store/keys.py)."""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.store.keys import (
    COUNTERS,
    KEY_COLUMNS,
    UPDATABLE,
    ApiKey,
    DayUsage,
    DuplicateKeyError,
    KeyStore,
    KeyUsage,
    UsageDelta,
    UsageWrite,
    column_value,
    day_from_row,
    key_from_row,
)
from gateway.store.owners import key_name_of
from gateway.store.postgres.database import Conn, PostgresDatabase

_KEY_COLUMNS = ", ".join(KEY_COLUMNS)
_COUNTS = ", ".join(COUNTERS)


def _marks(first: int, count: int) -> str:
    return ", ".join(f"${n}" for n in range(first, first + count))


_ADD_USAGE = (
    f"INSERT INTO key_usage (profile, name, {_COUNTS}, last_used_at)"
    f" VALUES ($1, $2, {_marks(3, len(COUNTERS))}, ${3 + len(COUNTERS)})"
    " ON CONFLICT (profile, name) DO UPDATE SET "
    + ", ".join(f"{c} = key_usage.{c} + excluded.{c}" for c in COUNTERS)
    + ", last_used_at = greatest(key_usage.last_used_at, excluded.last_used_at)"
)
_ADD_DAY = (
    f"INSERT INTO key_usage_days (profile, name, day, {_COUNTS}) VALUES ($1, $2, $3, {_marks(4, len(COUNTERS))})"
    " ON CONFLICT (profile, day, name) DO UPDATE SET "
    + ", ".join(f"{c} = key_usage_days.{c} + excluded.{c}" for c in COUNTERS)
)
_SET_STORED = (
    "INSERT INTO key_usage_days (profile, name, day, stored_bytes) VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (profile, day, name) DO UPDATE SET stored_bytes = excluded.stored_bytes"
)
# one row per owner (a conversation object's row is summed into its owner's, not returned alone)
_STORED = (
    "SELECT owner, sum(bytes) FROM (SELECT owner, bytes FROM owner_usage WHERE owner >= $1 AND owner < $2"
    " UNION ALL SELECT o.owner, o.bytes + (SELECT coalesce(sum(i.bytes), 0) FROM conversation_items i"
    " WHERE i.conversation_id = o.id) FROM conversation_objects o WHERE o.owner >= $1 AND o.owner < $2"
    " UNION ALL SELECT r.owner, e.bytes FROM background_runs r JOIN background_events e"
    " ON e.response_id = r.response_id WHERE r.owner >= $1 AND r.owner < $2"
    " UNION ALL SELECT owner, bytes FROM files WHERE owner >= $1 AND owner < $2) AS s"
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
                                   f" VALUES ($1, {_marks(2, len(KEY_COLUMNS))})",
                                   self.profile, *(column_value(c, getattr(key, c)) for c in KEY_COLUMNS))
            except asyncpg.UniqueViolationError as exc:
                raise DuplicateKeyError(f"a key named '{key.name}' already exists in this profile (revoked "
                                        "names are not reused); choose another name") from exc

        await self.database.run(body)

    async def keys(self) -> list[ApiKey]:
        rows = await self.database.run(lambda conn: conn.fetch(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE profile = $1 ORDER BY name", self.profile))
        return [key_from_row(row) for row in rows]

    async def keys_version(self) -> int:
        version = await self.database.run(lambda conn: conn.fetchval(
            "SELECT version FROM key_changes WHERE profile = $1", self.profile))
        return int(version) if version is not None else 0

    async def revoke(self, name: str, at: int) -> bool:
        status = await self.database.run(lambda conn: conn.execute(
            "UPDATE api_keys SET revoked_at = $1 WHERE profile = $2 AND name = $3 AND revoked_at IS NULL",
            at, self.profile, name))
        return bool(status != "UPDATE 0")

    async def update(self, name: str, changes: dict[str, Any]) -> bool:
        columns = sorted(changes)
        if not set(columns) <= UPDATABLE:
            raise ValueError(f"not updatable: {sorted(set(columns) - UPDATABLE)}")
        sets = ", ".join(f"{c} = ${n}" for n, c in enumerate(columns, start=3)) or "name = name"
        status = await self.database.run(lambda conn: conn.execute(
            f"UPDATE api_keys SET {sets} WHERE profile = $1 AND name = $2 AND revoked_at IS NULL",
            self.profile, name, *(column_value(c, changes[c]) for c in columns)))
        return bool(status != "UPDATE 0")

    async def add_usage(self, deltas: dict[str, UsageDelta] | UsageWrite) -> None:
        write = deltas if isinstance(deltas, UsageWrite) else UsageWrite(deltas, None)
        counts = sorted(write.deltas.items())  # two replicas lock rows in one order
        statements: list[tuple[str, list[tuple[Any, ...]]]] = []
        if counts:
            statements.append((_ADD_USAGE, [(self.profile, name, *(getattr(d, c) for c in COUNTERS),
                                             d.last_used_at or None) for name, d in counts]))
        if write.day is not None:
            if counts:
                statements.append((_ADD_DAY, [(self.profile, name, write.day, *(getattr(d, c) for c in COUNTERS))
                                              for name, d in counts]))
            if write.stored:
                statements.append((_SET_STORED, [(self.profile, name, write.day, size)
                                                 for name, size in sorted(write.stored.items())]))
            if write.keep_from is not None:
                statements.append(("DELETE FROM key_usage_days WHERE profile = $1 AND day < $2",
                                   [(self.profile, write.keep_from)]))
        if not statements:
            return

        async def body(conn: Conn) -> None:
            async with conn.transaction():
                for sql, rows in statements:
                    await conn.executemany(sql, rows)

        await self.database.run(body)

    async def usage_days(self, name: str | None, since: str) -> list[DayUsage]:
        where, parameters = "profile = $1 AND day >= $2", [self.profile, since]
        if name is not None:
            where, parameters = where + " AND name = $3", [*parameters, name]
        rows = await self.database.run(lambda conn: conn.fetch(
            f"SELECT name, day, {_COUNTS}, stored_bytes FROM key_usage_days WHERE {where} ORDER BY day, name",
            *parameters))
        return [day_from_row(row) for row in rows]

    async def usage(self) -> dict[str, KeyUsage]:
        low, high = self._owner_range()

        async def body(conn: Conn) -> tuple[list[asyncpg.Record], list[asyncpg.Record]]:
            counted = await conn.fetch(f"SELECT name, {_COUNTS}, last_used_at FROM key_usage"
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
    n = len(COUNTERS)
    return UsageDelta(**{c: int(v) for c, v in zip(COUNTERS, row[1:1 + n], strict=True)},
                      last_used_at=row[1 + n] or 0)
