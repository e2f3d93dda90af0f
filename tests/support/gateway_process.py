"""Servers as real subprocesses: `python -m gateway serve`, or any module that prints
`listening on http://HOST:PORT`.

The one helper for starting and stopping them, shared by the tests (what only a process shows:
the CLI, restarts, signals, kill -9) and by `bench/` (the gateway, the fake upstream and the floor
relay under load). Nothing here imports `bench/`; `bench/processes.py` builds on this module.

Everything a gateway process writes on stderr (its log) is also copied to a file under
$AGENT_GATEWAY_TEST_LOGS when the session sets it (tests/conftest.py checks those files for keys).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parents[2]
#: The line a server prints once it accepts connections; group 1 is its base URL (no path).
LISTENING = re.compile(r"listening on (http://[^\s/]+)")
#: Variables of the developer's own gateway that must not leak into a child.
_GATEWAY_VARIABLES = ("API_SERVER_", "LLM_", "AGENT_", "WEB_", "PLUGINS_", "SEARXNG_")
#: Where the session wants every child's stderr copied (tests/conftest.py reads it).
LOG_DIR_VARIABLE = "AGENT_GATEWAY_TEST_LOGS"


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without any gateway settings, with this checkout importable, plus
    `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_GATEWAY_VARIABLES)}
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


def gateway_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A clean environment with `home` as the gateway's home (its .env, config and store)."""
    return clean_env({"AGENT_GATEWAY_HOME": str(home), **(extra or {})})


class ServerProcess:
    """A child process that printed its listening line; its stdout and stderr stay pipes, for a
    test to read after `stop` (or drained with `keep_draining` when nobody will)."""

    def __init__(self, proc: asyncio.subprocess.Process, base_url: str, name: str = "gateway",
                 banner: str = "", tee: asyncio.Future[None] | None = None) -> None:
        self.proc = proc
        self.base_url = base_url
        self.name = name
        self.banner = banner  # the listening line, as printed
        self._drain: asyncio.Task[None] | None = None
        self._tee = tee  # the stderr copy to the session's log folder, when there is one

    async def _log_copied(self) -> None:
        if self._tee is not None:
            await asyncio.wait_for(asyncio.shield(self._tee), 10)

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
        await self._log_copied()
        assert self.proc.returncode is not None
        return self.proc.returncode

    async def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would, and wait for it."""
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        await self._log_copied()


#: Kept for the tests that construct one around a process they started themselves.
GatewayProcess = ServerProcess
P = TypeVar("P", bound=ServerProcess)


async def start_server(args: Sequence[str], *, env: Mapping[str, str], process_type: type[P],
                       name: str = "gateway", cwd: Path = REPO, timeout: float = 60,
                       preexec_fn: Callable[[], None] | None = None) -> P:
    """Run `python <args>` in `cwd` and wait for its listening line; kill it if none comes.
    `preexec_fn` runs in the child before it starts (e.g. to lower its open-files limit)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *args, env=dict(env), cwd=str(cwd),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, preexec_fn=preexec_fn)
    tee = tee_stderr(proc)

    async def first_url() -> tuple[str, str]:
        assert proc.stdout is not None and proc.stderr is not None
        while True:
            line = (await proc.stdout.readline()).decode()
            if not line:
                err = (await proc.stderr.read()).decode()
                raise RuntimeError(f"{name} exited before listening: {err[-2000:]}")
            match = LISTENING.search(line)
            if match:
                return match.group(1), line.strip()

    try:
        url, banner = await asyncio.wait_for(first_url(), timeout)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await process_type(proc, "", name, "", tee)._log_copied()
        raise
    return process_type(proc, url, name, banner, tee)


async def start_gateway(*args: str, env: Mapping[str, str], timeout: float = 60,
                        preexec_fn: Callable[[], None] | None = None) -> ServerProcess:
    """Start `python -m gateway [args] serve --port 0` and wait for its listening line."""
    return await start_server(["-m", "gateway", *args, "serve", "--port", "0"], env=env,
                              process_type=ServerProcess, timeout=timeout, preexec_fn=preexec_fn)


async def run_cli(*args: str, env: Mapping[str, str], timeout: float = 30,
                  stdin: bytes | None = None) -> tuple[int, str, str]:
    """Run `python -m gateway ARGS` to the end: (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", *args, env=dict(env), cwd=str(REPO),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    assert proc.returncode is not None
    keep_log(f"cli-{proc.pid}", err.decode(errors="replace"))
    return proc.returncode, out.decode(), err.decode()
