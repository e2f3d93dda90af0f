"""Storage faults through HTTP: kill -9 during a burst of Responses writes, a read-only database,
a full disk. Acknowledged responses survive; faults are a clear 503, never a crash."""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.upstream import Reply
from tests.support.gateway_process import LISTENING, REPO, GatewayProcess, gateway_env, start_gateway
from tests.support.helpers import assert_error_envelope


def env_for(home: Path, upstream: Any, **extra: str) -> dict[str, str]:
    return gateway_env(home, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model", **extra})


async def test_kill_9_during_a_write_burst_loses_no_acknowledged_response(tmp_path, upstream):
    upstream.default = Reply(text="stored answer")
    gateway = await start_gateway(env=env_for(tmp_path, upstream, API_SERVER_MAX_STORED_RESPONSES="1000"))
    acknowledged: list[str] = []

    async def writer(session: aiohttp.ClientSession, n: int) -> None:
        for i in range(1000):
            try:
                async with session.post(f"{gateway.base_url}/v1/responses", json={"input": f"w{n}-{i}"}) as resp:
                    if resp.status == 200:
                        acknowledged.append((await resp.json())["id"])
            except (TimeoutError, aiohttp.ClientError):
                return

    async with aiohttp.ClientSession() as session:
        writers = [asyncio.ensure_future(writer(session, n)) for n in range(16)]
        async with asyncio.timeout(30):
            while len(acknowledged) < 60:
                await asyncio.sleep(0.01)
        await gateway.kill()  # SIGKILL mid-burst
        await asyncio.gather(*writers)
    assert len(acknowledged) >= 60

    gateway = await start_gateway(env=env_for(tmp_path, upstream, API_SERVER_MAX_STORED_RESPONSES="1000"))
    try:
        async with aiohttp.ClientSession() as session:
            for response_id in acknowledged:
                async with session.get(f"{gateway.base_url}/v1/responses/{response_id}") as resp:
                    assert resp.status == 200, response_id
    finally:
        await gateway.stop()

    # The eviction bound still holds on the recovered database.
    gateway = await start_gateway(env=env_for(tmp_path, upstream, API_SERVER_MAX_STORED_RESPONSES="10"))
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{gateway.base_url}/v1/responses", json={"input": "one more"}) as resp:
                assert resp.status == 200
                newest = (await resp.json())["id"]
            kept = 0
            for response_id in [*acknowledged, newest]:
                async with session.get(f"{gateway.base_url}/v1/responses/{response_id}") as resp:
                    kept += resp.status == 200
            assert kept == 10
    finally:
        await gateway.stop()


def _chattr(path: Path, flag: str) -> bool:
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


async def test_a_read_only_database_is_a_clear_503_and_chat_still_works(tmp_path, upstream, make_client, caplog):
    client = await make_client()
    assert (await client.post("/v1/responses", json={"input": "first"})).status == 200
    db = tmp_path / "responses.db"
    await client.close()
    db.chmod(0o444)
    if os.geteuid() == 0 and not _chattr(db, "+i"):
        pytest.skip("running as root on a filesystem without chattr +i")
    try:
        client = await make_client()
        resp = await client.post("/v1/responses", json={"input": "second"})
        assert resp.status == 503
        assert resp.headers["Retry-After"]
        body = await resp.json()
        assert_error_envelope(body, code="service_unavailable")
        # the client learns that the store is unavailable, the log what and where
        assert body["error"]["message"] == "The response store is unavailable; retry shortly."
        logged = "\n".join(r.getMessage() for r in caplog.records)
        assert ("read-only" in logged or "cannot be opened" in logged) and str(db) in logged
        chat = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        assert chat.status == 200
    finally:
        if os.geteuid() == 0:
            _chattr(db, "-i")
        db.chmod(0o644)


async def test_a_full_disk_is_a_clear_503_and_the_gateway_keeps_serving(tmp_path, upstream):
    """RLIMIT_FSIZE makes every file write past 2 MB fail as on a full disk (Python ignores SIGXFSZ)."""
    limit = 2 * 1024 * 1024

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = await asyncio.create_subprocess_exec(
        # a window that takes the big inputs below: the disk, not the context, is what runs out
        sys.executable, "-m", "gateway", "serve", "--port", "0",
        env=env_for(tmp_path, upstream, LLM_CONTEXT_WINDOW="1000000"), cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, preexec_fn=small_disk)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
    match = LISTENING.search(line)
    assert match, line
    gateway = GatewayProcess(proc, match.group(1))
    big_input = "x" * 400_000
    try:
        statuses = []
        async with aiohttp.ClientSession() as session:
            for _ in range(12):
                async with session.post(f"{gateway.base_url}/v1/responses", json={"input": big_input}) as resp:
                    statuses.append(resp.status)
                    if resp.status == 503:
                        body = await resp.json()
                        assert_error_envelope(body, code="service_unavailable")
                        assert "response store" in body["error"]["message"]
                        break
            assert statuses[-1] == 503, statuses
            async with session.get(f"{gateway.base_url}/v1/models") as resp:
                assert resp.status == 200
            async with session.post(f"{gateway.base_url}/v1/chat/completions",
                                    json={"messages": [{"role": "user", "content": "hi"}]}) as resp:
                assert resp.status == 200
        assert proc.returncode is None
    finally:
        await gateway.stop()
