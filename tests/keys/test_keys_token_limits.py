"""A key's token limits in one process (SQLite, counted in memory): tokens per minute reserved from
an estimate and corrected with what the upstream reported, a budget per period kept in the store
across a restart, OpenAI's token headers on every response of such a key, and the CLI's flags."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes.upstream import FakeUpstream, text
from tests.keys.test_keys_isolation import bearer, make_key
from tests.support.gateway_process import gateway_env, run_cli

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def test_tpm_refuses_a_run_while_another_holds_the_minute_and_counts_what_the_upstream_reported(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream) -> None:
    key = await make_key(tmp_path, "tokens", "--tpm", "1500")
    client = await make_client()
    upstream.queue(text("slow", delay=1.0))

    async def post(body: dict[str, Any]) -> tuple[int, Any, Any]:
        async with client.post("/v1/chat/completions", json=body, headers=bearer(key)) as reply:
            return reply.status, reply.headers, await reply.json()

    first = asyncio.ensure_future(post({**CHAT, "max_tokens": 2000}))  # its estimate alone passes 1500
    while upstream.active == 0:
        await asyncio.sleep(0.01)
    status, headers, body = await post(CHAT)
    assert status == 429, body
    assert body["error"]["type"] == "tokens" and body["error"]["code"] == "rate_limit_exceeded"
    assert "tokens per min" in body["error"]["message"] and 1 <= int(headers["Retry-After"]) <= 60
    assert headers["x-ratelimit-limit-tokens"] == "1500" and headers["x-ratelimit-remaining-tokens"] == "0"
    assert (await first)[0] == 200
    # the first run is corrected to the 15 tokens the upstream reported: the minute has room again
    async with client.get("/v1/models", headers=bearer(key)) as reply:
        assert reply.headers["x-ratelimit-remaining-tokens"] == str(1500 - 15)
        assert re.fullmatch(r"\d+ms|(\d+m)?\d+(\.\d+)?s", reply.headers["x-ratelimit-reset-tokens"])
    status, headers, _ = await post({**CHAT, "max_tokens": 10})  # reserves its input, 10 and the agent's 1024
    assert status == 200 and 0 < int(headers["x-ratelimit-remaining-tokens"]) < 1500 - 15 - 1024 - 10


async def test_a_token_budget_refuses_after_the_crossing_run_and_survives_a_restart(
        tmp_path: Path, make_client: Callable[..., Any]) -> None:
    key = await make_key(tmp_path, "budget", "--token-budget", "20", "--budget-period", "7d")
    client = await make_client()
    seen = []
    for _ in range(3):
        async with client.post("/v1/chat/completions", json=CHAT, headers=bearer(key)) as reply:
            seen.append((reply.status, reply.headers["x-ratelimit-limit-tokens"],
                         reply.headers["x-ratelimit-remaining-tokens"]))
            body = await reply.json()
    assert [s[0] for s in seen] == [200, 200, 429]  # 0 and 15 used when they came, 30 of 20 then
    assert seen[2][1:] == ("20", "0")
    assert body["error"]["code"] == "insufficient_quota" and body["error"]["type"] == "insufficient_quota"
    assert re.search(r"resets at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", body["error"]["message"]), body
    await client.close()  # its counts written as it stops
    restarted = await make_client()
    async with restarted.post("/v1/chat/completions", json=CHAT, headers=bearer(key)) as reply:
        assert reply.status == 429  # the budget is the store's, not the process's
    other = await make_key(tmp_path, "other", "--token-budget", "20")  # another key's budget is its own
    await asyncio.sleep(2.5)  # the ring reads new keys every 2 s
    async with restarted.post("/v1/chat/completions", json=CHAT, headers=bearer(other)) as reply:
        assert reply.status == 200 and "x-ratelimit-reset-tokens" not in reply.headers  # `total`: no reset


async def test_keys_create_takes_token_limits_and_list_shows_them(tmp_path: Path) -> None:
    env = gateway_env(tmp_path)
    code, _, err = await run_cli("keys", "create", "x", "--budget-period", "1d", env=env)
    assert code == 2 and "--token-budget" in err
    code, _, err = await run_cli("keys", "create", "x", "--token-budget", "5", "--budget-period", "2d", env=env)
    assert code == 2 and "invalid choice" in err
    await make_key(tmp_path, "team", "--tpm", "90000", "--token-budget", "1000000", "--budget-period", "30d")
    code, out, _ = await run_cli("keys", "list", env=env)
    assert code == 0
    header, row = out.splitlines()[:2]
    assert "TPM" in header and "BUDGET" in header and "90000" in row and "1000000/30d" in row


def test_reset_headers_are_written_as_go_durations_like_openai_s() -> None:
    from gateway.http.auth import duration

    cases = {-1.0: "0ms", 0.0: "0ms", 0.017: "17ms", 0.9996: "1000ms", 1.0: "1s", 8.6: "8.6s", 8.64: "8.64s",
             8.05: "8.05s", 10.0: "10s", 59.999: "1m0s", 60.5: "1m0.5s", 125.25: "2m5.25s", 86400.0: "1440m0s"}
    assert {seconds: duration(seconds) for seconds in cases} == cases
