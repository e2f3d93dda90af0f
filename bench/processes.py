"""Start the fake upstream and the gateway as subprocesses, and read a process's RSS."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
URL = re.compile(r"listening on (http://[^\s/]+)")


class Process:
    def __init__(self, name: str, proc: asyncio.subprocess.Process, url: str) -> None:
        self.name = name
        self.proc = proc
        self.url = url
        self._drain: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_mb(self) -> float:
        return rss_mb(self.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def keep_draining(self) -> None:
        """Read the process's output forever so a chatty log never blocks it on a full pipe."""
        async def drain(stream: asyncio.StreamReader | None) -> None:
            while stream is not None and await stream.readline():
                pass

        async def both() -> None:
            await asyncio.gather(drain(self.proc.stdout), drain(self.proc.stderr))

        self._drain = asyncio.ensure_future(both())

    async def stop(self, timeout: float = 10) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._drain is not None:
            self._drain.cancel()


def rss_mb(pid: int) -> float:
    """VmRSS of `pid` in MiB, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far, from /proc/<pid>/stat (fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def clean_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment without any gateway settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("API_SERVER_", "LLM_", "AGENT_", "WEB_", "PLUGINS_", "SEARXNG_"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


async def start(name: str, args: list[str], env: Mapping[str, str], timeout: float = 20,
                cwd: Path = REPO) -> Process:
    """Run `python <args>` in `cwd` and wait for its `listening on http://...` line."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *args, env=dict(env), cwd=str(cwd),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

    async def first_url() -> str:
        assert proc.stdout is not None and proc.stderr is not None
        while True:
            line = (await proc.stdout.readline()).decode()
            if not line:
                err = (await proc.stderr.read()).decode()
                raise RuntimeError(f"{name} exited before listening: {err[-2000:]}")
            match = URL.search(line)
            if match:
                return match.group(1)

    try:
        url = await asyncio.wait_for(first_url(), timeout)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    process = Process(name, proc, url)
    process.keep_draining()
    return process
