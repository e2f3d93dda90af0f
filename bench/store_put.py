"""The Responses store's write path at different caps: `python -m bench.store_put 100 2000 10000`.

For each cap (API_SERVER_MAX_STORED_RESPONSES), fills a fresh SQLite store to the cap, then times
300 more puts, each of which evicts the least recently used response. A put should cost the same
whatever the cap; it did not when eviction scanned the whole table. Loopback-free: a temp file only.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from gateway.store.sqlite import SQLiteResponseStore, StoredResponse

EXTRA_PUTS = 300


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("caps", nargs="*", type=int, default=[100, 2000, 10000])
    for cap in parser.parse_args().caps:
        asyncio.run(measure(cap))


if __name__ == "__main__":
    main()
