"""The HTTP server's floor under callgrind: what serving one JSON POST costs before the gateway does anything.

    PYTHONHASHSEED=0 nice -n 10 python -m bench.server_floor app --requests 300
    PYTHONHASHSEED=0 nice -n 10 python -m bench.server_floor all --requests 300

Each variant serves POST /v1/chat/completions with the chat bench's request body
(bench/scenarios.py `chat_body`), parses it with orjson and answers a fixed chat completion (JSON,
~0.4 KB), on uvloop, as `serve` runs; the load is bench/callgrind.py's (a warm-up, the counters
zeroed, exactly `--requests` requests over `--concurrency` keep-alive connections, a dump), so the
figures compare with `python -m bench.callgrind chat`:

- `app`: aiohttp's `web.Application`, its router and one pass-through middleware, the handler
  `await request.read()` then a `web.Response` (what the gateway is built on);
- `app-prepare`: `app` with an `on_response_prepare` hook setting the gateway's three fixed headers
  (the signal's own cost);
- `server`: aiohttp's low-level `web.Server(handler)`: no Application, router, middlewares, signals;
- `server-raw`: `server` with the reply written as prebuilt bytes (no `web.Response`, no header
  serialisation: aiohttp's request object, task and parser only);
- `protocol`: a bare asyncio protocol over httptools (what uvicorn does), the ceiling for Python.

The load generator runs outside valgrind; only the server's instructions are counted.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.callgrind import free_port, send, total_instructions
from bench.scenarios import chat_body

VARIANTS = ("app", "app-prepare", "server", "server-raw", "protocol")
PATH = "/v1/chat/completions"
START_TIMEOUT = 900.0  # seconds: imports run ~50x slower under valgrind, more on a loaded host

ANSWER = {
    "id": "chatcmpl-0123456789abcdef01234567", "object": "chat.completion", "created": 1764900000,
    "model": "bench-model", "system_fingerprint": None,
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello! How can I help you today?",
                                         "refusal": None, "annotations": []},
                 "logprobs": None, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18},
}
HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "X-Request-Id": "req_0123456789abcdef0123456789abcdef"}


# -- the servers (run under valgrind with --serve) --

def serve(variant: str, port: int) -> None:
    import orjson
    import uvloop

    answer = orjson.dumps(ANSWER)
    if variant == "protocol":
        uvloop.run(_serve_protocol(port, answer))
        return
    from aiohttp import web

    async def json_handler(request: web.BaseRequest) -> web.Response:
        orjson.loads(await request.read())
        return web.Response(body=answer, content_type="application/json")

    if variant in ("app", "app-prepare"):
        @web.middleware
        async def passing(request: web.Request, handler: Any) -> web.StreamResponse:
            return await handler(request)  # type: ignore[no-any-return]

        app = web.Application(middlewares=[passing])
        app.router.add_post(PATH, json_handler)
        if variant == "app-prepare":
            async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
                response.headers.update(HEADERS)

            app.on_response_prepare.append(on_prepare)
        uvloop.run(_serve_aiohttp(app, port))
        return
    raw = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(answer)) + answer

    class RawReply:
        """What `RequestHandler.finish_response` needs of a reply: prebuilt bytes written at prepare."""

        keep_alive = True

        async def prepare(self, request: web.BaseRequest) -> None:
            request.transport.write(raw)  # type: ignore[union-attr]

        async def write_eof(self) -> None:
            pass

    async def raw_handler(request: web.BaseRequest) -> Any:
        orjson.loads(await request.read())
        return RawReply()

    uvloop.run(_serve_low_level(raw_handler if variant == "server-raw" else json_handler, port))


async def _serve_aiohttp(app: Any, port: int) -> None:
    from aiohttp import web

    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await _wait_for_signal()


async def _serve_low_level(handler: Any, port: int) -> None:
    from aiohttp import web

    runner = web.ServerRunner(web.Server(handler), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await _wait_for_signal()


async def _serve_protocol(port: int, answer: bytes) -> None:
    import httptools
    import orjson

    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(answer)

    class Protocol(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport: asyncio.Transport = transport  # type: ignore[assignment]
            self.parser = httptools.HttpRequestParser(self)
            self.body: list[bytes] = []

        def data_received(self, data: bytes) -> None:
            self.parser.feed_data(data)

        def on_body(self, body: bytes) -> None:
            self.body.append(body)

        def on_message_complete(self) -> None:
            orjson.loads(b"".join(self.body))
            self.body = []
            self.transport.write(head + answer)

    loop = asyncio.get_running_loop()
    server = await loop.create_server(Protocol, "127.0.0.1", port)
    async with server:
        await _wait_for_signal()


async def _wait_for_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


# -- the load (outside valgrind) --

async def _ready(session: aiohttp.ClientSession, url: str, body: bytes) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
                await response.read()
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.5)
    raise RuntimeError(f"the server under callgrind did not answer within {START_TIMEOUT:.0f} s")


async def measure(variant: str, args: argparse.Namespace) -> float:
    folder = Path(args.out or tempfile.mkdtemp(prefix="server-floor-")) / variant
    folder.mkdir(parents=True, exist_ok=True)
    out = str(folder / "cg.out")
    for stale in glob.glob(out + ".*"):
        Path(stale).unlink()
    port = free_port()
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m", "bench.server_floor",
         "--serve", variant, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}{PATH}"
    body = chat_body(stream=False)
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            await _ready(session, url, body)
            await send(session, url, body, max(2 * args.concurrency, 100), args.concurrency)
            subprocess.run(["callgrind_control", "-z", str(server.pid)], capture_output=True, check=True)
            await send(session, url, body, args.requests, args.concurrency)
            subprocess.run(["callgrind_control", "-d", str(server.pid)], capture_output=True, check=True)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=120)
    dump = sorted(glob.glob(out + ".*"))[0]
    per_request = total_instructions(dump) / args.requests
    print(f"{variant}, c={args.concurrency}, {args.requests} requests: {per_request / 1000:,.0f}k instructions "
          f"per request (dump {dump})", flush=True)
    return per_request


async def measure_all(args: argparse.Namespace) -> int:
    for variant in VARIANTS if args.variant == "all" else (args.variant,):
        await measure(variant, args)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", nargs="?", choices=(*VARIANTS, "all"), default="all")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--out", help="folder for the callgrind dumps (default: a new temp folder)")
    parser.add_argument("--serve", choices=VARIANTS, help=argparse.SUPPRESS)  # the server side, under valgrind
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return 0
    return asyncio.run(measure_all(args))


if __name__ == "__main__":
    raise SystemExit(main())
