"""Soak: mixed traffic against a gateway subprocess for a bounded time, watching its RSS and fds.

    python bench/soak.py --minutes 10

Loopback only: a fake upstream model and a fake SearXNG run in this process on 127.0.0.1, the
gateway runs as `python -m gateway serve --port 0` in a temporary home. Traffic: chat plain and
streamed, Responses chained by previous_response_id and by conversation, tool rounds (web_search
against the fake SearXNG), and clients that leave mid-stream. Every few seconds the gateway's RSS
and open fd count are sampled; at the end a table and a verdict (flat or growing) are printed.
Exit status 1 when growing.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakes.searxng import FakeSearxng  # noqa: E402
from tests.fakes.upstream import FakeUpstream, Reply, text, tool_call  # noqa: E402
from tests.support.gateway_process import gateway_env, start_gateway  # noqa: E402


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = next(iter(runner.addresses))[:2]
    return runner, f"http://{host}:{port}"


class Traffic:
    def __init__(self, base: str, upstream: FakeUpstream, rng: random.Random) -> None:
        self.base = base
        self.upstream = upstream
        self.rng = rng
        self.counts: dict[str, int] = {}
        self.failures: dict[str, int] = {}

    def _count(self, kind: str, ok: bool) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if not ok:
            self.failures[kind] = self.failures.get(kind, 0) + 1

    async def one(self, session: aiohttp.ClientSession) -> None:
        kind = self.rng.choice(["chat", "chat-stream", "chat-tools", "responses-chain", "conversation",
                                "disconnect"])
        chat = {"messages": [{"role": "user", "content": f"question {self.rng.random()}"}]}
        try:
            if kind == "chat":
                async with session.post(f"{self.base}/v1/chat/completions", json=chat) as r:
                    await r.read()
                    self._count(kind, r.status == 200)
            elif kind == "chat-stream":
                async with session.post(f"{self.base}/v1/chat/completions", json={**chat, "stream": True}) as r:
                    body = await r.read()
                    self._count(kind, r.status == 200 and body.endswith(b"data: [DONE]\n\n"))
            elif kind == "chat-tools":
                self.upstream.queue(tool_call(("web_search", {"query": "otters"})), text("found it"))
                async with session.post(f"{self.base}/v1/chat/completions", json=chat) as r:
                    await r.read()
                    self._count(kind, r.status == 200)
            elif kind == "responses-chain":
                previous = None
                for i in range(3):
                    body: dict[str, Any] = {"input": f"turn {i}", "stream": i == 1}
                    if previous:
                        body["previous_response_id"] = previous
                    async with session.post(f"{self.base}/v1/responses", json=body) as r:
                        raw = await r.read()
                        ok = r.status == 200
                        if ok and not body["stream"]:
                            previous = (await r.json())["id"]
                        elif ok:
                            previous = raw.split(b'"id": "', 1)[1].split(b'"', 1)[0].decode()
                    self._count(kind, ok)
            elif kind == "conversation":
                name = f"c{self.rng.randrange(20)}"
                async with session.post(f"{self.base}/v1/responses", json={"input": "hi", "conversation": name}) as r:
                    await r.read()
                    self._count(kind, r.status == 200)
            else:
                self.upstream.queue(Reply(text="slow answer " * 40, chunk_size=4, chunk_delay=0.01))
                async with session.post(f"{self.base}/v1/chat/completions", json={**chat, "stream": True}) as r:
                    await r.content.readline()
                    r.close()  # leave mid-stream
                self._count(kind, True)
        except (TimeoutError, aiohttp.ClientError):
            self._count(kind, False)


async def soak(minutes: float, concurrency: int, sample_every: float, seed: int) -> bool:
    upstream = FakeUpstream()
    upstream.default = Reply(text="a normal answer of a few words", chunk_size=6)
    searxng = FakeSearxng()
    up_runner, up_url = await serve(upstream.app())
    searxng_app = web.Application()
    searxng_app.router.add_get("/search", searxng.reply)
    sx_runner, sx_url = await serve(searxng_app)
    upstream.base_url = f"{up_url}/v1"
    home = Path(tempfile.mkdtemp(prefix="agent-gateway-soak-"))
    env = gateway_env(home, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model", "SEARXNG_URL": sx_url,
                             "API_SERVER_MAX_STORED_RESPONSES": "200"})
    gateway = await start_gateway(env=env)
    pid = gateway.proc.pid
    # The gateway logs to its pipes; unread, they fill and block it. Drain them, counting warnings.
    log_lines = {"stdout": 0, "stderr": 0, "warnings": 0}

    async def drain(stream: asyncio.StreamReader | None, name: str) -> None:
        while stream is not None and (line := await stream.readline()):
            log_lines[name] += 1
            log_lines["warnings"] += b" WARNING " in line or b" ERROR " in line

    drains = [asyncio.ensure_future(drain(gateway.proc.stdout, "stdout")),
              asyncio.ensure_future(drain(gateway.proc.stderr, "stderr"))]
    traffic = Traffic(gateway.base_url, upstream, random.Random(seed))
    samples: list[tuple[float, int, int, int]] = []
    start = time.monotonic()
    deadline = start + minutes * 60

    async def worker(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < deadline:
            await traffic.one(session)

    async def sampler() -> None:
        while time.monotonic() < deadline:
            samples.append((time.monotonic() - start, rss_kib(pid), fd_count(pid), sum(traffic.counts.values())))
            await asyncio.sleep(sample_every)

    try:
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            await asyncio.gather(sampler(), *(worker(session) for _ in range(concurrency)))
        await asyncio.sleep(2)  # let idle keep-alive connections settle
        samples.append((time.monotonic() - start, rss_kib(pid), fd_count(pid), sum(traffic.counts.values())))
    finally:
        try:
            await gateway.stop(timeout=30)
        finally:
            await gateway.kill()
            await asyncio.gather(*drains, return_exceptions=True)
        await up_runner.cleanup()
        await sx_runner.cleanup()

    print(f"{'t (s)':>7} {'RSS (MiB)':>10} {'fds':>5} {'requests':>9}")
    for t, rss, fds, done in samples:
        print(f"{t:7.0f} {rss / 1024:10.1f} {fds:5d} {done:9d}")
    print("requests by kind:", dict(sorted(traffic.counts.items())))
    print("failed:", dict(sorted(traffic.failures.items())) or "none")
    print(f"gateway log lines: {log_lines['stderr'] + log_lines['stdout']} ({log_lines['warnings']} warnings/errors)")
    return verdict(samples)


def verdict(samples: list[tuple[float, int, int, int]]) -> bool:
    """Flat when the last third's median RSS is within 10% (or 8 MiB) of the middle third's and the
    fd count ends within 10 of where it was after warm-up; growing otherwise."""
    if len(samples) < 6:
        print("verdict: too few samples")
        return True
    third = len(samples) // 3
    middle = sorted(s[1] for s in samples[third:2 * third])[third // 2]
    last = sorted(s[1] for s in samples[2 * third:])[(len(samples) - 2 * third) // 2]
    rss_growth = last - middle
    fd_growth = samples[-1][2] - samples[third][2]
    flat = rss_growth <= max(middle * 0.10, 8 * 1024) and fd_growth <= 10
    print(f"RSS middle third {middle / 1024:.1f} MiB -> last third {last / 1024:.1f} MiB "
          f"({rss_growth / 1024:+.1f} MiB); fds after warm-up {samples[third][2]} -> end {samples[-1][2]} "
          f"({fd_growth:+d})")
    print("verdict:", "FLAT" if flat else "GROWING")
    return flat


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sample-every", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=8)
    args = parser.parse_args()
    # The fake servers log every client that leaves mid-reply; that is the traffic, not news.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    return 0 if asyncio.run(soak(args.minutes, args.concurrency, args.sample_every, args.seed)) else 1


if __name__ == "__main__":
    sys.exit(main())
