"""Slow headers, the connection cap and the open-files limit, on a real `agent-gateway serve`
process (issue 15): short timeouts and small limits so each test takes a few seconds."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from tests.support.gateway_process import REPO, GatewayProcess, gateway_env, start_gateway
from tests.support.rawhttp import parse_reply, read_reply, request


class Served:
    """A gateway process whose stderr is read all along (a full pipe would stall it)."""

    def __init__(self, gateway: GatewayProcess) -> None:
        self.gateway = gateway
        self.port = int(gateway.base_url.rsplit(":", 1)[1])
        self.lines: list[str] = []
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        stream = self.gateway.proc.stderr
        assert stream is not None
        while line := await stream.readline():
            self.lines.append(line.decode(errors="replace"))

    async def stop(self) -> str:
        await self.gateway.stop()
        await asyncio.wait_for(self._reader, 10)
        return "".join(self.lines)


@contextlib.asynccontextmanager
async def serve(tmp_path: Path, settings: dict[str, str],
                preexec_fn: Callable[[], None] | None = None) -> AsyncIterator[Served]:
    env = gateway_env(tmp_path, {"LLM_BASE_URL": "http://127.0.0.1:9/v1", "LLM_MODEL": "m", **settings})
    served = Served(await start_gateway(env=env, preexec_fn=preexec_fn))
    try:
        yield served
    finally:
        log = await served.stop()
        assert "Traceback" not in log, log


async def health(port: int, timeout: float = 5) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request("GET", "/health"))
        raw, closed = await read_reply(reader, quiet=timeout)
        return parse_reply(raw, closed).status
    finally:
        writer.close()


async def test_a_connection_sending_its_head_slowly_is_closed_after_the_header_timeout(tmp_path: Path) -> None:
    async with serve(tmp_path, {"API_SERVER_HEADER_TIMEOUT": "0.5"}) as served:
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        started = time.monotonic()
        writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")

        async def one_header_line_at_a_time() -> None:
            with contextlib.suppress(ConnectionError):
                for n in range(100):
                    await asyncio.sleep(0.1)
                    writer.write(b"X-Slow-%d: y\r\n" % n)
                    await writer.drain()

        sender = asyncio.ensure_future(one_header_line_at_a_time())
        try:
            with contextlib.suppress(ConnectionError):
                assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing answered
        finally:
            sender.cancel()
            writer.close()
        assert time.monotonic() - started < 1.5
        assert await health(served.port) == 200  # the gateway itself is fine


async def test_an_idle_connection_is_closed_after_the_header_timeout(
        tmp_path: Path) -> None:
    async with serve(tmp_path, {"API_SERVER_HEADER_TIMEOUT": "0.5"}) as served:
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        started = time.monotonic()
        with contextlib.suppress(ConnectionError):
            assert await asyncio.wait_for(reader.read(), 5) == b""
        assert time.monotonic() - started < 1.5
        writer.close()


async def test_serve_raises_its_soft_open_files_limit_to_the_hard_one(tmp_path: Path) -> None:
    def low_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 2048))

    async with serve(tmp_path, {}, preexec_fn=low_soft_limit) as served:
        limits = Path(f"/proc/{served.gateway.proc.pid}/limits").read_text()
    line = next(line for line in limits.splitlines() if line.startswith("Max open files"))
    assert line.split()[3:5] == ["2048", "2048"], line


async def test_at_the_connection_cap_a_new_connection_waits_until_one_closes(tmp_path: Path) -> None:
    async with serve(tmp_path, {"API_SERVER_MAX_CONNECTIONS": "3", "API_SERVER_HEADER_TIMEOUT": "30"}) as served:
        idle = [await asyncio.open_connection("127.0.0.1", served.port) for _ in range(3)]
        await asyncio.sleep(0.3)  # all three accepted
        waiting = asyncio.ensure_future(health(served.port, timeout=10))
        await asyncio.sleep(1.0)
        assert not waiting.done(), "a fourth connection was served at a cap of three"
        idle[0][1].close()
        assert await asyncio.wait_for(waiting, 3) == 200
        for _, writer in idle[1:]:
            writer.close()


async def test_with_few_file_descriptors_a_flood_of_idle_connections_does_not_lock_the_gateway_out(
        tmp_path: Path) -> None:
    def few_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100))

    # more connections than descriptors: before the cap, accept() failed in a loop and idle
    # connections held every descriptor for an hour
    settings = {"API_SERVER_HEADER_TIMEOUT": "0.5", "API_SERVER_MAX_CONNECTIONS": "1000"}
    async with serve(tmp_path, settings, preexec_fn=few_files) as served:
        flood: list[Any] = []
        for _ in range(110):
            flood.append(await asyncio.open_connection("127.0.0.1", served.port))
        started = time.monotonic()
        assert await health(served.port, timeout=10) == 200
        assert time.monotonic() - started < 8
        for _, writer in flood:
            writer.close()
    log = "".join(served.lines)
    assert "API_SERVER_MAX_CONNECTIONS lowered from 1000 to 18" in log
    assert "out of system resource" not in log
    assert "cannot accept a connection" not in log  # the cap keeps accept() within the limit


async def test_a_path_with_a_newline_cannot_forge_a_log_line(tmp_path: Path) -> None:
    forged = "2026-12-01 07:59:59,000 ERROR agent_gateway [-] FORGED"
    async with serve(tmp_path, {}) as served:
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        writer.write(request("GET", "/v1/nothing%0a" + forged.replace(" ", "%20") + "%0d%1b[31m"))
        raw, closed = await read_reply(reader)
        writer.close()
        assert parse_reply(raw, closed).status == 404
        await asyncio.sleep(0.3)  # the access line is written in batches
    lines = served.lines
    assert not any(line.startswith(forged) for line in lines), lines
    access = [line for line in lines if "GET /v1/nothing" in line]
    assert len(access) == 1 and "\\n" + forged + "\\r\\x1b[31m 404" in access[0], access


# A server whose cap is above what its descriptors allow (make_runner would lower it), so accept()
# itself runs out of descriptors: the failure is logged a few times, not in a loop.
OUT_OF_FILES_SERVER = """
import asyncio, logging, resource, sys
from pathlib import Path
from gateway.http.app import create_app
from gateway.http.server import CappedSite, GatewayRunner
from gateway.config.settings import Settings

async def main():
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    settings = Settings(home=Path(sys.argv[1]), profile=None, llm_base_url="http://127.0.0.1:9/v1", llm_model="m")
    runner = GatewayRunner(create_app(settings, tools=[]), max_connections=1000, keepalive_timeout=30,
                           handler_cancellation=True, access_log=None)
    await runner.setup()
    await CappedSite(runner, "127.0.0.1", 0).start()
    import os
    used = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (used + 4, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    print(runner.addresses[0][1], flush=True)
    await asyncio.sleep(3)
    await runner.cleanup()

asyncio.run(main())
"""


async def test_accept_running_out_of_descriptors_is_logged_a_few_times_not_in_a_loop(tmp_path: Path) -> None:
    env = gateway_env(tmp_path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", OUT_OF_FILES_SERVER, str(tmp_path), env=env, cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    port = int(await asyncio.wait_for(proc.stdout.readline(), 30))
    flood = [await asyncio.open_connection("127.0.0.1", port) for _ in range(30)]
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    for _, writer in flood:
        writer.close()
    log = err.decode()
    failures = [line for line in log.splitlines() if "cannot accept a connection" in line]
    assert 1 <= len(failures) <= 3, log[-3000:]
    assert "out of system resource" not in log
    assert "Traceback" not in log, log[-3000:]
