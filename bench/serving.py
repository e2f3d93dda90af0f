"""What the bench's fake servers share: listen on 127.0.0.1, announce the port, serve until stopped.

Each fake prints `<name> listening on http://127.0.0.1:PORT` once it accepts connections;
bench/processes.py waits for that line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from aiohttp import web


async def serve_forever(runner: web.BaseRunner, port: int, name: str, *, backlog: int = 128) -> None:
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=backlog)
    await site.start()
    bound = next(iter(runner.addresses))[1]
    print(f"{name} listening on http://127.0.0.1:{bound}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def run_main(description: str, serve: Callable[[int], Coroutine[Any, Any, None]]) -> None:
    """The command line of a fake: `--port N` (0: any free port); Ctrl-C ends it quietly."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=0)
    try:
        asyncio.run(serve(parser.parse_args().port))
    except KeyboardInterrupt:
        pass


def searxng_reply(query: str, hits: Sequence[dict[str, Any]]) -> bytes:
    """SearXNG's JSON reply shape for `hits` (`url`, `title`, `content` each)."""
    results = [{**hit, "engine": "bench", "engines": ["bench"], "score": 1.0 / (i + 1), "category": "general"}
               for i, hit in enumerate(hits)]
    return json.dumps({"query": query, "number_of_results": len(results), "results": results,
                       "answers": [], "suggestions": [], "unresponsive_engines": []}).encode()
