"""Run `python -m gateway ...` as a real subprocess for tests of what only a process shows.

Everything a gateway process writes on stderr (its log) is also copied to a file under
$AGENT_GATEWAY_TEST_LOGS when the session sets it (tests/conftest.py checks those files for keys).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LISTENING = re.compile(r"listening on (http://\S+?)/v1")
LOG_DIR_VARIABLE = "AGENT_GATEWAY_TEST_LOGS"


def gateway_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A clean environment: nothing from the developer's own gateway settings leaks in."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("API_SERVER_", "LLM_", "AGENT_", "WEB_", "PLUGINS_"))}
    env["AGENT_GATEWAY_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def tee_stderr(proc: asyncio.subprocess.Process) -> asyncio.Future[None] | None:
    """Copy the child's stderr to the session's log folder as it comes, leaving the same bytes
    readable on `proc.stderr` (a fresh reader, fed by the copy, so tests read it as before)."""
    directory = os.environ.get(LOG_DIR_VARIABLE)
    original = proc.stderr
    if not directory or original is None:
        return None
    copy = asyncio.StreamReader(limit=2**20)
    proc.stderr = copy
    path = Path(directory) / f"gateway-{proc.pid}.log"

    async def pump() -> None:
        with path.open("ab") as sink:
            while chunk := await original.read(65536):
                sink.write(chunk)
                copy.feed_data(chunk)
        copy.feed_eof()

    return asyncio.ensure_future(pump())


def keep_log(name: str, text: str) -> None:
    directory = os.environ.get(LOG_DIR_VARIABLE)
    if directory:
        with (Path(directory) / f"{name}.log").open("a", encoding="utf-8") as sink:
            sink.write(text)


class GatewayProcess:
    def __init__(self, proc: asyncio.subprocess.Process, base_url: str,
                 tee: asyncio.Future[None] | None = None) -> None:
        self.proc = proc
        self.base_url = base_url
        self._tee = tee

    async def _log_copied(self) -> None:
        if self._tee is not None:
            await asyncio.wait_for(asyncio.shield(self._tee), 10)

    async def stop(self, timeout: float = 15) -> int:
        if self.proc.returncode is None:
            self.proc.terminate()
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        await self._log_copied()
        return code

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        await self._log_copied()


async def run_cli(*args: str, env: Mapping[str, str], timeout: float = 30,
                  stdin: bytes | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", *args, env=dict(env), cwd=str(REPO),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    assert proc.returncode is not None
    keep_log(f"cli-{proc.pid}", err.decode(errors="replace"))
    return proc.returncode, out.decode(), err.decode()


async def start_gateway(*args: str, env: Mapping[str, str], timeout: float = 60,
                        preexec_fn: Callable[[], None] | None = None) -> GatewayProcess:
    """Start `serve --port 0` (plus args) and wait for its listening line. `preexec_fn` runs in
    the child before it starts (e.g. to lower its open-files limit)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", *args, "serve", "--port", "0", env=dict(env), cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, preexec_fn=preexec_fn)
    assert proc.stdout is not None and proc.stderr is not None
    tee = tee_stderr(proc)

    async def first_url() -> str:
        assert proc.stdout is not None
        while True:
            line = (await proc.stdout.readline()).decode()
            if not line:
                err = (await proc.stderr.read()).decode()  # type: ignore[union-attr]
                raise AssertionError(f"gateway exited before listening: {err[-2000:]}")
            match = LISTENING.search(line)
            if match:
                return match.group(1)

    try:
        url = await asyncio.wait_for(first_url(), timeout)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await GatewayProcess(proc, "", tee)._log_copied()
        raise
    return GatewayProcess(proc, url, tee)
