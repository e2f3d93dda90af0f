"""The bounds a request-named MCP server lives within: public addresses only unless allow-listed,
at most 128 tools kept, SSE events read within a size cap; and no MCP code in an idle gateway."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from gateway.agent.mcp import wire
from gateway.agent.mcp.http import McpBlockedUrlError
from gateway.agent.mcp.registry import McpRegistry
from gateway.agent.mcp.results import MAX_TOOLS, McpProtocolError, parse_tools
from tests.fakes.mcp_faulty import STATE, faulty_app
from tests.providers.test_idle_imports import modules_of_started_gateway
from tests.support.services import served


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/mcp", "http://10.1.2.3/mcp", "http://[::1]/mcp",
                                 "http://169.254.169.254/mcp", "http://2130706433/mcp", "file:///etc/passwd"])
def test_a_request_named_server_at_a_non_public_address_is_refused_before_any_traffic(url: str) -> None:
    with pytest.raises(McpBlockedUrlError) as caught:
        McpRegistry().open_url("x", url)
    assert caught.value.code == 400 and caught.value.error_object()["type"] == "http_error"


async def test_a_name_resolving_to_loopback_is_refused_when_connecting() -> None:
    app = faulty_app()
    async with served(app) as base:
        server = McpRegistry().open_url("x", base.replace("127.0.0.1", "localhost") + "/mcp")
        try:
            with pytest.raises(McpBlockedUrlError) as caught:
                await server.list_tools()
            assert "loopback" in caught.value.message
        finally:
            await server.close()
        assert sum(app[STATE].methods.values()) == 0


async def test_an_allow_listed_host_may_be_private() -> None:
    app = faulty_app()
    async with served(app) as base:
        for host, url in (("127.0.0.1", base + "/mcp"), ("LOCALHOST", base.replace("127.0.0.1", "localhost") + "/mcp")):
            server = McpRegistry(allowed_hosts=[host]).open_url("x", url)
            try:
                assert (await server.call_tool("ok", {})).output == "fine"
            finally:
                await server.close()


def test_at_most_128_tools_are_kept_per_server() -> None:
    page = {"tools": [{"name": f"t{n}", "inputSchema": {"type": "object"}} for n in range(200)]
            + [{"name": 5, "inputSchema": {}}, "not a tool"]}
    tools = parse_tools([page])
    assert len(tools.tools) == MAX_TOOLS and tools.dropped == 200 - MAX_TOOLS + 2
    assert tools.tools[0].name == "t0" and tools.tools[-1].name == "t127"


def test_a_tools_list_without_tools_is_a_protocol_error() -> None:
    with pytest.raises(McpProtocolError):
        parse_tools([{"nothing": []}])


async def chunks(*pieces: bytes) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


async def test_sse_events_are_joined_across_chunks_and_lines() -> None:
    body = (b": comment\r\nid: 1\r\ndata:\r\n\r\n", b"event: message\ndata: {\"a\":\ndata: 1}\n", b"\ndata: [2]")
    assert [message async for message in wire.sse_messages(chunks(*body))] == [{"a": 1}, [2]]


async def test_an_sse_event_over_the_cap_is_a_protocol_error() -> None:
    with pytest.raises(McpProtocolError):
        [message async for message in wire.sse_messages(chunks(b"data: " + b"1" * 5000), max_event=1000)]


def test_a_started_gateway_imports_no_mcp_code(tmp_path) -> None:
    loaded = modules_of_started_gateway(tmp_path)
    assert not {name for name in loaded if name.startswith("gateway.agent.mcp") or name.split(".")[0] in {
        "mcp", "mcp_types", "pydantic", "anyio", "httpx2", "starlette", "uvicorn"}}


def test_arguments_with_lone_surrogates_are_still_sent_as_valid_json() -> None:
    body = wire.dumps(wire.request(1, "tools/call", {"name": "t\ud800", "arguments": {"q": "a\udfffb"}}))
    assert json.loads(body)["params"]["arguments"]["q"] == "a\udfffb"  # as a server reads it
    assert wire.header_value("t\ud800").startswith("=?base64?")


def test_a_reply_with_a_lone_surrogate_is_read_with_u_fffd_in_its_place() -> None:
    # as the upstream's replies are (gateway/common/json_in.py): text that UTF-8 can encode downstream
    assert wire.load(b'{"text": "a\\ud800b \\ud83d\\ude00", "n": 12345678901234567890123}') == {
        "text": "a\ufffdb \U0001f600", "n": 12345678901234567890123}


async def test_a_tool_list_in_pages_is_read_to_its_end() -> None:
    from tests.fakes.mcp_faulty import TOOLS

    app = faulty_app(page_size=5)
    async with served(app) as base:
        server = McpRegistry(allowed_hosts=["127.0.0.1"]).open_url("x", base + "/mcp")
        try:
            assert [tool.name for tool in (await server.list_tools()).tools] == TOOLS
            assert app[STATE].methods["tools/list"] == 3
        finally:
            await server.close()
