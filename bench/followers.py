"""What followers of one background response cost the gateway (issue 42, items 4 and 5).

`python -m bench.followers [--followers 40] [--instructions-mb 4.5]` starts the bench's fake
upstream and one gateway (SQLite), creates a background response whose `instructions` are
`--instructions-mb` MB (every `response.*` event repeats the Response object, instructions
included, so the run's events are about three times that), and attaches `--followers` followers
(`GET /v1/responses/{id}?stream=true`) that never read a byte (raw sockets with a small receive
buffer). It prints the gateway's RSS before and at its peak while they hang on, and whether the
run completed.

`--postgres` instead starts a throwaway PostgreSQL cluster (tests/support/postgres.py) and two
replicas: the run goes on A, and `--followers` followers that read everything follow it on B. It
prints the database's committed transactions (`pg_stat_database.xact_commit`) during the run with
one follower on B and with all of them, and checks that every follower got the run's frames in order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import tempfile
import time
from pathlib import Path

import aiohttp

from bench import processes

CHUNKS, CHUNK_DELAY = 60, 0.05
PROMPT = f"bench: chunks={CHUNKS} chunk_delay={CHUNK_DELAY}"


async def _create(session: aiohttp.ClientSession, base: str, instructions: str) -> str:
    async with session.post(f"{base}/v1/responses", json={
            "model": "m", "input": PROMPT, "instructions": instructions, "background": True}) as reply:
        body = await reply.json()
        assert reply.status == 200, body
        return str(body["id"])


async def _status(session: aiohttp.ClientSession, base: str, response_id: str) -> str:
    async with session.get(f"{base}/v1/responses/{response_id}") as reply:
        response = await reply.json()
    if response.get("error"):  # a failed run says why
        return f"{response['status']} ({response['error']['message'][:120]})"
    return str(response["status"])


async def _until_ended(session: aiohttp.ClientSession, base: str, response_id: str) -> str:
    while (status := await _status(session, base, response_id)) in ("queued", "in_progress"):
        await asyncio.sleep(0.1)
    return status


def _silent_follower(base: str, response_id: str) -> socket.socket:
    """A follower that sends its request and never reads: its receive window closes at once."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(f"GET /v1/responses/{response_id}?stream=true HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return sock


async def _silent(args: argparse.Namespace, home: Path, fake: processes.Process) -> None:
    env = processes.clean_env({"AGENT_GATEWAY_HOME": str(home), "LLM_BASE_URL": f"{fake.base_url}/v1",
                               "LLM_MODEL": "bench-model", "LLM_CONTEXT_WINDOW": "5000000", **dict(args.env)})
    gateway = await processes.start("gateway", ["-m", "gateway", "serve", "--port", "0"], env)
    instructions = "x" * int(args.instructions_mb * 1_000_000)
    sockets: list[socket.socket] = []
    try:
        async with aiohttp.ClientSession() as session:
            await _until_ended(session, gateway.base_url, await _create(session, gateway.base_url, "warm"))
            before = gateway.rss_mb()
            response_id = await _create(session, gateway.base_url, instructions)
            peak = before
            for _ in range(args.followers):
                sockets.append(_silent_follower(gateway.base_url, response_id))
                peak = max(peak, gateway.rss_mb())
            status = "in_progress"
            deadline = time.monotonic() + args.hold
            while time.monotonic() < deadline:
                peak = max(peak, gateway.rss_mb())
                if status == "in_progress":
                    status = await _status(session, gateway.base_url, response_id)
                await asyncio.sleep(0.2)
            status = await _until_ended(session, gateway.base_url, response_id)
            print(f"{args.followers} silent followers of a {args.instructions_mb:g} MB-instructions background "
                  f"response: RSS {before:.1f} MiB before, {peak:.1f} MiB at peak (+{peak - before:.1f} MiB) "
                  f"over {args.hold:g} s; the run ended {status}")
    finally:
        for sock in sockets:
            sock.close()
        await gateway.stop()


async def _read_all(session: aiohttp.ClientSession, base: str, response_id: str) -> list[int]:
    async with session.get(f"{base}/v1/responses/{response_id}", params={"stream": "true"}) as reply:
        assert reply.status == 200, await reply.text()
        text = await reply.text()
    return [json.loads(line[6:])["sequence_number"] for line in text.splitlines() if line.startswith("data: ")]


async def _replicas(args: argparse.Namespace, home: Path, fake: processes.Process) -> None:
    from tests.support import postgres

    if postgres.server_binaries() is None:
        raise SystemExit("--postgres needs the PostgreSQL server binaries (tests/support/postgres.py)")
    cluster = postgres.start_cluster()
    gateways: list[processes.Process] = []
    try:
        url = cluster.create_database("bench_followers")
        for name in ("a", "b"):
            env = processes.clean_env({"AGENT_GATEWAY_HOME": str(home / name), "LLM_BASE_URL": f"{fake.base_url}/v1",
                                       "LLM_MODEL": "bench-model", "API_SERVER_DATABASE_URL": url,
                                       **dict(args.env)})
            gateways.append(await processes.start(f"gateway {name}", ["-m", "gateway", "serve", "--port", "0"], env))
        a, b = gateways

        def commits() -> int:
            return int(cluster.psql("SELECT xact_commit FROM pg_stat_database WHERE datname = 'bench_followers'"))

        async with aiohttp.ClientSession() as session:
            await _until_ended(session, a.base_url, await _create(session, a.base_url, "warm"))
            for followers in (1, args.followers):
                response_id = await _create(session, a.base_url, "follow me")
                before = commits()
                started = time.perf_counter()
                seen = await asyncio.gather(*(_read_all(session, b.base_url, response_id) for _ in range(followers)))
                seconds = time.perf_counter() - started
                spent = commits() - before
                whole = all(s == list(range(len(seen[0]))) for s in seen) and len(seen[0]) > CHUNKS
                print(f"{followers:4} follower(s) on B of a run on A: {spent} transactions in {seconds:.1f} s "
                      f"({spent / followers:.1f} per follower); every follower got all {len(seen[0])} frames "
                      f"in order: {whole}")
    finally:
        for gateway in gateways:
            await gateway.stop()
        cluster.destroy()


async def main_async(args: argparse.Namespace) -> None:
    home = Path(tempfile.mkdtemp(prefix="agent-gateway-bench-followers-"))
    fake = await processes.start("fake upstream", ["-m", "bench.fake_upstream", "--port", "0"], processes.clean_env({}))
    try:
        await (_replicas if args.postgres else _silent)(args, home, fake)
    finally:
        await fake.stop()


def _setting(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    return name, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followers", type=int, default=40)
    parser.add_argument("--instructions-mb", type=float, default=4.5)
    parser.add_argument("--hold", type=float, default=8.0, help="seconds the silent followers hang on")
    parser.add_argument("--postgres", action="store_true", help="two replicas on a throwaway PostgreSQL cluster")
    parser.add_argument("--env", type=_setting, action="append", default=[], metavar="NAME=VALUE",
                        help="a gateway setting (repeatable), e.g. API_SERVER_MAX_FOLLOWERS_PER_KEY=100")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
