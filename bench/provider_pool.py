"""The providers' kit (providers/http.py) with many pooled connections: what one call then costs.

    strace -c -e trace=poll python -m bench.provider_pool --burst 16 --calls 500
    python -m bench.provider_pool --burst 16 --calls 500 --src /tmp/old   # the kit from another checkout

httpcore checks every pooled connection at each request start and each response close, a poll()
per idle socket; a client whose pool keeps many idle connections pays that on every call. This
opens `--burst` concurrent calls to the fake SearXNG (bench/fake_search.py, a subprocess) so the
pool holds that many connections, then makes `--calls` calls one after the other and prints the
process CPU per sequential call and the pooled connections left. Run it under `strace -c -e
trace=poll` (without `-f`: the fake is a child process, the event loop runs on the main thread)
for the poll() count.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path


def start_fake() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "bench.fake_search", "--port", "0"], stdout=subprocess.PIPE,
                            text=True, cwd=Path(__file__).resolve().parent.parent)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip().rsplit(" ", 1)[-1]


def pooled_connections(client: object) -> int:
    """The client's idle pooled connections (a bench-only peek): aiohttp's kit, or the httpx one (--src)."""
    session = getattr(client, "_session", None)
    if session is not None:
        return sum(len(held) for held in session.connector._conns.values())
    return len(client._transport._pool.connections)  # type: ignore[attr-defined]


async def run(burst: int, calls: int) -> None:
    from providers.http import ServiceClient, call_json

    proc, url = start_fake()
    try:
        client = ServiceClient(10.0)
        search = f"{url}/search"
        await asyncio.gather(*(call_json(client, "fake", "GET", search, params={"q": f"b{i}", "format": "json"})
                               for i in range(burst)))
        pooled = pooled_connections(client)
        started, wall = time.process_time(), time.monotonic()
        for i in range(calls):
            await call_json(client, "fake", "GET", search, params={"q": f"q{i}", "format": "json"})
        per_call = (time.process_time() - started) / max(calls, 1) * 1e6
        # the idle connections expire after the burst (5 s in the httpx kit, 15 s in the aiohttp
        # one): a run longer than that measures fewer of them
        print(f"burst {burst}: {pooled} connections pooled after it; {calls} sequential calls in "
              f"{time.monotonic() - wall:.1f} s, {per_call:.0f} us CPU per call")
        await client.aclose()
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--burst", type=int, default=16, help="concurrent calls first (connections pooled)")
    parser.add_argument("--calls", type=int, default=500, help="sequential calls measured after the burst")
    parser.add_argument("--src", help="import providers/ from this checkout instead (A/B)")
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, str(Path(args.src).resolve()))
    asyncio.run(run(args.burst, args.calls))


if __name__ == "__main__":
    main()
