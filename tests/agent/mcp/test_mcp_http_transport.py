"""The Streamable HTTP client's connections: https with a checked certificate (to the address the
checked resolver answered), kept-alive connections reused, at most 8 at once, closed when a call is
cancelled or the server handle is closed; no redirect followed, no proxy from the environment."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web

from gateway.agent.mcp import http
from gateway.agent.mcp.http import MAX_CONNECTIONS, HttpConnection
from gateway.agent.mcp.registry import HttpServerConfig, McpRegistry
from gateway.agent.mcp.results import McpHttpError
from gateway.agent.mcp.server import McpServer
from providers.urlsafety import allow_all
from tests.fakes.forward_proxy import ForwardProxy
from tests.fakes.mcp_faulty import STATE, faulty_app
from tests.fakes.mcp_raw import RawMcpServer
from tests.support.services import served, trusting

trustme = pytest.importorskip("trustme")
SECRET = "Bearer do-not-leak-4711"


@pytest.fixture(autouse=True)
def fresh_tls_context() -> Iterator[None]:
    """The MCP client's TLS context is read once per process: built again for each test's CA."""
    http.tls_context.cache_clear()
    yield
    http.tls_context.cache_clear()


@pytest.fixture
async def raw() -> AsyncIterator[tuple[RawMcpServer, str]]:
    server = RawMcpServer()
    url = await server.start()
    yield server, url
    await server.close()


def raw_handle(url: str) -> McpServer:
    return McpServer("raw", HttpConnection(url, policy=allow_all), timeout=5)


async def test_a_configured_https_server_is_reached_with_its_certificate_checked(tmp_path, monkeypatch) -> None:
    app = faulty_app()
    with trusting(trustme.CA(), tmp_path, monkeypatch) as ca:
        async with served(app, tls=ca) as base:
            registry = McpRegistry([HttpServerConfig("tls", base + "/mcp", headers={"Authorization": SECRET})])
            try:
                server = registry.server("tls")
                assert (await server.call_tool("ok", {})).output == "fine"
                assert (await server.call_tool("ok", {})).output == "fine"
            finally:
                await registry.close()
    assert app[STATE].methods["tools/call"] == 2
    assert app[STATE].headers[-1]["Authorization"] == SECRET


async def test_a_request_named_https_server_allow_listed_by_name_is_reached(tmp_path, monkeypatch) -> None:
    with trusting(trustme.CA(), tmp_path, monkeypatch) as ca:
        async with served(faulty_app(), tls=ca) as base:  # https://localhost:PORT, resolved and pinned
            server = McpRegistry(allowed_hosts=["localhost"]).open_url("x", base + "/mcp")
            try:
                assert (await server.call_tool("ok", {})).output == "fine"
            finally:
                await server.close()


async def test_a_certificate_no_trusted_ca_signed_is_http_error_502_naming_tls(tmp_path, monkeypatch) -> None:
    app = faulty_app()
    with trusting(trustme.CA(), tmp_path, monkeypatch):
        async with served(app, tls=trustme.CA()) as base:  # a CA nobody configured
            registry = McpRegistry([HttpServerConfig("tls", base + "/mcp", headers={"Authorization": SECRET})])
            try:
                with pytest.raises(McpHttpError) as caught:
                    await registry.server("tls").call_tool("ok", {})
            finally:
                await registry.close()
    assert caught.value.code == 502 and "TLS" in caught.value.message and "localhost" in caught.value.message
    assert "do-not-leak" not in caught.value.message
    assert sum(app[STATE].methods.values()) == 0


async def test_a_redirect_is_not_followed(raw) -> None:
    fake, url = raw

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(url)

    app = web.Application()
    app.router.add_post("/mcp", moved)
    async with served(app) as base:
        server = raw_handle(base + "/mcp")
        try:
            with pytest.raises(McpHttpError) as caught:
                await server.call_tool("ok", {})
        finally:
            await server.close()
    assert caught.value.code == 307
    assert fake.opened == 0


async def test_the_proxy_environment_is_not_used(raw, monkeypatch, aiohttp_raw_server) -> None:
    fake, url = raw
    proxy = ForwardProxy()
    proxy.url = str((await aiohttp_raw_server(proxy.handle)).make_url("/"))
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, proxy.url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    server = raw_handle(url)
    try:
        assert (await server.call_tool("ok", {})).output == "fine"
    finally:
        await server.close()
        await proxy.close()
    assert proxy.targets == [] and fake.calls == 1


async def test_calls_reuse_one_kept_connection_and_close_closes_it(raw) -> None:
    fake, url = raw
    server = raw_handle(url)
    for _ in range(5):
        assert (await server.call_tool("ok", {})).output == "fine"
    assert fake.opened == 1 and fake.closed == 0
    await server.close()
    await fake.wait_closed(1)


async def test_a_call_cancelled_by_its_timeout_closes_its_connection(raw) -> None:
    fake, url = raw
    server = raw_handle(url)
    try:
        assert (await server.call_tool("ok", {})).output == "fine"
        with pytest.raises(McpHttpError) as caught:
            await server.call_tool("hang", {}, timeout=0.3)
        assert caught.value.code == 504
        await fake.wait_closed(1)  # the server stops working for nobody
        assert (await server.call_tool("ok", {})).output == "fine"
        assert fake.opened == 2
    finally:
        await server.close()


async def test_concurrent_calls_use_at_most_8_connections(raw) -> None:
    fake, url = raw
    server = raw_handle(url)
    try:
        results = await asyncio.gather(*(server.call_tool("slow", {}) for _ in range(20)))
    finally:
        await server.close()
    assert [result.output for result in results] == ["fine"] * 20
    assert fake.most_open == MAX_CONNECTIONS
