"""bench/fake_upstream.py (chat completions and SearXNG's /search) on 0.0.0.0:8080 of its container.

The bench's fakes listen on 127.0.0.1; inside the compose network the replicas reach this one by
its service name, so it listens on the container's own interface (a network the smoke test made).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from bench.fake_upstream import FakeUpstream


async def main() -> None:
    runner = web.ServerRunner(web.Server(FakeUpstream().handle, access_log=None))
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", 8080).start()
    print("fake searxng and model listening on :8080", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
