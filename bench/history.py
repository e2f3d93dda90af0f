"""Bounded history (issue 25 items 3, 4): run by hand, figures in bench/README.md.

1. A 10,000-item conversation (`conv_...`, items of ~240 bytes, 2.4 MB) gets one more turn:
   the gateway's peak RSS (VmHWM) before and after that turn, the turn's latency as a ratio to
   a direct call to the same fake upstream, and how many messages went upstream.
2. A 100-turn chain through `previous_response_id` (each input ~3 KB): the SQLite file's bytes.

    python bench/history.py          # from the checkout to measure (its own gateway code)
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.soak import serve  # noqa: E402
from tests.fakes.upstream import FakeUpstream  # noqa: E402
from tests.support.gateway_process import gateway_env, start_gateway  # noqa: E402


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


async def conversation_turn(http: aiohttp.ClientSession, base: str, upstream_url: str, fake: FakeUpstream,
                            pid: int) -> None:
    created = await (await http.post(f"{base}/v1/conversations", json={})).json()
    conversation = created["id"]
    for batch in range(500):
        items = [{"type": "message", "role": "user", "content": f"item {batch}-{n} " + "x" * 200}
                 for n in range(20)]
        async with http.post(f"{base}/v1/conversations/{conversation}/items", json={"items": items}) as resp:
            assert resp.status == 200, await resp.text()
    direct: list[float] = []
    for _ in range(6):  # the first one opens the connection: not counted
        t0 = time.perf_counter()
        async with http.post(f"{upstream_url}/v1/chat/completions",
                             json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}) as r:
            await r.read()
        direct.append(time.perf_counter() - t0)
    before = status_kib(pid, "VmHWM")
    turns: list[float] = []
    for _ in range(3):
        started = time.perf_counter()
        async with http.post(f"{base}/v1/responses", json={
                "input": "next", "conversation": conversation, "truncation": "auto"}) as resp:
            assert resp.status == 200, await resp.text()
        turns.append(time.perf_counter() - started)
    after = status_kib(pid, "VmHWM")
    turn, call = statistics.median(turns), statistics.median(direct[1:])
    print(f"10,000-item conversation, next turn: {len(fake.requests[-1]['messages'])} messages upstream; "
          f"peak RSS {before / 1024:.0f} -> {after / 1024:.0f} MiB; turn {turn * 1000:.0f} ms (median of 3) "
          f"= {turn / call:.0f}x a direct upstream call ({call * 1000:.1f} ms)")


async def chain(http: aiohttp.ClientSession, base: str) -> None:
    previous = None
    for n in range(100):
        body = {"input": f"turn {n} " + "y" * 3000, "truncation": "auto"}
        if previous:
            body["previous_response_id"] = previous
        async with http.post(f"{base}/v1/responses", json=body) as resp:
            assert resp.status == 200, await resp.text()
            previous = (await resp.json())["id"]


async def main() -> None:
    fake = FakeUpstream()
    # a real server takes a long history's body (the test fake's aiohttp default refuses over 1 MiB)
    app = web.Application(client_max_size=256 * 1024 * 1024)
    app.router.add_get("/v1/models", fake._models)
    app.router.add_post("/v1/chat/completions", fake._chat)
    runner, upstream_url = await serve(app)
    for phase in ("conversation", "chain"):
        with tempfile.TemporaryDirectory() as home:
            env = gateway_env(Path(home), {"LLM_BASE_URL": upstream_url + "/v1", "LLM_MODEL": "fake-model",
                                           "API_SERVER_WEB_TOOLS": "on_request"})
            gateway = await start_gateway(env=env)
            try:
                async with aiohttp.ClientSession() as http:
                    if phase == "conversation":
                        await conversation_turn(http, gateway.base_url, upstream_url, fake, gateway.pid)
                    else:
                        await chain(http, gateway.base_url)
            finally:
                await gateway.stop()
            if phase == "chain":
                stored = sum(p.stat().st_size for p in Path(home).rglob("responses.db*"))
                print(f"100-turn chain (inputs of 3 KB): SQLite store {stored / 1e6:.2f} MB")
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
