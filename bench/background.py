"""A background create's answer against a normal create's first byte and whole reply (issue 28).

`python -m bench.background [--rounds 30] [--postgres]` starts the bench's fake upstream (a model
that takes DELAY s to its first token, then CHUNKS chunks CHUNK_DELAY s apart) and one gateway
(SQLite, or with `--postgres` a throwaway PostgreSQL cluster from tests/support/postgres.py), then
for each round, one after another:
- `background: true` (unstreamed): from sending it to the whole JSON answer (`queued` or
  `in_progress`); the run is then polled to `completed` before the next round;
- a normal streamed create: to its first body byte (the first SSE event), and to its end;
- a normal unstreamed create: to its whole answer.
It prints each one's median and the background create's ratio to the others, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from bench import processes

DELAY, CHUNKS, CHUNK_DELAY = 0.2, 20, 0.01
PROMPT = f"bench: delay={DELAY} chunks={CHUNKS} chunk_delay={CHUNK_DELAY}"


async def _background(session: aiohttp.ClientSession, url: str) -> float:
    started = time.perf_counter()
    async with session.post(url, json={"model": "m", "input": PROMPT, "background": True}) as reply:
        created = await reply.json()
    seconds = time.perf_counter() - started
    assert created["status"] in ("queued", "in_progress"), created
    while True:  # the next round starts with no run going
        async with session.get(f"{url}/{created['id']}") as reply:
            if (await reply.json())["status"] not in ("queued", "in_progress"):
                return seconds
        await asyncio.sleep(0.05)


async def _streamed(session: aiohttp.ClientSession, url: str) -> tuple[float, float]:
    started = time.perf_counter()
    async with session.post(url, json={"model": "m", "input": PROMPT, "stream": True}) as reply:
        await reply.content.readany()
        first = time.perf_counter() - started
        await reply.read()
    return first, time.perf_counter() - started


async def _whole(session: aiohttp.ClientSession, url: str) -> float:
    started = time.perf_counter()
    async with session.post(url, json={"model": "m", "input": PROMPT}) as reply:
        await reply.read()
    return time.perf_counter() - started


async def main_async(args: argparse.Namespace) -> None:
    home = Path(tempfile.mkdtemp(prefix="agent-gateway-bench-background-"))
    cluster = None
    extra = {}
    if args.postgres:
        from tests.support import postgres

        if postgres.server_binaries() is None:
            raise SystemExit("--postgres needs the PostgreSQL server binaries (tests/support/postgres.py)")
        cluster = postgres.start_cluster()
        extra["API_SERVER_DATABASE_URL"] = cluster.create_database("bench_background")
    fake = await processes.start("fake upstream", ["-m", "bench.fake_upstream", "--port", "0"], processes.clean_env({}))
    env = processes.clean_env({"AGENT_GATEWAY_HOME": str(home), "LLM_BASE_URL": f"{fake.base_url}/v1",
                               "LLM_MODEL": "bench-model", **extra})
    gateway = await processes.start("gateway", ["-m", "gateway", "serve", "--port", "0"], env)
    url = gateway.base_url + "/v1/responses"
    try:
        async with aiohttp.ClientSession() as session:
            await _whole(session, url)  # warm: the store opened, the upstream connection made
            background, first_byte, streamed, whole = [], [], [], []
            for _ in range(args.rounds):
                background.append(await _background(session, url))
                first, end = await _streamed(session, url)
                first_byte.append(first)
                streamed.append(end)
                whole.append(await _whole(session, url))
        medians = {name: statistics.median(values) for name, values in (
            ("background create, answer", background), ("normal streamed create, first byte", first_byte),
            ("normal streamed create, end", streamed), ("normal unstreamed create, answer", whole))}
        base = medians["background create, answer"]
        print(f"{args.rounds} rounds, store {'PostgreSQL' if args.postgres else 'SQLite'}, upstream: first token "
              f"after {DELAY} s, {CHUNKS} chunks {CHUNK_DELAY} s apart")
        for name, value in medians.items():
            ratio = "" if value == base else f"  ({value / base:.1f} x the background create)"
            print(f"{name:40} {value * 1000:8.1f} ms{ratio}")
    finally:
        await gateway.stop()
        await fake.stop()
        if cluster is not None:
            cluster.destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--postgres", action="store_true", help="the store on a throwaway PostgreSQL cluster")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
