"""The store backends under test: a SQLite file, and PostgreSQL on the session's throwaway cluster
(skipped where its binaries are missing, never in CI)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.store.api import ResponseStore
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.store import PostgresResponseStore
from gateway.store.sqlite.store import SQLiteResponseStore
from tests.store.records import MakeStore


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> MakeStore:
    """A factory of unopened stores on one database (the same file, or the same PostgreSQL
    database), so a test can open a second store on it: another replica, or a restart."""
    if request.param == "sqlite":
        return lambda cap: SQLiteResponseStore(tmp_path / "responses.db", max_responses=cap)
    url = request.getfixturevalue("postgres_url")
    return lambda cap: PostgresResponseStore(PostgresDatabase(url, max_size=4), cap)


@pytest.fixture
async def store(make_store: MakeStore) -> AsyncIterator[ResponseStore]:
    async with make_store(100) as opened:
        yield opened


@pytest.fixture
async def database(postgres_url: str) -> AsyncIterator[PostgresDatabase]:
    """An open PostgreSQL database on the throwaway cluster (the idempotency tables' tests)."""
    database = PostgresDatabase(postgres_url, max_size=4)
    await database.open()
    try:
        yield database
    finally:
        await database.close()
