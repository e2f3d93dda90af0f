"""What a limited key's admission costs behind replicas (issue 46), one run, one throwaway cluster.

    python -m bench.key_limits [--admissions 2000]   # needs Debian's PostgreSQL server binaries

Against a bare round trip (`SELECT 1`) on the same pool: `agent_gateway_admit` for a key with an
rpm only, with rpm + tpm + a budget + a run slot (and the slot's release), and for one key admitted
from two "replicas" (two pools) at 16 requests in flight each, where the key's lock makes them take
turns; milliseconds per admission and admissions per second.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

from gateway.store.limits import Ask
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.limits import PostgresLimits
from tests.support.postgres import start_cluster

BIG = 10**12  # limits never reached: every admission is counted


async def _timed(count: int, concurrency: int, one: Callable[[int], Awaitable[object]]) -> float:
    left = iter(range(count))

    async def worker() -> None:
        for i in left:
            await one(i)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def measure(url: str, count: int) -> None:
    databases = [PostgresDatabase(url, max_size=16) for _ in range(2)]
    for database in databases:
        await database.open()
    a, b = (PostgresLimits(d, f"replica-{i}") for i, d in enumerate(databases))

    async def bare(i: int) -> None:
        await databases[0].run(lambda conn: conn.fetchval("SELECT 1"))

    async def rpm(i: int) -> None:
        await a.admit(Ask("p", "rpm", rpm=BIG))

    async def everything(i: int) -> None:
        run_id = f"run-{i}"
        await a.admit(Ask("p", "all", rpm=BIG, max_runs=BIG, run_id=run_id, tpm=BIG, budget=BIG, period_start=0,
                          tokens=1000))
        await a.release([run_id])

    for name, one in (("SELECT 1", bare), ("admit, rpm only", rpm), ("admit, all limits + release", everything)):
        await _timed(100, 1, one)  # warm-up: prepared statements, the function's plan
        seconds = await _timed(count, 1, one)
        print(f"{name:32} c=1: {seconds / count * 1000:.3f} ms each")
    for name, key in (("one key from 2 replicas", "shared"), ("a key per request, 2 replicas", None)):
        async def two(i: int, key: str | None = key) -> None:
            await (a if i % 2 else b).admit(Ask("p", key or f"k{i % 64}", rpm=BIG))
        seconds = await _timed(count, 32, two)
        print(f"{name:32} c=32: {count / seconds:,.0f} admissions/s")
    for database in databases:
        await database.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admissions", type=int, default=2000)
    args = parser.parse_args()
    cluster = start_cluster()
    try:
        asyncio.run(measure(cluster.create_database("bench"), args.admissions))
    finally:
        cluster.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
