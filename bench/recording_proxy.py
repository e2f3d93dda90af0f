"""A pass-through proxy that writes down what a client sends, for bench/openwebui_screenshot.py.

`python -m bench.recording_proxy --port 0 --target http://127.0.0.1:GW --out requests.jsonl` forwards
every request to the target unchanged (streams included) and appends one JSON line per request:
method, path, the headers (the Authorization value left out), and for a chat request `stream`, the
offered tool names and the start of the last user message. That is how the screenshots prove what
Open WebUI sends (its User-Agent, its tools, its templates), which the gateway recognises it by.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench.serving import serve_forever

HOP = {"host", "content-length", "transfer-encoding", "connection"}


def summary(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        return {}
    users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    last = users[-1].get("content") if users else ""
    tools = [(t.get("function") or {}).get("name") for t in body.get("tools") or []]
    return {"stream": body.get("stream"), "tools": tools,
            "last_user": (last if isinstance(last, str) else json.dumps(last))[:160]}


def app(target: str, out: Path) -> web.Application:
    async def forward(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        with out.open("a") as sink:
            sink.write(json.dumps({"method": request.method, "path": request.path_qs,
                                   "headers": {k: v for k, v in headers.items() if k.lower() != "authorization"},
                                   **summary(body)}) + "\n")
        session: aiohttp.ClientSession = request.app["session"]
        async with session.request(request.method, target + request.path_qs, data=raw, headers=headers) as reply:
            response = web.StreamResponse(status=reply.status, headers={
                k: v for k, v in reply.headers.items() if k.lower() not in HOP | {"content-encoding"}})
            await response.prepare(request)
            async for chunk in reply.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    async def session_ctx(application: web.Application) -> Any:
        application["session"] = aiohttp.ClientSession(auto_decompress=True)
        yield
        await application["session"].close()

    application = web.Application(client_max_size=64 * 1024 * 1024)
    application.cleanup_ctx.append(session_ctx)
    application.router.add_route("*", "/{tail:.*}", forward)
    return application


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--target", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    try:
        asyncio.run(serve_forever(web.AppRunner(app(args.target.rstrip("/"), Path(args.out)), access_log=None),
                                  args.port, "recording proxy"))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
