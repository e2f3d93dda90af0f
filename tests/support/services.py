"""A test's HTTP service on loopback, plain or over TLS: the fixture shape the providers' kit tests
share (tests/providers/test_provider_client.py, test_provider_tls.py).

`with trusting(ca, folder, monkeypatch):` makes a test CA the one the providers' TLS context
trusts (SSL_CERT_FILE, the context rebuilt); `served(app, tls=ca)` runs an aiohttp app on 127.0.0.1 and
yields its base URL: `http://127.0.0.1:PORT`, or `https://localhost:PORT` with a certificate for
`localhost` issued by `ca` (trustme).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from providers.http import tls_context


@contextmanager
def trusting(ca: Any, folder: Path, monkeypatch: Any) -> Iterator[Any]:
    """Within the block, provider calls trust `ca` (a trustme.CA) alone: SSL_CERT_FILE names its
    certificate (monkeypatch restores the variable) and the shared TLS context is rebuilt on entry
    and after the block (it is read once per process)."""
    bundle = folder / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    tls_context.cache_clear()
    try:
        yield ca
    finally:
        tls_context.cache_clear()


@asynccontextmanager
async def served(app: web.Application, *, tls: Any = None) -> AsyncIterator[str]:
    """`app` on a free loopback port; `tls` (a trustme.CA): over TLS as `localhost`."""
    server_ctx: ssl.SSLContext | None = None
    if tls is not None:
        server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.issue_cert("localhost").configure_cert(server_ctx)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"https://localhost:{port}" if tls is not None else f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
