"""The floor: the least a Python relay can do per request, to put the gateway's cost in context.

`python -m bench.floor_proxy --upstream http://127.0.0.1:PORT --client aiohttp|httpx` serves
POST /v1/chat/completions on aiohttp's server and relays the body to the upstream unchanged,
with no validation, agent, middlewares or re-encoding: JSON in, upstream bytes out (streams
relayed piece by piece). Its CPU per request is what aiohttp's server plus the chosen client cost
on this machine, so it also answers "which client on this hot path?" on equal terms: `aiohttp` is
the one the gateway uses (providers/llm.py), `httpx` the other library. It runs on uvloop when
installed, as the gateway does.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import httpx
from aiohttp import web

from gateway.cli.serve import event_loop_runner

Relay = Callable[[bytes, bool], Awaitable[tuple[int, str, AsyncIterator[bytes]]]]


def aiohttp_relay(session: aiohttp.ClientSession, url: str) -> Relay:
    async def relay(body: bytes, stream: bool) -> tuple[int, str, AsyncIterator[bytes]]:
        response = await session.post(url, data=body, headers={"Content-Type": "application/json"})

        async def pieces() -> AsyncIterator[bytes]:
            try:
                if stream:
                    async for piece in response.content.iter_any():
                        yield piece
                else:
                    yield await response.read()
            finally:
                response.release()

        return response.status, response.headers.get("Content-Type", ""), pieces()

    return relay


def httpx_relay(client: httpx.AsyncClient, url: str) -> Relay:
    async def relay(body: bytes, stream: bool) -> tuple[int, str, AsyncIterator[bytes]]:
        request = client.build_request("POST", url, content=body, headers={"Content-Type": "application/json"})
        response = await client.send(request, stream=True)

        async def pieces() -> AsyncIterator[bytes]:
            try:
                if stream:
                    async for piece in response.aiter_raw():
                        yield piece
                else:
                    yield await response.aread()
            finally:
                await response.aclose()

        return response.status_code, response.headers.get("Content-Type", ""), pieces()

    return relay


async def serve(upstream: str, client_kind: str, port: int) -> None:
    url = upstream.rstrip("/") + "/v1/chat/completions"
    session: aiohttp.ClientSession | None = None
    client: httpx.AsyncClient | None = None
    if client_kind == "httpx":
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=1000)
        client = httpx.AsyncClient(timeout=30, limits=limits)
        relay = httpx_relay(client, url)
    else:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        relay = aiohttp_relay(session, url)

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        stream = b'"stream":true' in body or b'"stream": true' in body
        status, content_type, pieces = await relay(body, stream)
        if not stream:
            async for whole in pieces:
                return web.Response(status=status, body=whole, content_type="application/json")
        response = web.StreamResponse(status=status, headers={"Content-Type": content_type})
        await response.prepare(request)
        async for piece in pieces:
            await response.write(piece)
        await response.write_eof()
        return response

    runner = web.ServerRunner(web.Server(handle, access_log=None))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=4096)
    await site.start()
    print(f"floor proxy ({client_kind}) listening on http://127.0.0.1:{next(iter(runner.addresses))[1]}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        if session is not None:
            await session.close()
        if client is not None:
            await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description="minimal relay: the cost floor for the gateway")
    parser.add_argument("--upstream", required=True, help="the fake upstream's base URL (no /v1)")
    parser.add_argument("--client", choices=("aiohttp", "httpx"), default="aiohttp")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        event_loop_runner()(serve(args.upstream, args.client, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
