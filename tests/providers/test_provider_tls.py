"""Web providers speak TLS to their services with verification: a private CA named by SSL_CERT_FILE
is trusted (as a self-hoster's SearXNG behind its own CA would be), and a certificate from any other
CA is a clear ProviderError."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from providers.http import LazyClient, call_json, tls_context
from providers.web import ProviderError

trustme = pytest.importorskip("trustme")


@pytest.fixture
def trusted_ca(tmp_path: Any, monkeypatch: Any) -> Any:
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    tls_context.cache_clear()  # the context is read once per process; this test changes its CAs
    yield ca
    tls_context.cache_clear()


async def _https_server(certificate_authority: Any) -> AsyncIterator[str]:
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certificate_authority.issue_cert("localhost").configure_cert(server_ctx)

    async def search(request: web.Request) -> web.Response:
        return web.json_response({"results": [{"title": "over TLS", "q": request.query.get("q")}]})

    app = web.Application()
    app.router.add_get("/search", search)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"https://localhost:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def trusted_server(trusted_ca: Any) -> AsyncIterator[str]:
    async for url in _https_server(trusted_ca):
        yield url


@pytest.fixture
async def untrusted_server(trusted_ca: Any) -> AsyncIterator[str]:
    async for url in _https_server(trustme.CA()):  # a CA nobody configured
        yield url


async def test_a_service_behind_the_configured_ca_is_reached_over_tls(trusted_server: str) -> None:
    client = LazyClient(5)
    try:
        body = await call_json(client.get(), "SearXNG", "GET", f"{trusted_server}/search", params={"q": "otters"})
    finally:
        await client.aclose()
    assert body == {"results": [{"title": "over TLS", "q": "otters"}]}


async def test_a_certificate_from_another_ca_is_refused_with_a_clear_error(untrusted_server: str) -> None:
    client = LazyClient(5)
    try:
        with pytest.raises(ProviderError) as refused:
            await call_json(client.get(), "SearXNG", "GET", f"{untrusted_server}/search")
    finally:
        await client.aclose()
    assert "SearXNG could not be reached" in str(refused.value)
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)

