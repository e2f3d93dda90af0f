"""A fake SearXNG JSON endpoint (`GET /search?q=..&format=json`) answering at once.

Mounted by the fake upstream (one process serves both, to leave CPU to the gateway), or run
alone: `python -m bench.fake_search --port 0`.
"""

from __future__ import annotations

from aiohttp import web

from bench.serving import run_main, searxng_reply, serve_forever


def search_body(query: str) -> bytes:
    """Five results for any query."""
    return searxng_reply(query, [
        {"url": f"https://example.org/{i}", "title": f"Result {i} for {query}",
         "content": "A short snippet of the page that matched the query. " * 3}
        for i in range(5)
    ])


async def handle_search(request: web.BaseRequest) -> web.Response:
    if request.query.get("format") != "json":
        return web.Response(status=403, text="format not allowed")  # what SearXNG does
    return web.Response(body=search_body(request.query.get("q", "")), content_type="application/json")


async def _serve(port: int) -> None:
    app = web.Application()
    app.router.add_get("/search", handle_search)
    await serve_forever(web.AppRunner(app, access_log=None), port, "fake search")


def main() -> None:
    run_main(__doc__ or "", _serve)


if __name__ == "__main__":
    main()
