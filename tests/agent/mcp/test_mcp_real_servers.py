"""The MCP client against servers no one here wrote: the `mcp` SDK's own server in both protocol
eras, `@modelcontextprotocol/server-everything` (npm) over Streamable HTTP and stdio, and
`mcp-server-time` (PyPI) over stdio."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import pytest

from gateway.agent.mcp import wire
from gateway.agent.mcp.http import HttpConnection
from gateway.agent.mcp.registry import HttpServerConfig, McpRegistry, StdioServerConfig
from gateway.agent.mcp.results import MAX_OUTPUT_BYTES
from gateway.agent.mcp.server import McpServer
from providers.urlsafety import allow_all
from tests.support.mcp_servers import everything_http, everything_stdio, sdk_server, time_stdio


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with sdk_server() as url:
        yield url


@pytest.fixture(scope="module")
def sdk_json_url() -> Iterator[str]:
    with sdk_server(json_response=True) as url:
        yield url


@pytest.fixture(scope="module")
def everything_url() -> Iterator[str]:
    with everything_http() as url:
        yield url


@pytest.fixture
async def registry() -> AsyncIterator[McpRegistry]:
    made = McpRegistry(allowed_hosts=["127.0.0.1"])
    yield made
    await made.close()


def sdk_handle(url: str, era: str | None = None) -> McpServer:
    return McpServer("sdk", HttpConnection(url, policy=allow_all, era=era), timeout=20)


@pytest.mark.parametrize("era", [wire.MODERN, wire.LEGACY])
async def test_the_sdk_server_lists_and_runs_tools_in_each_protocol_era(sdk_url: str, era: str) -> None:
    server = sdk_handle(sdk_url, era)
    try:
        tools = await server.list_tools()
        assert {"echo", "add", "fail", "pixel"} <= {tool.name for tool in tools.tools}
        echo = tools.get("echo")
        assert echo is not None and echo.read_only and echo.input_schema["properties"]["text"]["type"] == "string"
        result = await server.call_tool("echo", {"text": "otters hold hands"})
        assert result.output == "otters hold hands" and not result.is_error
        added = await server.call_tool("add", {"a": 2, "b": 40})
        assert added.structured == {"total": 42} and json.loads(added.output) == {"total": 42}
        assert server.era == era
    finally:
        await server.close()


async def test_the_era_is_found_by_probing_the_sdk_server_speaks_2026_07_28(sdk_json_url: str) -> None:
    server = sdk_handle(sdk_json_url)
    try:
        assert (await server.call_tool("echo", {"text": "json body"})).output == "json body"
        assert server.era == wire.MODERN
    finally:
        await server.close()


async def test_a_tool_that_fails_is_a_result_with_openais_tool_execution_error(sdk_url: str) -> None:
    server = sdk_handle(sdk_url)
    try:
        result = await server.call_tool("fail", {"reason": "the river is closed"})
        assert result.is_error
        error = result.error_object()
        assert error is not None and error["type"] == "mcp_tool_execution_error"
        assert "the river is closed" in json.dumps(error["content"]) or "fail" in result.output
    finally:
        await server.close()


async def test_images_are_kept_for_vision_and_noted_in_the_text(sdk_url: str) -> None:
    server = sdk_handle(sdk_url)
    try:
        result = await server.call_tool("pixel", {})
        assert [image.mime_type for image in result.images] == ["image/png"]
        assert result.output.startswith("[image: image/png")
    finally:
        await server.close()


async def test_a_tool_named_outside_ascii_is_called_through_the_mcp_name_header(sdk_url: str) -> None:
    server = sdk_handle(sdk_url, wire.MODERN)
    try:
        assert (await server.call_tool("héllo", {})).output == "bonjour"
    finally:
        await server.close()


async def test_a_result_over_64_kb_is_cut_with_a_note(sdk_url: str) -> None:
    server = sdk_handle(sdk_url)
    try:
        result = await server.call_tool("big", {"kilobytes": 200})
        assert result.truncated
        assert len(result.output.encode()) < MAX_OUTPUT_BYTES + 200
        assert "only the first 65,536 are shown" in result.output
    finally:
        await server.close()


async def test_server_everything_over_streamable_http_is_found_to_speak_2025_11_25(
        everything_url: str, registry: McpRegistry) -> None:
    server = registry.open_url("everything", everything_url)
    try:
        tools = await server.list_tools()
        assert "echo" in {tool.name for tool in tools.tools}
        result = await server.call_tool("echo", {"message": "hello from the gateway"})
        assert "hello from the gateway" in result.output
        assert server.era == wire.LEGACY
    finally:
        await server.close()


async def test_server_everything_over_stdio(registry: McpRegistry) -> None:
    command, args = everything_stdio()
    registry.configs["everything"] = StdioServerConfig("everything", command, args, timeout=30)
    server = registry.server("everything")
    tools = await server.list_tools()
    assert "echo" in {tool.name for tool in tools.tools}
    assert "stdio works" in (await server.call_tool("echo", {"message": "stdio works"})).output
    added = await server.call_tool("get-sum", {"a": 2, "b": 3})
    assert "5" in added.output


async def test_mcp_server_time_over_stdio_answers_with_structured_content() -> None:
    command, args = time_stdio()
    registry = McpRegistry([StdioServerConfig("time", command, args, timeout=30)])
    try:
        server = registry.server("time")
        assert {"get_current_time", "convert_time"} <= {tool.name for tool in (await server.list_tools()).tools}
        result = await server.call_tool("get_current_time", {"timezone": "Europe/Paris"})
        assert not result.is_error
        assert result.structured is not None and result.structured["timezone"] == "Europe/Paris"
        assert registry.server("time") is server  # one handle (one child process) per label
    finally:
        await registry.close()


async def test_a_configured_http_server_is_reached_whatever_its_address(sdk_url: str) -> None:
    registry = McpRegistry([HttpServerConfig("sdk", sdk_url, headers={"Authorization": "Bearer s3cret"})])
    try:
        assert (await registry.server("sdk").call_tool("echo", {"text": "trusted"})).output == "trusted"
    finally:
        await registry.close()


async def test_the_era_found_for_a_url_is_remembered_for_the_next_request(
        everything_url: str, registry: McpRegistry) -> None:
    first = registry.open_url("everything", everything_url)
    await first.list_tools()
    await first.close()
    second = registry.open_url("everything", everything_url)
    try:
        assert second.era == wire.LEGACY  # known before any exchange: no server/discover probe
        await second.list_tools()
    finally:
        await second.close()


async def test_a_server_opened_in_one_task_is_used_and_closed_in_others() -> None:
    # The `mcp` SDK's anyio task groups fail here (python-sdk #922/#915/#1156): a request's task
    # may open a configured server, later requests use it, the app's cleanup closes it.
    command, args = time_stdio()
    registry = McpRegistry([StdioServerConfig("time", command, args, timeout=30)])
    server = registry.server("time")
    await asyncio.create_task(server.list_tools())
    results = await asyncio.gather(*(asyncio.create_task(
        server.call_tool("get_current_time", {"timezone": zone})) for zone in ("UTC", "Asia/Tokyo")))
    assert [result.structured["timezone"] for result in results if result.structured] == ["UTC", "Asia/Tokyo"]
    await asyncio.create_task(registry.close())
    assert server.connection.era is not None
