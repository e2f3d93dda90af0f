"""A configured MCP server run as a child process speaking JSON-RPC over stdin/stdout.

One process per server, started on first use and shared by every request of this gateway process.
It gets only the environment it is configured with, plus a few variables that locate programs and
say nothing secret (INHERITED: PATH, HOME, the locale ...; the `mcp` SDK passes the same kind of
set). When it exits or breaks the protocol, the calls in flight fail, and the next call starts it
again, no sooner than the back-off (1 s, doubling to 60 s, back to 1 s after a good reply) allows.
`close()` ends it: stdin closed, then SIGTERM, then SIGKILL.

Its stderr is drained (a full pipe would stall it) into a short tail kept for `mcp check`, never
logged: a server may print its configuration there.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.agent.mcp import wire
from gateway.agent.mcp.results import INVALID_REPLY, McpError, McpHttpError, McpProtocolError

INHERITED = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR")
BACKOFF_START = 1.0
BACKOFF_MAX = 60.0
_STOP_WAIT = 2.0
_METHOD_NOT_FOUND = -32601


def child_environment(configured: Mapping[str, str] | None, parent: Mapping[str, str] | None = None) -> dict[str, str]:
    parent = os.environ if parent is None else parent
    env = {name: parent[name] for name in INHERITED if name in parent}
    env.update(configured or {})
    return env


class StdioConnection:
    def __init__(self, label: str, command: str, args: Sequence[str] = (), env: Mapping[str, str] | None = None,
                 *, cwd: str | None = None, backoff_start: float = BACKOFF_START,
                 backoff_max: float = BACKOFF_MAX, max_line: int = wire.MAX_REPLY_BYTES) -> None:
        self.label = label
        self._command = command
        self._args = list(args)
        self._env = child_environment(env)
        self._cwd = cwd
        self._backoff_start = self._backoff = backoff_start
        self._backoff_max = backoff_max
        self._max_line = max_line
        self._not_before = 0.0
        self._process: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._start_lock = asyncio.Lock()
        self._write_lock = asyncio.Lock()
        self._closed = False
        self.era: str | None = None
        self.starts = 0
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    def _alive(self) -> bool:
        # The reader ends when the process exits or breaks the protocol; without it no reply arrives.
        process = self._process
        return process is not None and process.returncode is None and bool(self._tasks) and not self._tasks[0].done()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        await self._ensure_started()
        result = await self._exchange(method, params)
        self._backoff = self._backoff_start
        return result

    async def _exchange(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        if self.era == wire.MODERN:
            params = wire.modern_params(params)
        return wire.outcome(await self._send(wire.request(next(self._ids), method, params)))

    async def _send(self, message: dict[str, Any]) -> Any:
        process = self._process
        if process is None or process.stdin is None or not self._alive():
            raise McpHttpError(502, f"the MCP server {self.label} is not running")
        request_id = message["id"]
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self._write(process, message)
            return await future
        except asyncio.CancelledError:
            if self.era != wire.MODERN:  # a call given up on (its timeout): tell the server, politely
                with contextlib.suppress(Exception):
                    await self._write(process, wire.notification(
                        "notifications/cancelled", {"requestId": request_id, "reason": "timed out"}))
            raise
        finally:
            self._pending.pop(request_id, None)

    async def _write(self, process: asyncio.subprocess.Process, message: dict[str, Any]) -> None:
        assert process.stdin is not None
        async with self._write_lock:
            try:
                process.stdin.write(wire.dumps(message) + b"\n")
                await process.stdin.drain()
            except (ConnectionError, RuntimeError) as exc:
                raise McpHttpError(502, f"the MCP server {self.label} closed its input") from exc

    async def _ensure_started(self) -> None:
        if self._alive():
            return
        async with self._start_lock:
            if self._alive():
                return
            if self._closed:
                raise McpHttpError(503, f"the MCP server {self.label} is shut down")
            await self._stop_process()
            loop = asyncio.get_running_loop()
            wait = self._not_before - loop.time()
            if wait > 0:
                raise McpHttpError(503, f"the MCP server {self.label} stopped; it is started again in {wait:.0f} s")
            self._not_before = loop.time() + self._backoff
            self._backoff = min(self._backoff * 2, self._backoff_max)
            await self._start()

    async def _start(self) -> None:
        executable = shutil.which(self._command, path=self._env.get("PATH")) or self._command
        try:
            process = await asyncio.create_subprocess_exec(
                executable, *self._args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self._env, cwd=self._cwd, limit=self._max_line)
        except OSError as exc:
            raise McpHttpError(502, f"the MCP server {self.label} cannot be started: {exc.strerror or exc}") from None
        self.starts += 1
        self._process = process
        self._tasks = [asyncio.create_task(self._read_stdout(process), name=f"mcp-{self.label}-stdout"),
                       asyncio.create_task(self._read_stderr(process), name=f"mcp-{self.label}-stderr")]
        try:
            await self._handshake()
        except BaseException:
            await self._stop_process()
            raise

    async def _handshake(self) -> None:
        """2026-07-28's server/discover first (unless the era is known), else 2025-11-25's initialize."""
        if self.era in (None, wire.MODERN):
            self.era = None
            params = wire.modern_params(None)
            try:
                result = wire.outcome(await self._send(wire.request(next(self._ids), "server/discover", params)))
            except McpProtocolError:
                result = {}
            versions = result.get("supportedVersions")
            if isinstance(versions, list) and wire.MODERN in versions:
                self.era = wire.MODERN
                return
        result = wire.outcome(await self._send(wire.request(next(self._ids), "initialize", wire.initialize_params())))
        if result.get("protocolVersion") not in wire.HANDSHAKE_VERSIONS:
            raise McpProtocolError(INVALID_REPLY, "the server answered initialize with an unknown protocol version")
        process = self._process
        assert process is not None
        await self._write(process, wire.notification("notifications/initialized"))
        self.era = wire.LEGACY

    async def _read_stdout(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        failure: McpError
        try:
            while line := await process.stdout.readline():
                try:
                    message = wire.load(line)
                except McpProtocolError:
                    continue  # a stray print to stdout; the call waiting for a reply times out if none comes
                await self._dispatch(process, message)
            code = await process.wait()
            failure = McpHttpError(502, f"the MCP server {self.label} exited (status {code})")
        except ValueError:  # a line past the reader's limit
            failure = McpProtocolError(INVALID_REPLY, f"the MCP server {self.label} sent a message over "
                                                      f"{self._max_line:,} bytes; it was stopped")
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        for future in list(self._pending.values()):
            if not future.done():
                future.set_exception(failure)

    async def _dispatch(self, process: asyncio.subprocess.Process, message: Any) -> None:
        if not isinstance(message, dict):
            return
        if "method" in message and "id" in message:  # a request from the server: ping, roots, sampling ...
            if message["method"] == "ping":
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
            else:
                reply = {"jsonrpc": "2.0", "id": message["id"],
                         "error": {"code": _METHOD_NOT_FOUND, "message": "not supported by this client"}}
            with contextlib.suppress(McpError):
                await self._write(process, reply)
            return
        future = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if future is not None and not future.done() and ("result" in message or "error" in message):
            future.set_result(message)

    async def _read_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        with contextlib.suppress(ValueError, ConnectionError):
            while line := await process.stderr.readline():
                self.stderr_tail.append(line[:500].decode("utf-8", "replace").rstrip())

    async def _stop_process(self) -> None:
        process, self._process = self._process, None
        tasks, self._tasks = self._tasks, []
        if process is not None and process.returncode is None:
            if process.stdin is not None:
                with contextlib.suppress(Exception):
                    process.stdin.close()
            for stop in (None, process.terminate, process.kill):
                if stop is not None:
                    with contextlib.suppress(ProcessLookupError):
                        stop()
                try:
                    async with asyncio.timeout(_STOP_WAIT):
                        await process.wait()
                    break
                except TimeoutError:
                    continue
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def close(self) -> None:
        self._closed = True
        async with self._start_lock:
            await self._stop_process()
