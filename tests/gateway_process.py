"""Servers as real subprocesses: `python -m gateway serve`, or any module that prints
`listening on http://HOST:PORT`.

The one helper for starting and stopping them, shared by the tests (what only a process shows:
the CLI, restarts, signals, kill -9) and by `bench/` (the gateway, the fake upstream and the floor
relay under load). Nothing here imports `bench/`; `bench/processes.py` builds on this module.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parent.parent
#: The line a server prints once it accepts connections; group 1 is its base URL (no path).
LISTENING = re.compile(r"listening on (http://[^\s/]+)")
#: Variables of the developer's own gateway that must not leak into a child.
_GATEWAY_VARIABLES = ("API_SERVER_", "LLM_", "AGENT_", "WEB_", "PLUGINS_", "SEARXNG_")


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without any gateway settings, with this checkout importable, plus
    `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_GATEWAY_VARIABLES)}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def gateway_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A clean environment with `home` as the gateway's home (its .env, config and store)."""
    return clean_env({"AGENT_GATEWAY_HOME": str(home), **(extra or {})})


class ServerProcess:
    """A child process that printed its listening line; its stdout and stderr stay pipes, for a
    test to read after `stop` (or drained with `keep_draining` when nobody will)."""

    def __init__(self, proc: asyncio.subprocess.Process, base_url: str, name: str = "gateway",
                 banner: str = "") -> None:
        self.proc = proc
        self.base_url = base_url
        self.name = name
        self.banner = banner  # the listening line, as printed
        self._drain: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def keep_draining(self) -> None:
        """Read the process's output forever so a chatty log never blocks it on a full pipe."""
        async def drain(stream: asyncio.StreamReader | None) -> None:
            while stream is not None and await stream.readline():
                pass

        async def both() -> None:
            await asyncio.gather(drain(self.proc.stdout), drain(self.proc.stderr))

        self._drain = asyncio.ensure_future(both())

    async def stop(self, timeout: float = 15) -> int:
        """SIGTERM, then the exit code; SIGKILL if it has not exited within `timeout` (the code is
        then -9, which a test asserting a clean exit reports as a failure)."""
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._drain is not None:
            self._drain.cancel()
        assert self.proc.returncode is not None
        return self.proc.returncode

    async def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would, and wait for it."""
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


#: Kept for the tests that construct one around a process they started themselves.
GatewayProcess = ServerProcess
P = TypeVar("P", bound=ServerProcess)


async def start_server(args: Sequence[str], *, env: Mapping[str, str], process_type: type[P],
                       name: str = "gateway", cwd: Path = REPO, timeout: float = 60) -> P:
    """Run `python <args>` in `cwd` and wait for its listening line; kill it if none comes."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *args, env=dict(env), cwd=str(cwd),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

    async def first_url() -> tuple[str, str]:
        assert proc.stdout is not None and proc.stderr is not None
        while True:
            line = (await proc.stdout.readline()).decode()
            if not line:
                err = (await proc.stderr.read()).decode()
                raise RuntimeError(f"{name} exited before listening: {err[-2000:]}")
            match = LISTENING.search(line)
            if match:
                return match.group(1), line

    try:
        url, banner = await asyncio.wait_for(first_url(), timeout)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    return process_type(proc, url, name, banner)


async def start_gateway(*args: str, env: Mapping[str, str], timeout: float = 60) -> ServerProcess:
    """Start `python -m gateway [args] serve --port 0` and wait for its listening line."""
    return await start_server(["-m", "gateway", *args, "serve", "--port", "0"], env=env,
                              process_type=ServerProcess, timeout=timeout)


async def run_cli(*args: str, env: Mapping[str, str], timeout: float = 30,
                  stdin: bytes | None = None) -> tuple[int, str, str]:
    """Run `python -m gateway ARGS` to the end: (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", *args, env=dict(env), cwd=str(REPO),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
