"""A fake SearXNG JSON endpoint (`GET /search?q=..&format=json`) answering at once.

Mounted by the fake upstream (one process serves both, to leave CPU to the gateway), or run
alone: `python -m bench.fake_search --port 0`.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from aiohttp import web


def search_body(query: str) -> bytes:
    """SearXNG's JSON reply shape: `results[{url, title, content, engine, score}]`."""
    results = [
        {"url": f"https://example.org/{i}", "title": f"Result {i} for {query}",
         "content": "A short snippet of the page that matched the query. " * 3,
         "engine": "bench", "engines": ["bench"], "score": 1.0 / (i + 1), "category": "general"}
        for i in range(5)
    ]
    return json.dumps({"query": query, "number_of_results": len(results), "results": results,
                       "answers": [], "suggestions": [], "unresponsive_engines": []}).encode()


async def handle_search(request: web.BaseRequest) -> web.Response:
    if request.query.get("format") != "json":
        return web.Response(status=403, text="format not allowed")  # what SearXNG does
    return web.Response(body=search_body(request.query.get("q", "")), content_type="application/json")


async def _serve(port: int) -> None:
    app = web.Application()
    app.router.add_get("/search", handle_search)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    bound = next(iter(runner.addresses))[1]
    print(f"fake search listening on http://127.0.0.1:{bound}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(_serve(parser.parse_args().port))


if __name__ == "__main__":
    main()
