"""Stored responses and conversations survive a restart of the gateway process on the same home."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from tests.fakes.upstream import text

REPO_ROOT = Path(__file__).resolve().parent.parent


async def start_gateway(home: Path, upstream_url: str) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("API_SERVER_", "LLM_", "AGENT_"))}
    env.update(AGENT_GATEWAY_HOME=str(home), LLM_BASE_URL=upstream_url, LLM_MODEL="fake-model")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--port", "0"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), timeout=20)
    match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
    assert match, f"no listening line from the gateway: {line!r}"
    return proc, match.group(1)


async def stop_gateway(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.to_thread(proc.wait, 10)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


async def test_a_restarted_gateway_still_knows_responses_and_conversations(tmp_path: Path, upstream: Any) -> None:
    upstream.queue(text("A1"), text("A2"))
    proc, base_url = await start_gateway(tmp_path, upstream.base_url)
    try:
        async with AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0) as sdk:
            first = await sdk.responses.create(model="m", input="Q1", conversation="chat")
    finally:
        await stop_gateway(proc)

    proc, base_url = await start_gateway(tmp_path, upstream.base_url)
    try:
        async with AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0) as sdk:
            again = await sdk.responses.retrieve(first.id)
            assert again.output_text == "A1"
            await sdk.responses.create(model="m", input="Q2", conversation="chat")
    finally:
        await stop_gateway(proc)
    sent = upstream.requests[-1]["messages"][1:]
    assert [(m["role"], m["content"]) for m in sent] == [("user", "Q1"), ("assistant", "A1"), ("user", "Q2")]
