"""Bounded history (issue 25 items 3, 4): run by hand, figures in bench/README.md.

1. A 10,000-item conversation (`conv_...`, items of ~240 bytes, 2.4 MB) gets one more turn:
   the gateway's peak RSS (VmHWM) before and after that turn, the turn's latency as a ratio to
   a direct call to the same fake upstream, and how many messages went upstream.
2. A 100-turn chain through `previous_response_id` (each input ~3 KB): the SQLite file's bytes.

    python bench/history.py          # from the checkout to measure (its own gateway code)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

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


async def main() -> None:
    fake = FakeUpstream()
    runner, upstream_url = await serve(fake.app())
    with tempfile.TemporaryDirectory() as home:
        env = gateway_env(Path(home), {"LLM_BASE_URL": upstream_url + "/v1", "LLM_MODEL": "fake-model",
                                       "API_SERVER_WEB_TOOLS": "on_request"})
        gateway = await start_gateway(env=env)
        try:
            async with aiohttp.ClientSession() as http:
                base = gateway.base_url
                created = await (await http.post(f"{base}/v1/conversations", json={})).json()
                conversation = created["id"]
                for batch in range(500):
                    items = [{"type": "message", "role": "user", "content": f"item {batch}-{n} " + "x" * 200}
                             for n in range(20)]
                    async with http.post(f"{base}/v1/conversations/{conversation}/items",
                                         json={"items": items}) as resp:
                        assert resp.status == 200, await resp.text()
                before = status_kib(gateway.pid, "VmHWM")
                started = time.perf_counter()
                direct = 0.0
                for _ in range(5):
                    t0 = time.perf_counter()
                    async with http.post(f"{upstream_url}/v1/chat/completions",
                                         json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}) as r:
                        await r.read()
                    direct += (time.perf_counter() - t0) / 5
                started = time.perf_counter()
                async with http.post(f"{base}/v1/responses", json={
                        "input": "next", "conversation": conversation, "truncation": "auto"}) as resp:
                    assert resp.status == 200, await resp.text()
                turn = time.perf_counter() - started
                after = status_kib(gateway.pid, "VmHWM")
                print(f"10,000-item conversation, next turn: {len(fake.requests[-1]['messages'])} messages "
                      f"upstream; peak RSS {before / 1024:.0f} -> {after / 1024:.0f} MiB; turn {turn * 1000:.0f} ms "
                      f"= {turn / direct:.0f}x a direct upstream call ({direct * 1000:.1f} ms)")
                previous = None
                for n in range(100):
                    body = {"input": f"turn {n} " + "y" * 3000, "truncation": "auto"}
                    if previous:
                        body["previous_response_id"] = previous
                    async with http.post(f"{base}/v1/responses", json=body) as resp:
                        assert resp.status == 200, await resp.text()
                        previous = (await resp.json())["id"]
        finally:
            await gateway.stop()
        stored = sum(p.stat().st_size for p in Path(home).rglob("responses.db*"))
        print(f"100-turn chain (+ the conversation above): SQLite store {stored / 1e6:.1f} MB")
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
