"""Requests over the run limit: what 64 concurrent 8 MB bodies cost the gateway while every run slot
is busy (issue 25, item 5).

`python -m bench.admission [--src DIR]` starts the bench's fake upstream and a gateway with the
default 32 run slots, holds all 32 with streamed chats the fake answers only after two minutes,
then sends 64 chat requests of 8 MB each at once. It prints the gateway's RSS idle, at its peak
during the burst (sampled every 10 ms) and 2 s after, the replies' statuses, and how long the
burst took against one small request to the same gateway in the same state (a ratio, not a
figure to compare across machines). `--src` runs an older checkout for an A/B (e.g. a `git
archive` of main in a temporary directory).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import tempfile
import time
from pathlib import Path

import aiohttp

from bench import processes

SLOTS = 32
BODIES = 64
BODY_MB = 8


async def _wait_for_upstream_requests(session: aiohttp.ClientSession, base_url: str, count: int) -> None:
    async with asyncio.timeout(60):
        while True:
            async with session.get(base_url + "/_bench/stats") as reply:
                if (await reply.json())["requests"] >= count:
                    return
            await asyncio.sleep(0.05)


async def main_async(args: argparse.Namespace) -> None:
    home = Path(tempfile.mkdtemp(prefix="agent-gateway-bench-admission-"))
    fake = await processes.start("fake upstream", ["-m", "bench.fake_upstream", "--port", "0"], processes.clean_env({}))
    src = Path(args.src).resolve() if args.src else processes.REPO
    env = processes.clean_env({"AGENT_GATEWAY_HOME": str(home), "LLM_BASE_URL": f"{fake.base_url}/v1",
                               "LLM_MODEL": "bench-model", "API_SERVER_MAX_CONCURRENT_RUNS": str(SLOTS),
                               "API_SERVER_MAX_BODY_BYTES": str(10_000_000), "PYTHONPATH": str(src)})
    gateway = await processes.start("gateway", ["-m", "gateway", "serve", "--port", "0"], env, cwd=src)
    url = gateway.base_url + "/v1/chat/completions"
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            await asyncio.sleep(0.5)
            idle = gateway.rss_mb()
            held = [asyncio.ensure_future(session.post(url, json={
                "stream": True, "messages": [{"role": "user", "content": "bench: delay=120"}]}))
                for _ in range(SLOTS)]
            await _wait_for_upstream_requests(session, fake.base_url, SLOTS)
            busy = gateway.rss_mb()

            started = time.perf_counter()
            async with session.post(url, json={"messages": [{"role": "user", "content": "hi"}]}) as one:
                small_status = one.status
            small_seconds = time.perf_counter() - started

            peak = busy
            sampling = True

            async def sample() -> None:
                nonlocal peak
                while sampling:
                    peak = max(peak, gateway.rss_mb())
                    await asyncio.sleep(0.01)

            sampler = asyncio.ensure_future(sample())
            body = json.dumps({"messages": [{"role": "user", "content": "x" * (BODY_MB * 1_000_000 - 100)}]}).encode()

            async def big() -> int:
                async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as reply:
                    await reply.read()
                    return reply.status

            started = time.perf_counter()
            statuses = await asyncio.gather(*(big() for _ in range(BODIES)), return_exceptions=True)
            burst_seconds = time.perf_counter() - started
            sampling = False
            await sampler
            await asyncio.sleep(2)
            after = gateway.rss_mb()
            for task in held:
                task.cancel()
            counted = collections.Counter(s if isinstance(s, int) else type(s).__name__ for s in statuses)
            print(f"src {src}")
            print(f"RSS idle {idle:.1f} MiB, {SLOTS} slots busy {busy:.1f} MiB, peak during {BODIES} x {BODY_MB} MB "
                  f"{peak:.1f} MiB, 2 s after {after:.1f} MiB")
            print(f"statuses {dict(counted)}; one small request while busy: {small_status}")
            print(f"burst {burst_seconds:.2f} s = {burst_seconds / small_seconds:.0f} x one small request "
                  f"({small_seconds * 1000:.1f} ms)")
    finally:
        await gateway.stop()
        await fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", metavar="DIR", help="the gateway checkout to run (default: this one)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
