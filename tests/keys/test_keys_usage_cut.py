"""Usage counted per round as it arrives (issue 42, item 9): a client that leaves before the last
usage chunk, or cancels, pays for the rounds it used: what the upstream reported for each round
that ended, an estimate (counted apart in the metrics) for the round it cut."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes.tools import LookupTool
from tests.fakes.upstream import FakeUpstream, Reply, tool_call
from tests.keys.test_keys_isolation import bearer, make_key
from tests.support.gateway_process import gateway_env, run_cli

SCRAPER = "scraper-key-0123456789"


async def _usage(home: Path, name: str, at_least_calls: int) -> tuple[int, int, int]:
    """(input tokens, output tokens, model calls) of key `name` as the real CLI reads them from the
    store, once the ring's refresh (every 2 s) has written at least `at_least_calls` model calls."""
    deadline = time.monotonic() + 15
    while True:
        code, out, err = await run_cli("keys", "usage", name, env=gateway_env(home))
        assert code == 0, err
        row = out.splitlines()[1].split()
        if int(row[3]) >= at_least_calls or time.monotonic() > deadline:
            return int(row[1]), int(row[2]), int(row[3])
        await asyncio.sleep(0.3)


async def _scraped(client: Any, needle: str) -> str:
    for _ in range(100):
        async with client.get("/metrics", headers=bearer(SCRAPER)) as reply:
            text = await reply.text()
        if needle in text:
            break
        await asyncio.sleep(0.1)
    return text


async def test_a_client_that_leaves_mid_stream_pays_the_reported_round_and_an_estimate_of_the_cut_one(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream, lookup_tool: LookupTool) -> None:
    alice = await make_key(tmp_path, "alice")
    client = await make_client(tools=[lookup_tool], metrics_enabled=True, metrics_key=SCRAPER)
    upstream.queue(tool_call(("lookup", {"term": "x"}), usage=(1000, 20)),
                   Reply(text="a long answer " * 200, chunk_size=8, chunk_delay=0.01, usage=(3000, 700)))
    async with client.post("/v1/chat/completions", headers=bearer(alice), json={
            "model": "m", "stream": True, "messages": [{"role": "user", "content": "look it up " * 50}]}) as reply:
        assert reply.status == 200
        answer = 0
        async for chunk in reply.content.iter_any():
            answer += chunk.count(b"a long")
            if answer >= 20:
                break  # leave mid-answer, before the second round's usage chunk
        reply.close()
    async with asyncio.timeout(10):
        while not upstream.disconnects:
            await asyncio.sleep(0.02)
    input_tokens, output_tokens, calls = await _usage(tmp_path, "alice", 2)
    assert calls == 2
    # the first round as reported, the cut one estimated: its prompt holds the first round's
    # messages (an estimate above zero), its answer what had come back
    assert 1000 + 100 < input_tokens < 1000 + 3000, input_tokens
    assert 20 < output_tokens < 20 + 700, output_tokens
    scraped = await _scraped(client, 'key="alice",kind="estimated_tokens"')
    estimated = [line for line in scraped.splitlines()
                 if line.startswith('agent_gateway_key_usage_total{key="alice",kind="estimated_tokens"}')]
    assert estimated and float(estimated[0].split()[-1]) == input_tokens - 1000 + output_tokens - 20


async def test_a_cancelled_background_response_pays_for_its_cut_round(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream) -> None:
    alice = await make_key(tmp_path, "alice")
    client = await make_client()
    upstream.queue(Reply(text="never finished", endless=True, chunk_delay=0.02, usage=(5000, 5000)))
    async with client.post("/v1/responses", headers=bearer(alice), json={
            "model": "m", "input": "a question " * 100, "background": True}) as reply:
        response_id = (await reply.json())["id"]
    while not upstream.requests:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # some of the answer came back
    async with client.post(f"/v1/responses/{response_id}/cancel", headers=bearer(alice)) as reply:
        assert (await reply.json())["status"] == "cancelled"
    input_tokens, output_tokens, calls = await _usage(tmp_path, "alice", 1)
    assert calls == 1
    assert 200 < input_tokens < 5000 and 0 < output_tokens < 5000, (input_tokens, output_tokens)
