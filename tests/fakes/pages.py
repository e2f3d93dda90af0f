"""A small web site on 127.0.0.1 for the fetcher: articles, text, binaries, redirects, slow pages.

Records every request so tests can assert that a blocked URL was never fetched.
Import the fixture explicitly: `from tests.fakes.pages import page_server  # noqa: F401`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

ARTICLE_PARAGRAPH = (
    "The river otter is a semi-aquatic mammal found across North America. It feeds mostly on fish, "
    "and spends much of the day swimming, playing and grooming its thick fur."
)

ARTICLE_HTML = f"""<!doctype html>
<html><head><title>River otters | Wildlife Notes</title>
<meta name="description" content="All about otters"></head>
<body>
<nav><a href="/">Home</a> <a href="/about">About</a> <a href="/shop">Shop</a></nav>
<article>
<h1>River otters</h1>
<p>{ARTICLE_PARAGRAPH}</p>
<p>Otters live in burrows near the water's edge and are most active at dawn and dusk, when they
hunt along the banks of rivers, lakes and marshes.</p>
<ul><li>Length: about one metre</li><li>Weight: 5 to 14 kg</li></ul>
</article>
<footer>Copyright 2026 Wildlife Notes. Cookie settings. Newsletter.</footer>
</body></html>"""


class PageServer:
    def __init__(self) -> None:
        self.requests: list[str] = []
        self.url = ""
        self.huge_bytes_sent = 0

    @web.middleware
    async def record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append(request.path_qs)
        return await handler(request)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.record])
        routes = {
            "/article": lambda: web.Response(text=ARTICLE_HTML, content_type="text/html"),
            "/notes.txt": lambda: web.Response(text="plain notes\nline two", content_type="text/plain"),
            "/data.json": lambda: web.json_response({"otters": 3}),
            "/photo.png": lambda: web.Response(body=b"\x89PNG" + bytes(64), content_type="image/png"),
            "/missing": lambda: web.Response(status=404, text="not here"),
            "/big.txt": lambda: web.Response(text="x" * 100_000, content_type="text/plain"),
            "/bogus-charset": lambda: web.Response(
                body=ARTICLE_HTML.encode(), headers={"Content-Type": "text/html; charset=x-bogus-charset"}),
        }
        for path, make in routes.items():
            app.router.add_get(path, _fixed(make))
        app.router.add_get("/redirect", self.redirect)
        app.router.add_get("/slow", self.slow)
        app.router.add_get("/huge", self.huge)
        return app

    async def huge(self, request: web.Request) -> web.StreamResponse:
        """A 50 MB HTML page, streamed in 1 MB pieces; counts how much the reader took."""
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        response.content_length = 50 * 1024 * 1024
        await response.prepare(request)
        piece = b"<p>" + b"otters " * (1024 * 1024 // 7 - 1) + b"</p>"
        piece = piece.ljust(1024 * 1024, b" ")
        self.huge_bytes_sent = 0
        for _ in range(50):
            await response.write(piece)
            self.huge_bytes_sent += len(piece)
        await response.write_eof()
        return response

    async def redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    async def slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response(text="late")


def _fixed(make: Any) -> Any:
    async def handler(request: web.Request) -> web.Response:
        return make()

    return handler


@pytest.fixture
async def page_server(aiohttp_server: Any) -> PageServer:
    pages = PageServer()
    server = await aiohttp_server(pages.app())
    pages.url = str(server.make_url("")).rstrip("/")
    return pages
