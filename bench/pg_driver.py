"""asyncpg against psycopg 3 (its async pool), one run, one throwaway cluster: a put+get loop
(upsert one response-sized row, read it back) at concurrency 1 and 16, as operations per second.

    python bench/pg_driver.py          # needs Debian's PostgreSQL server binaries
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg  # noqa: E402
import psycopg_pool  # noqa: E402

from tests.support.postgres import start_cluster  # noqa: E402

ROWS = 2000
BODY = json.dumps({"output": [{"type": "message", "content": "x" * 2000}]})
DDL = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, body TEXT NOT NULL)"
UPSERT = "INSERT INTO t (id, body) VALUES ({0}, {1}) ON CONFLICT (id) DO UPDATE SET body = excluded.body"
SELECT = "SELECT body FROM t WHERE id = {0}"


async def run_asyncpg(url: str, concurrency: int) -> float:
    pool = await asyncpg.create_pool(url, min_size=concurrency, max_size=concurrency)
    await pool.execute(DDL)

    async def one(i: int) -> None:
        async with pool.acquire() as conn:
            await conn.execute(UPSERT.format("$1", "$2"), f"a{i}", BODY)
        await pool.fetchval(SELECT.format("$1"), f"a{i}")

    rate = await _drive(one, concurrency)
    await pool.close()
    return rate


async def run_psycopg(url: str, concurrency: int) -> float:
    pool = psycopg_pool.AsyncConnectionPool(url, min_size=concurrency, max_size=concurrency, open=False)
    await pool.open(wait=True)
    async with pool.connection() as conn:
        await conn.execute(DDL)

    async def one(i: int) -> None:
        async with pool.connection() as conn:
            await conn.execute(UPSERT.format("%s", "%s"), (f"p{i}", BODY))
        async with pool.connection() as conn:
            await (await conn.execute(SELECT.format("%s"), (f"p{i}",))).fetchone()

    rate = await _drive(one, concurrency)
    await pool.close()
    return rate


async def _drive(one: object, concurrency: int) -> float:
    queue = iter(range(ROWS))

    async def worker() -> None:
        for i in queue:
            await one(i)  # type: ignore[operator]

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ROWS / (time.perf_counter() - started)


async def main() -> None:
    cluster = start_cluster()
    try:
        url = cluster.url()
        for concurrency in (1, 16):
            for name, run in (("asyncpg", run_asyncpg), ("psycopg", run_psycopg)):
                rate = await run(url, concurrency)
                print(f"c={concurrency:<3} {name:8} {rate:8.0f} put+get/s")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    asyncio.run(main())
