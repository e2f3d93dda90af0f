"""A PostgreSQL admission's cost on the gateway's side, without the gateway: N calls of
`PostgresLimits.admit` (an rpm key) in one process, against a database URL.

    python -m bench.pg_admission --url postgresql://... --admissions 300 [--floor]
    valgrind --tool=callgrind python -m bench.pg_admission --url ... --admissions 50   # then 350:
    the difference of the two totals / 300 is one admission's instructions, start-up and warm-up out

`--floor`: the same count of `SELECT 1` on one connection held all along (`conn.fetchval`): one
asyncpg round trip with nothing around it. Run from another tree with PYTHONPATH=<tree>. Prints the
process's CPU time per call (a loaded host stretches it; the callgrind difference does not move).
"""

from __future__ import annotations

import argparse
import asyncio
import time

import asyncpg

from gateway.store.limits import Ask
from gateway.store.postgres.database import PostgresDatabase
from gateway.store.postgres.limits import PostgresLimits


async def measure(url: str, admissions: int, floor: bool) -> float:
    database = PostgresDatabase(url, connect_timeout=120)  # valgrind on a busy host: slow to connect
    await database.open()
    limits = PostgresLimits(database, "bench")
    conn = await asyncpg.connect(url, timeout=120)
    ask = Ask("bench", f"key-{time.time_ns()}", rpm=10**9)
    try:
        for _ in range(20):  # connections made, statements prepared
            await limits.admit(ask)
            await conn.fetchval("SELECT 1")
        started = time.process_time()
        for _ in range(admissions):
            if floor:
                await conn.fetchval("SELECT 1")
            else:
                await limits.admit(ask)
        return (time.process_time() - started) / admissions
    finally:
        await conn.close()
        await database.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--admissions", type=int, default=300)
    parser.add_argument("--floor", action="store_true", help="SELECT 1 on a held connection instead")
    args = parser.parse_args()
    per_call = asyncio.run(measure(args.url, args.admissions, args.floor))
    print(f"{'SELECT 1' if args.floor else 'admission'}: {per_call * 1e6:,.0f} us of this process's CPU per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
