"""Run `python -m gateway ...` as a real subprocess for tests of what only a process shows."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LISTENING = re.compile(r"listening on (http://\S+?)/v1")


def gateway_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A clean environment: nothing from the developer's own gateway settings leaks in."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("API_SERVER_", "LLM_", "AGENT_", "WEB_", "PLUGINS_"))}
    env["AGENT_GATEWAY_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


class GatewayProcess:
    def __init__(self, proc: asyncio.subprocess.Process, base_url: str, listening_line: str = "") -> None:
        self.proc = proc
        self.base_url = base_url
        self.listening_line = listening_line  # serve's start-up line, as printed

    async def stop(self, timeout: float = 15) -> int:
        if self.proc.returncode is None:
            self.proc.terminate()
        return await asyncio.wait_for(self.proc.wait(), timeout)

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


async def run_cli(*args: str, env: Mapping[str, str], timeout: float = 30,
                  stdin: bytes | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", *args, env=dict(env), cwd=str(REPO),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def start_gateway(*args: str, env: Mapping[str, str], timeout: float = 60) -> GatewayProcess:
    """Start `serve --port 0` (plus args) and wait for its listening line."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", *args, "serve", "--port", "0", env=dict(env), cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None

    async def first_line() -> str:
        assert proc.stdout is not None
        while True:
            line = (await proc.stdout.readline()).decode()
            if not line:
                err = (await proc.stderr.read()).decode()  # type: ignore[union-attr]
                raise AssertionError(f"gateway exited before listening: {err[-2000:]}")
            if LISTENING.search(line):
                return line

    try:
        line = await asyncio.wait_for(first_line(), timeout)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    match = LISTENING.search(line)
    assert match is not None
    return GatewayProcess(proc, match.group(1), line.strip())
