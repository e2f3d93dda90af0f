"""The keys and their usage in the profile's SQLite file (store/keys.py), on a connection of their own."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite

from gateway.common.private import private_dir, private_file
from gateway.store.api import StoreUnavailableError
from gateway.store.keys import COUNTERS, ApiKey, DuplicateKeyError, KeyStore, KeyUsage, UsageDelta
from gateway.store.owners import DEFAULT_OWNER, key_name_of
from gateway.store.sqlite.faults import describe
from gateway.store.sqlite.schema import migrate

_KEY_COLUMNS = ("name, key_hash, created_at, expires_at, revoked_at, rpm, max_concurrent, max_stored_bytes, tpm,"
                " token_budget, budget_period")
_ADD_USAGE = (
    f"INSERT INTO key_usage (profile, name, {', '.join(COUNTERS)}, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (profile, name) DO UPDATE SET "
    + ", ".join(f"{c} = key_usage.{c} + excluded.{c}" for c in COUNTERS)
    + ", last_used_at = max(coalesce(key_usage.last_used_at, 0), excluded.last_used_at)"
)
# one row per owner (a conversation object's row is summed into its owner's, not returned alone)
_STORED = (
    "SELECT owner, sum(bytes) FROM (SELECT owner, bytes FROM responses WHERE owner >= ? AND owner < ?"
    " UNION ALL SELECT o.owner, o.bytes + (SELECT coalesce(sum(i.bytes), 0) FROM conversation_items i"
    " WHERE i.conversation_id = o.id) FROM conversation_objects o WHERE o.owner >= ? AND o.owner < ?"
    " UNION ALL SELECT r.owner, length(e.frame) FROM background_runs r JOIN background_events e"
    " ON e.response_id = r.response_id WHERE r.owner >= ? AND r.owner < ?)"
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

    async def _run(self, sql: str, parameters: tuple[Any, ...] = (), *, many: list[tuple[Any, ...]] | None = None
                   ) -> list[Any]:
        await self.open()
        assert self._db is not None
        try:
            if many is not None:
                await self._db.execute("BEGIN IMMEDIATE")
                try:
                    await self._db.executemany(sql, many)
                    await self._db.commit()
                except BaseException:
                    await self._db.rollback()
                    raise
                return []
            return list(await self._db.execute_fetchall(sql, parameters))
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as exc:
            raise self._fail(exc) from exc

    async def create(self, key: ApiKey) -> None:
        try:
            await self._run(f"INSERT INTO api_keys (profile, {_KEY_COLUMNS}) "
                            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (self.profile, key.name, key.key_hash, key.created_at, key.expires_at, key.revoked_at,
                             key.rpm, key.max_concurrent, key.max_stored_bytes, key.tpm, key.token_budget,
                             key.budget_period))
        except sqlite3.IntegrityError as exc:
            raise DuplicateKeyError(f"a key named '{key.name}' already exists in this profile (revoked names "
                                    "are not reused); choose another name") from exc

    async def keys(self) -> list[ApiKey]:
        rows = await self._run(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE profile = ? ORDER BY name",
                               (self.profile,))
        return [ApiKey(*row) for row in rows]

    async def revoke(self, name: str, at: int) -> bool:
        await self._run("UPDATE api_keys SET revoked_at = ? WHERE profile = ? AND name = ? AND revoked_at IS NULL",
                        (at, self.profile, name))
        rows = await self._run("SELECT changes()")
        return bool(rows[0][0])

    async def add_usage(self, deltas: dict[str, UsageDelta]) -> None:
        if deltas:
            await self._run(_ADD_USAGE, many=[
                (self.profile, name, *(getattr(d, c) for c in COUNTERS), d.last_used_at or None)
                for name, d in deltas.items()])

    async def usage(self) -> dict[str, KeyUsage]:
        found: dict[str, KeyUsage] = {}
        rows = await self._run(f"SELECT name, {', '.join(COUNTERS)}, last_used_at FROM key_usage WHERE profile = ?",
                               (self.profile,))
        for row in rows:
            found[row[0]] = KeyUsage(row[0], _delta(row))
        low, high = self._owner_range()
        for owner, size in await self._run(_STORED, (low, high) * 3):
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
            await self._run(_ADD_BUDGET, many=[(self.profile, name, start, tokens)
                                               for (name, start), tokens in sorted(deltas.items())])

_ADD_BUDGET = ("INSERT INTO key_budgets (profile, name, period_start, tokens) VALUES (?, ?, ?, ?)"
               " ON CONFLICT (profile, name, period_start) DO UPDATE SET tokens = key_budgets.tokens + excluded.tokens")


def _delta(row: Any) -> UsageDelta:
    return UsageDelta(**{c: int(v) for c, v in zip(COUNTERS, row[1:6], strict=True)}, last_used_at=row[6] or 0)
