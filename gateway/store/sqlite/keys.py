"""The keys and their usage in the profile's SQLite file (store/keys.py), on a connection of their own."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite

from gateway.common.private import private_dir, private_file
from gateway.store.api import StoreUnavailableError
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
from gateway.store.owners import DEFAULT_OWNER, key_name_of
from gateway.store.sqlite.faults import describe
from gateway.store.sqlite.schema import migrate

_KEY_COLUMNS = ", ".join(KEY_COLUMNS)
_KEY_MARKS = ", ".join("?" * len(KEY_COLUMNS))
_COUNTS = ", ".join(COUNTERS)
_MARKS = ", ".join("?" * len(COUNTERS))
_ADD_USAGE = (
    f"INSERT INTO key_usage (profile, name, {_COUNTS}, last_used_at) VALUES (?, ?, {_MARKS}, ?)"
    " ON CONFLICT (profile, name) DO UPDATE SET "
    + ", ".join(f"{c} = key_usage.{c} + excluded.{c}" for c in COUNTERS)
    + ", last_used_at = max(coalesce(key_usage.last_used_at, 0), excluded.last_used_at)"
)
_ADD_DAY = (
    f"INSERT INTO key_usage_days (profile, name, day, {_COUNTS}) VALUES (?, ?, ?, {_MARKS})"
    " ON CONFLICT (profile, day, name) DO UPDATE SET "
    + ", ".join(f"{c} = key_usage_days.{c} + excluded.{c}" for c in COUNTERS)
)
_SET_STORED = (
    "INSERT INTO key_usage_days (profile, name, day, stored_bytes) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (profile, day, name) DO UPDATE SET stored_bytes = excluded.stored_bytes"
)
# one row per owner (a conversation object's row is summed into its owner's, not returned alone)
_STORED = (
    "SELECT owner, sum(bytes) FROM (SELECT owner, bytes FROM owner_usage WHERE owner >= ? AND owner < ?"
    " UNION ALL SELECT o.owner, o.bytes + (SELECT coalesce(sum(i.bytes), 0) FROM conversation_items i"
    " WHERE i.conversation_id = o.id) FROM conversation_objects o WHERE o.owner >= ? AND o.owner < ?"
    " UNION ALL SELECT r.owner, length(e.frame) FROM background_runs r JOIN background_events e"
    " ON e.response_id = r.response_id WHERE r.owner >= ? AND r.owner < ?"
    " UNION ALL SELECT owner, bytes FROM files WHERE owner >= ? AND owner < ?)"
    " GROUP BY owner"
)


class SQLiteKeyStore(KeyStore):
    def __init__(self, path: Path | str, profile: str, *, legacy_owner: str = DEFAULT_OWNER) -> None:
        self.path = Path(path)
        self.profile = profile
        self.legacy_owner = legacy_owner
        self._db: aiosqlite.Connection | None = None

    def _fail(self, exc: sqlite3.Error) -> StoreUnavailableError:
        return StoreUnavailableError(f"The key store at {self.path} is unavailable: {describe(exc)}.", retry_after=5)

    async def open(self) -> None:
        if self._db is not None:
            return
        try:
            private_dir(self.path.parent)
            private_file(self.path)
        except OSError as exc:
            raise StoreUnavailableError(f"The key store at {self.path} is unavailable: cannot create its "
                                        f"directory ({exc.strerror}).") from exc
        try:
            db = await aiosqlite.connect(self.path, isolation_level=None)
            try:
                await db.execute("PRAGMA busy_timeout = 5000")
                await db.execute("PRAGMA journal_mode = WAL")
                await migrate(db, self.path, self.legacy_owner)  # the CLI may be the first to open the file
            except BaseException:
                await db.close()
                raise
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc
        self._db = db

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await db.close()

    async def _run(self, sql: str, parameters: tuple[Any, ...] = ()) -> list[Any]:
        await self.open()
        assert self._db is not None
        try:
            return list(await self._db.execute_fetchall(sql, parameters))
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc

    async def create(self, key: ApiKey) -> None:
        try:
            await self._run(f"INSERT INTO api_keys (profile, {_KEY_COLUMNS}) VALUES (?, {_KEY_MARKS})",
                            (self.profile, *(column_value(c, getattr(key, c)) for c in KEY_COLUMNS)))
        except sqlite3.IntegrityError as exc:
            raise DuplicateKeyError(f"a key named '{key.name}' already exists in this profile (revoked names "
                                    "are not reused); choose another name") from exc

    async def keys(self) -> list[ApiKey]:
        rows = await self._run(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE profile = ? ORDER BY name",
                               (self.profile,))
        return [key_from_row(row) for row in rows]

    async def keys_version(self) -> int:
        rows = await self._run("SELECT version FROM key_changes WHERE profile = ?", (self.profile,))
        return int(rows[0][0]) if rows else 0

    async def revoke(self, name: str, at: int) -> bool:
        await self._run("UPDATE api_keys SET revoked_at = ? WHERE profile = ? AND name = ? AND revoked_at IS NULL",
                        (at, self.profile, name))
        rows = await self._run("SELECT changes()")
        return bool(rows[0][0])

    async def update(self, name: str, changes: dict[str, Any]) -> bool:
        columns = sorted(changes)
        if not set(columns) <= UPDATABLE:
            raise ValueError(f"not updatable: {sorted(set(columns) - UPDATABLE)}")
        if not columns:
            return bool(await self._run("SELECT 1 FROM api_keys WHERE profile = ? AND name = ? AND revoked_at IS NULL",
                                        (self.profile, name)))
        await self._run(f"UPDATE api_keys SET {', '.join(f'{c} = ?' for c in columns)}"
                        " WHERE profile = ? AND name = ? AND revoked_at IS NULL",
                        (*(column_value(c, changes[c]) for c in columns), self.profile, name))
        rows = await self._run("SELECT changes()")
        return bool(rows[0][0])

    async def add_usage(self, deltas: dict[str, UsageDelta] | UsageWrite) -> None:
        write = deltas if isinstance(deltas, UsageWrite) else UsageWrite(deltas, None)
        counts = write.deltas
        statements: list[tuple[str, list[tuple[Any, ...]]]] = []
        if counts:
            statements.append((_ADD_USAGE, [(self.profile, name, *(getattr(d, c) for c in COUNTERS),
                                             d.last_used_at or None) for name, d in counts.items()]))
        if write.day is not None:
            if counts:
                statements.append((_ADD_DAY, [(self.profile, name, write.day, *(getattr(d, c) for c in COUNTERS))
                                              for name, d in counts.items()]))
            if write.stored:
                statements.append((_SET_STORED, [(self.profile, name, write.day, size)
                                                 for name, size in write.stored.items()]))
            if write.keep_from is not None:
                statements.append(("DELETE FROM key_usage_days WHERE profile = ? AND day < ?",
                                   [(self.profile, write.keep_from)]))
        if statements:
            await self._batch(statements)

    async def _batch(self, statements: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        """Every statement in one write transaction."""
        await self.open()
        assert self._db is not None
        try:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, rows in statements:
                    await self._db.executemany(sql, rows)
                await self._db.commit()
            except BaseException:
                await self._db.rollback()
                raise
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc

    async def usage_days(self, name: str | None, since: str) -> list[DayUsage]:
        where, parameters = "profile = ? AND day >= ?", [self.profile, since]
        if name is not None:
            where, parameters = where + " AND name = ?", [*parameters, name]
        rows = await self._run(f"SELECT name, day, {_COUNTS}, stored_bytes FROM key_usage_days WHERE {where}"
                               " ORDER BY day, name", tuple(parameters))
        return [day_from_row(row) for row in rows]

    async def usage(self) -> dict[str, KeyUsage]:
        found: dict[str, KeyUsage] = {}
        rows = await self._run(f"SELECT name, {_COUNTS}, last_used_at FROM key_usage WHERE profile = ?",
                               (self.profile,))
        for row in rows:
            found[row[0]] = KeyUsage(row[0], _delta(row))
        low, high = self._owner_range()
        for owner, size in await self._run(_STORED, (low, high) * 4):
            name = key_name_of(owner)
            found.setdefault(name, KeyUsage(name)).stored_bytes += int(size or 0)
        return found


    async def budgets(self, periods: dict[str, int]) -> dict[str, int]:
        found: dict[str, int] = {}
        for name, start in periods.items():  # a few keys with budgets: one indexed read each
            rows = await self._run("SELECT tokens FROM key_budgets WHERE profile = ? AND name = ? AND period_start = ?",
                                   (self.profile, name, start))
            if rows:
                found[name] = int(rows[0][0])
        return found

    async def add_budgets(self, deltas: dict[tuple[str, int], int]) -> None:
        if deltas:
            await self._batch([(_ADD_BUDGET, [(self.profile, name, start, tokens)
                                               for (name, start), tokens in sorted(deltas.items())])])

_ADD_BUDGET = ("INSERT INTO key_budgets (profile, name, period_start, tokens) VALUES (?, ?, ?, ?)"
               " ON CONFLICT (profile, name, period_start) DO UPDATE SET tokens = key_budgets.tokens + excluded.tokens")


def _delta(row: Any) -> UsageDelta:
    n = len(COUNTERS)
    return UsageDelta(**{c: int(v) for c, v in zip(COUNTERS, row[1:1 + n], strict=True)},
                      last_used_at=row[1 + n] or 0)
