"""End to end with real processes: two `serve` replicas of one configuration, each running its own
stdio child of `@modelcontextprotocol/server-everything` (npm) for the configured server, calls
through both, and a real SIGTERM of each `serve` ending its child (no orphans: the pids are gone)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import yaml

from tests.fakes.upstream import text, tool_call
from tests.support.gateway_process import gateway_env, start_gateway
from tests.support.mcp_servers import everything_stdio


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def is_everything(pid: int) -> bool:
    try:
        return b"server-everything" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent's wait is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def ask(session: aiohttp.ClientSession, base: str, word: str) -> str:
    async with session.post(f"{base}/v1/chat/completions",
                            json={"messages": [{"role": "user", "content": f"echo {word}"}]}) as response:
        assert response.status == 200, await response.text()
        return (await response.json())["choices"][0]["message"]["content"]


async def test_two_replicas_each_run_their_own_stdio_child_and_sigterm_ends_it(tmp_path, upstream):
    command, args = everything_stdio()
    gateways = []
    try:
        for index in range(2):
            home = tmp_path / f"replica{index}"
            home.mkdir()
            (home / "config.yaml").write_text(yaml.safe_dump(
                {"mcp_servers": {"ev": {"command": command, "args": args, "timeout": 30}}}))
            env = gateway_env(home, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                     "SEARXNG_URL": "http://127.0.0.1:1"})
            gateways.append(await start_gateway(env=env))
            gateways[-1].keep_draining()
        async with aiohttp.ClientSession() as session:
            for round_ in range(2):  # the second round reuses each replica's child
                for index, gateway in enumerate(gateways):
                    word = f"r{round_}g{index}"
                    upstream.queue(tool_call(("ev__echo", {"message": word})), text(f"said {word}"))
                    assert await ask(session, gateway.base_url, word) == f"said {word}"
                    told = [m for m in upstream.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
                    assert word in told
        spawned = [[pid for pid in children(gateway.pid) if is_everything(pid)] for gateway in gateways]
        assert [len(pids) for pids in spawned] == [1, 1], spawned
        assert spawned[0] != spawned[1]
        for gateway in gateways:
            assert await gateway.stop() == 0
        for _ in range(50):
            if not any(alive(pid) for pids in spawned for pid in pids):
                break
            await asyncio.sleep(0.1)
        assert not any(alive(pid) for pids in spawned for pid in pids), spawned
    finally:
        for gateway in gateways:
            await gateway.kill()
