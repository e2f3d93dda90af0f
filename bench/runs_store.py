"""The background runs' store (gateway/store/runs.py) on both backends, against the bare database call
in the same run: `python -m bench.runs_store [--appends 500] [--wakes 200]`.

- append: `append_events` of one frame (a stream's worst case: an event per batch) and of 16, per
  second, against the floor of a durable write on the same backend (SQLite: an INSERT and its
  commit on a WAL file with synchronous=FULL; PostgreSQL: an INSERT through the store's own pool).
- wake (PostgreSQL): from the start of replica A's append to the return of replica B's `wait`,
  against a bare INSERT with `pg_notify` heard on another connection's LISTEN (no pool).

PostgreSQL runs on a throwaway cluster (tests/support/postgres.py); skipped without its binaries.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import aiosqlite
import asyncpg

from gateway.store.api import ResponseStore
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.store import PostgresResponseStore
from gateway.store.sqlite.store import SQLiteResponseStore
from tests.support import postgres

FRAME = b"event: response.output_text.delta\ndata: " + b"x" * 120 + b"\n\n"


async def appends_per_second(store: ResponseStore, n: int, batch: int) -> float:
    rid = f"resp_bench_{batch}"
    await store.runs.begin(rid, "", replica="bench", lease_seconds=600)
    started = time.perf_counter()
    for i in range(n):
        await store.runs.append_events(rid, i * batch, [FRAME] * batch, replica="bench")
    return n / (time.perf_counter() - started)


async def sqlite_floor(path: Path, n: int) -> float:
    async with aiosqlite.connect(path) as db:
        await db.execute("PRAGMA journal_mode = WAL")
        await db.execute("PRAGMA synchronous = FULL")
        await db.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v BLOB)")
        await db.execute("DELETE FROM t")
        await db.commit()
        started = time.perf_counter()
        for i in range(n):
            await db.execute("INSERT INTO t VALUES (?, ?)", (i, FRAME))
            await db.commit()
        return n / (time.perf_counter() - started)


async def _execute(sql: str, *args_and_conn: Any) -> str:
    *args, conn = args_and_conn
    return str(await conn.execute(sql, *args))


async def pg_floor(database: PostgresDatabase, n: int, table: str) -> float:
    """An INSERT through the store's own pool (`database.run`, what every store call pays)."""
    await database.run(lambda conn: conn.execute(f"CREATE TABLE {table} (k BIGINT PRIMARY KEY, v BYTEA)"))
    started = time.perf_counter()
    insert = f"INSERT INTO {table} VALUES ($1, $2)"
    for i in range(n):
        await database.run(partial(_execute, insert, i, FRAME))
    return n / (time.perf_counter() - started)


async def store_wakes(url: str, n: int) -> list[float]:
    async with PostgresResponseStore(PostgresDatabase(url), 10) as a, \
            PostgresResponseStore(PostgresDatabase(url), 10) as b:
        await a.runs.begin("resp_wake", "", replica="a", lease_seconds=600)
        await b.runs.wait("resp_wake", 0)
        await asyncio.sleep(0.5)  # b's listener is up
        took = []
        for i in range(n):
            await b.runs.events_after("resp_wake", i - 1)
            waiting = asyncio.ensure_future(b.runs.wait("resp_wake", 10))
            await asyncio.sleep(0.005)
            started = time.perf_counter()
            await a.runs.append_events("resp_wake", i, [FRAME], replica="a")
            await waiting
            took.append(time.perf_counter() - started)
        return took


async def bare_wakes(url: str, n: int) -> list[float]:
    listener: Any = await asyncpg.connect(url)
    sender: Any = await asyncpg.connect(url)
    heard = asyncio.Event()
    await listener.add_listener("bench", lambda *_: heard.set())
    await sender.execute("CREATE TABLE bench_wake (k BIGSERIAL PRIMARY KEY)")
    took = []
    try:
        for _ in range(n):
            heard.clear()
            started = time.perf_counter()
            await sender.execute("WITH made AS (INSERT INTO bench_wake VALUES (DEFAULT) RETURNING k)"
                                 " SELECT pg_notify('bench', k::text) FROM made")
            await heard.wait()
            took.append(time.perf_counter() - started)
    finally:
        await listener.close()
        await sender.close()
    return took


def line(what: str, ours: float, floor: float, unit: str) -> None:
    print(f"{what:44} {ours:10.1f} {floor:10.1f} {ours / floor:8.2f}  {unit}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--wakes", type=int, default=200)
    args = parser.parse_args()
    print(f"{'':44} {'runs':>10} {'floor':>10} {'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteResponseStore(Path(tmp) / "r.db", 100) as store:
            await sqlite_floor(Path(tmp) / "floor.db", args.appends)  # warm-up: the file and its WAL
            floor = await sqlite_floor(Path(tmp) / "floor.db", args.appends)
            for batch in (1, 16):
                rate = await appends_per_second(store, args.appends, batch)
                line(f"SQLite append_events x{batch} (batches/s)", rate, floor, "floor: INSERT+commit/s")
    if postgres.server_binaries() is None:
        print("PostgreSQL: server binaries missing, skipped")
        return
    cluster = postgres.start_cluster()
    try:
        url = cluster.create_database("bench_runs")
        database = PostgresDatabase(url)
        async with PostgresResponseStore(database, 100) as pg:
            await pg_floor(database, args.appends, "bench_warm")
            floor = await pg_floor(database, args.appends, "bench_floor")
            for batch in (1, 16):
                rate = await appends_per_second(pg, args.appends, batch)
                line(f"PostgreSQL append_events x{batch} (batches/s)", rate, floor, "floor: INSERT through the pool/s")
        ours = statistics.median(await store_wakes(url, args.wakes)) * 1000
        bare = statistics.median(await bare_wakes(url, args.wakes)) * 1000
        line("PostgreSQL append -> other replica's wait (ms)", ours, bare, "floor: INSERT+pg_notify -> LISTEN, median")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    asyncio.run(main())
