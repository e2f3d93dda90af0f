"""Schema version 5 (background runs) reached from a version-4 database on both backends: what a
version-4 gateway stored is kept, and the runs' tables work at once."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import asyncpg

from gateway.store.api import ResponseStore
from gateway.store.json_columns import to_text
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.schema import MIGRATIONS
from gateway.store.postgres.schema import SCHEMA_VERSION as PG_SCHEMA_VERSION
from gateway.store.postgres.store import PostgresResponseStore
from gateway.store.sqlite.schema import STEPS
from gateway.store.sqlite.store import SCHEMA_VERSION, SQLiteResponseStore
from tests.store.records import record

_OLD = record("resp_v4", text="kept ü")
_ROW = ("resp_v4", _OLD.created_at, 1, None, to_text(_OLD.response), to_text(_OLD.transcript),
        to_text(_OLD.input_items), None, 10, 5, "/alice")


async def _keeps_the_old_and_runs(store: ResponseStore) -> None:
    old = await store.get("resp_v4", touch=False)
    assert old is not None and old.response == _OLD.response and old.owner == "/alice"
    await store.runs.begin("resp_v4", "/alice", replica="r1", lease_seconds=60)
    await store.runs.append_events("resp_v4", 0, [b"data: 1\n\n"], replica="r1")
    await store.runs.enqueue("resp_next", "/alice", b"{}", max_queued=1)
    assert [seq for seq, _ in await store.runs.events_after("resp_v4", -1)] == [0]


async def test_a_version_4_sqlite_file_moves_to_the_current_version(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    old = sqlite3.connect(path)
    old.execute("PRAGMA auto_vacuum = INCREMENTAL")  # as version 4 made its files
    old.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for version in range(1, 5):
        for statement in STEPS[version]:
            old.execute(statement, ("/legacy",) if "?" in statement else ())
    old.execute("INSERT INTO schema_version VALUES (4)")
    old.execute("INSERT INTO responses (id, created_at, last_access, conversation, response, transcript,"
                " input_items, parent_id, bytes, history_bytes, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", _ROW)
    old.commit()
    old.close()
    async with SQLiteResponseStore(path, 100) as store:
        await _keeps_the_old_and_runs(store)
    async with SQLiteResponseStore(path, 100) as store:  # the second open changes nothing
        assert await store.runs.get("resp_v4") is not None
    check = sqlite3.connect(path)
    assert check.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)] == [(10,)]
    check.close()


async def test_a_version_4_postgres_database_moves_to_the_current_version(postgres_url: str) -> None:
    conn: Any = await asyncpg.connect(postgres_url)
    try:
        await conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for version in range(1, 5):
            for statement in MIGRATIONS[version]:
                await conn.execute(statement, *(("/legacy",) if "$1" in statement else ()))
        await conn.execute("INSERT INTO schema_version (version) VALUES (4)")
        await conn.execute("INSERT INTO responses (id, created_at, last_access, conversation, response, transcript,"
                           " input_items, parent_id, bytes, history_bytes, owner)"
                           " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)", *_ROW)
    finally:
        await conn.close()
    for first in (True, False):  # the second open finds the current version and changes nothing
        async with PostgresResponseStore(PostgresDatabase(postgres_url), 100) as store:
            if first:
                await _keeps_the_old_and_runs(store)
            assert await store.runs.get("resp_v4") is not None
            version = await store.database.run(lambda c: c.fetchval("SELECT version FROM schema_version"))
            assert version == PG_SCHEMA_VERSION == 10
