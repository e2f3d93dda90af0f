"""The Responses store's write path: `python -m bench.store_put 100 2000 10000`, and
`python -m bench.store_put --concurrency 1 16 64`.

Caps: for each cap (API_SERVER_MAX_STORED_RESPONSES), fills a fresh SQLite store to the cap, then
times 300 more puts, each of which evicts the least recently used response. A put should cost the
same whatever the cap; it did not when eviction scanned the whole table.

Concurrency: N tasks putting (and reading back, as a chained request would) at once into a fresh
store at its cap, as N concurrent Responses requests do: puts/s, the process's CPU time per put
(every thread's, so the store's own is included) and the wall-clock p50/p99 of a put. On a shared
machine, read the CPU per put first. Loopback-free: a temp file only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from gateway.store.sqlite.store import SQLiteResponseStore, StoredResponse

EXTRA_PUTS = 300
CONCURRENT_PUTS = 2000
CONCURRENT_CAP = 1000


def _record(n: int) -> StoredResponse:
    return StoredResponse(id=f"resp_{n:08d}", created_at=int(time.time()),
                          response={"id": f"resp_{n:08d}", "object": "response", "output": []},
                          transcript=[{"role": "user", "content": "hello " * 50}], input_items=[])


async def measure(cap: int) -> None:
    with tempfile.TemporaryDirectory(prefix="agent-gateway-store-bench-") as folder:
        store = SQLiteResponseStore(Path(folder) / "responses.db", cap)
        await store.open()
        try:
            started = time.perf_counter()
            for n in range(cap):
                await store.put(_record(n))
            fill = time.perf_counter() - started
            started = time.perf_counter()
            for n in range(cap, cap + EXTRA_PUTS):
                await store.put(_record(n))
            per_put_ms = (time.perf_counter() - started) / EXTRA_PUTS * 1000
            print(f"cap {cap:>7,}: filled in {fill:6.1f} s; a put at the cap {per_put_ms:5.2f} ms; "
                  f"{await store.count():,} stored", flush=True)
        finally:
            await store.close()


async def measure_concurrent(concurrency: int) -> None:
    with tempfile.TemporaryDirectory(prefix="agent-gateway-store-bench-") as folder:
        store = SQLiteResponseStore(Path(folder) / "responses.db", CONCURRENT_CAP)
        await store.open()
        try:
            for n in range(CONCURRENT_CAP):
                await store.put(_record(n))
            numbers = iter(range(CONCURRENT_CAP, CONCURRENT_CAP + CONCURRENT_PUTS))
            latencies: list[float] = []

            async def client() -> None:
                for n in numbers:
                    started = time.perf_counter()
                    await store.put(_record(n))
                    latencies.append(time.perf_counter() - started)
                    assert await store.get(f"resp_{n:08d}") is not None

            cpu, wall = time.process_time(), time.perf_counter()
            await asyncio.gather(*(client() for _ in range(concurrency)))
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            latencies.sort()
            p50, p99 = (latencies[int(len(latencies) * q)] * 1000 for q in (0.5, 0.99))
            print(f"c={concurrency:<3} {CONCURRENT_PUTS / wall:7,.0f} puts/s (each with a read); "
                  f"CPU {cpu / CONCURRENT_PUTS * 1e6:6,.0f} us per put+read; put p50 {p50:6.2f} ms, "
                  f"p99 {p99:6.2f} ms; load average {os.getloadavg()[0]:.2f}", flush=True)
        finally:
            await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("caps", nargs="*", type=int, default=[100, 2000, 10000])
    parser.add_argument("--concurrency", nargs="+", type=int, metavar="N",
                        help="measure N concurrent writers instead of the caps")
    args = parser.parse_args()
    if args.concurrency:
        for concurrency in args.concurrency:
            asyncio.run(measure_concurrent(concurrency))
        return
    for cap in args.caps:
        asyncio.run(measure(cap))


if __name__ == "__main__":
    main()
