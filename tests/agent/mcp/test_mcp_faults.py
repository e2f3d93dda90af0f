"""A server that hangs, crashes, babbles, floods or forgets costs one failed call of OpenAI's kinds,
never the process, and the next call works; headers never reach an error or a log line."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from gateway.agent.mcp import wire
from gateway.agent.mcp.registry import HttpServerConfig, McpRegistry, StdioServerConfig
from gateway.agent.mcp.results import McpError, McpHttpError, McpProtocolError
from gateway.agent.mcp.server import McpServer
from gateway.agent.mcp.stdio import StdioConnection
from tests.fakes.mcp_faulty import STATE, State, faulty_app
from tests.support.mcp_servers import REPO, faulty_stdio
from tests.support.services import served

SECRET = "Bearer do-not-leak-4711"


@pytest.fixture
async def faulty() -> AsyncIterator[tuple[McpServer, State]]:
    app = faulty_app()
    async with served(app) as base:
        registry = McpRegistry([HttpServerConfig("faulty", base + "/mcp", headers={"Authorization": SECRET},
                                                 timeout=1.0)])
        try:
            yield registry.server("faulty"), app[STATE]
        finally:
            await registry.close()


async def failure_of(server: McpServer, tool: str, timeout: float | None = None) -> McpError:
    with pytest.raises(McpError) as caught:
        await server.call_tool(tool, {}, timeout=timeout)
    return caught.value


async def test_a_2025_era_server_refusing_discover_is_spoken_to_with_initialize(faulty) -> None:
    server, state = faulty
    assert (await server.call_tool("ok", {})).output == "fine"
    assert server.era == wire.LEGACY
    assert state.methods["server/discover"] == 1 and state.methods["initialize"] == 1
    assert state.methods["notifications/initialized"] == 1
    assert state.headers[-1]["MCP-Protocol-Version"] == "2025-11-25" and state.headers[-1]["Mcp-Session-Id"]


async def test_a_hanging_server_fails_the_call_as_http_error_504_and_the_next_call_works(faulty) -> None:
    server, _ = faulty
    started = time.monotonic()
    error = await failure_of(server, "hang", timeout=0.5)
    assert time.monotonic() - started < 2
    assert isinstance(error, McpHttpError) and error.error_object()["code"] == 504
    assert error.error_object()["type"] == "http_error"
    assert (await server.call_tool("ok", {})).output == "fine"


@pytest.mark.parametrize(("tool", "kind", "code"), [
    ("garbage", "mcp_protocol_error", -32700),
    ("flood", "mcp_protocol_error", -32603),
    ("flood_sse", "mcp_protocol_error", -32603),
    ("wrong_shape", "mcp_protocol_error", -32603),
    ("crash", "http_error", 502),
    ("status500", "http_error", 500),
])
async def test_a_misbehaving_reply_is_one_failed_call_of_openais_kinds(faulty, tool: str, kind: str,
                                                                       code: int) -> None:
    server, _ = faulty
    error = await failure_of(server, tool)
    assert error.error_object() == {"type": kind, "code": code, "message": error.message}
    assert (await server.call_tool("ok", {})).output == "fine"


async def test_a_session_the_server_forgot_is_opened_again_and_the_request_resent(faulty) -> None:
    server, state = faulty
    await server.call_tool("forget", {})
    assert (await server.call_tool("ok", {})).output == "fine"
    assert state.methods["initialize"] == 2


async def test_headers_go_to_the_server_and_into_no_error_or_log(faulty, caplog) -> None:
    server, state = faulty
    caplog.set_level(logging.DEBUG)
    for tool in ("garbage", "crash", "status500"):
        error = await failure_of(server, tool)
        assert "do-not-leak" not in str(error) and "do-not-leak" not in json.dumps(error.error_object())
    assert all(entry.get("Authorization") == SECRET for entry in state.headers)
    assert "do-not-leak" not in caplog.text


async def test_the_tool_list_is_kept_so_a_call_sends_no_tools_list(faulty) -> None:
    server, state = faulty
    await server.list_tools()
    await server.call_tool("ok", {})
    await server.list_tools()
    assert state.methods["tools/list"] == 1
    await server.list_tools(refresh=True)
    assert state.methods["tools/list"] == 2


def stdio(**kwargs) -> StdioConnection:
    command, args = faulty_stdio()
    return StdioConnection("faulty", command, args, kwargs.pop("env", None), cwd=str(REPO), **kwargs)


async def test_a_stdio_server_that_exits_mid_call_fails_it_and_is_started_again() -> None:
    connection = stdio(backoff_start=0.05)
    server = McpServer("faulty", connection, timeout=10)
    try:
        assert (await server.call_tool("ok", {})).output == "fine"
        first = connection.pid
        error = await failure_of(server, "exit")
        assert isinstance(error, McpHttpError) and "exited (status 3)" in error.message
        await asyncio.sleep(0.1)  # the back-off
        assert (await server.call_tool("ok", {})).output == "fine"
        assert connection.starts == 2 and connection.pid != first
    finally:
        await server.close()


async def test_a_crashing_stdio_server_is_not_restarted_before_its_back_off() -> None:
    connection = stdio(backoff_start=30)
    server = McpServer("faulty", connection, timeout=10)
    try:
        await failure_of(server, "exit")
        error = await failure_of(server, "ok")
        assert error.code == 503 and "started again in" in error.message
        assert connection.starts == 1
    finally:
        await server.close()


async def test_a_hanging_stdio_server_fails_the_call_and_answers_the_next() -> None:
    server = McpServer("faulty", stdio(), timeout=10)
    try:
        # started and initialized first: on a loaded host the child's start alone can pass 0.5 s,
        # and this test is about a call that hangs, not a start cut short
        assert (await server.call_tool("ok", {})).output == "fine"
        error = await failure_of(server, "hang", timeout=0.5)
        assert error.code == 504
        assert (await server.call_tool("ok", {})).output == "fine"
    finally:
        await server.close()


async def test_a_10_mb_stdio_line_fails_the_call_and_the_server_is_restarted() -> None:
    connection = stdio(backoff_start=0.01)
    server = McpServer("faulty", connection, timeout=10)
    try:
        error = await failure_of(server, "huge_line")
        assert isinstance(error, McpProtocolError) and "over" in error.message
        await asyncio.sleep(0.05)
        assert (await server.call_tool("ok", {})).output == "fine"
        assert connection.starts == 2
    finally:
        await server.close()


async def test_stray_stdout_lines_are_skipped() -> None:
    server = McpServer("faulty", stdio(), timeout=10)
    try:
        assert (await server.call_tool("noise", {})).output == "fine"
        assert (await failure_of(server, "garbage", timeout=0.5)).code == 504
        assert (await server.call_tool("ok", {})).output == "fine"
    finally:
        await server.close()


async def test_a_stdio_server_gets_only_its_configured_environment(monkeypatch) -> None:
    monkeypatch.setenv("LLM_API_KEY", "sk-gateway-secret")
    server = McpServer("faulty", stdio(env={"GITHUB_TOKEN": "for-this-server"}), timeout=10)
    try:
        env = json.loads((await server.call_tool("env", {})).output)
        assert env["GITHUB_TOKEN"] == "for-this-server"
        assert "LLM_API_KEY" not in env
        assert set(env) - {"GITHUB_TOKEN", "PYTHONPATH"} <= {
            "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR"}
    finally:
        await server.close()


async def test_closing_the_registry_ends_its_stdio_children() -> None:
    command, args = faulty_stdio()
    registry = McpRegistry([StdioServerConfig("faulty", command, args, cwd=str(REPO))])
    server = registry.server("faulty")
    await server.call_tool("ok", {})
    connection = server.connection
    assert isinstance(connection, StdioConnection)
    pid = connection.pid
    assert pid is not None
    await registry.close()
    assert connection.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_server_that_is_not_there_is_http_error_502() -> None:
    app = web.Application()
    async with served(app) as base:
        gone = base + "/mcp"
    registry = McpRegistry([HttpServerConfig("gone", gone, timeout=5)])
    try:
        with pytest.raises(McpHttpError) as caught:
            await registry.server("gone").list_tools()
        assert caught.value.code == 502
    finally:
        await registry.close()
