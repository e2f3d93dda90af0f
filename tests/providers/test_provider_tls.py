"""Web providers speak TLS to their services with verification: a private CA named by SSL_CERT_FILE
is trusted (as a self-hoster's SearXNG behind its own CA would be), and a certificate from any other
CA is a clear ProviderError."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiohttp import web

from providers.http import ServiceClient, call_json
from providers.web import ProviderError
from tests.support.services import served, trusting

trustme = pytest.importorskip("trustme")


@pytest.fixture
def trusted_ca(tmp_path: Any, monkeypatch: Any) -> Iterator[Any]:
    with trusting(trustme.CA(), tmp_path, monkeypatch) as ca:
        yield ca


def _search_app() -> web.Application:
    async def search(request: web.Request) -> web.Response:
        return web.json_response({"results": [{"title": "over TLS", "q": request.query.get("q")}]})

    app = web.Application()
    app.router.add_get("/search", search)
    return app


@pytest.fixture
async def trusted_server(trusted_ca: Any) -> AsyncIterator[str]:
    async with served(_search_app(), tls=trusted_ca) as url:
        yield url


@pytest.fixture
async def untrusted_server(trusted_ca: Any) -> AsyncIterator[str]:
    async with served(_search_app(), tls=trustme.CA()) as url:  # a CA nobody configured
        yield url


async def test_a_service_behind_the_configured_ca_is_reached_over_tls(trusted_server: str) -> None:
    client = ServiceClient(5)
    try:
        body = await call_json(client, "SearXNG", "GET", f"{trusted_server}/search", params={"q": "otters"})
    finally:
        await client.aclose()
    assert body == {"results": [{"title": "over TLS", "q": "otters"}]}


async def test_a_certificate_from_another_ca_is_refused_with_a_clear_error(untrusted_server: str) -> None:
    client = ServiceClient(5)
    try:
        with pytest.raises(ProviderError) as refused:
            await call_json(client, "SearXNG", "GET", f"{untrusted_server}/search")
    finally:
        await client.aclose()
    assert "SearXNG could not be reached" in str(refused.value)
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
