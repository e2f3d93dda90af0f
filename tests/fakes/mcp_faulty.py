"""Misbehaving MCP servers on loopback: what a hanging, crashing, babbling or flooding server does.

`faulty_app()` is an aiohttp app speaking 2025-11-25 Streamable HTTP (it refuses 2026-07-28's
`server/discover` with 400, as servers of that era do) whose tools misbehave by name: `hang`
never answers, `garbage` answers 200 with text that is not JSON, `flood` sends 10 MB of JSON,
`flood_sse` one 10 MB event, `crash` closes the connection mid-reply, `status500` answers HTTP 500,
`wrong_shape` answers a result that is not an object, `ok` answers normally; `faulty_app(page_size)`
lists its tools in pages. `forget` makes the
server drop every session (the next request with it gets 404). Its `state` counts methods seen and
keeps the request headers, so tests can check what went over the wire.

`python -m tests.fakes.mcp_faulty stdio` is the same over stdin/stdout, plus `exit` (the process
exits mid-call), `env` (returns the process's environment), `huge_line` (one 10 MB line) and
`noise` (prints a line that is not JSON before its reply).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TOOLS = ["ok", "hang", "garbage", "flood", "flood_sse", "crash", "status500", "wrong_shape",
         "exit", "env", "huge_line", "noise"]
TEN_MB = 10 * 1024 * 1024


def tool_list() -> dict[str, Any]:
    return {"tools": [{"name": name, "description": f"misbehaves: {name}",
                       "inputSchema": {"type": "object", "properties": {}}} for name in TOOLS]}


def reply(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def ok_result(text: str = "fine") -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


@dataclass
class State:
    methods: Counter[str] = field(default_factory=Counter)
    sessions: set[str] = field(default_factory=set)
    headers: list[dict[str, str]] = field(default_factory=list)


STATE = web.AppKey("state", State)
PAGE_SIZE = web.AppKey("page_size", int)


async def handle(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    state.headers.append(dict(request.headers))
    if request.method == "DELETE":
        state.sessions.discard(request.headers.get("Mcp-Session-Id", ""))
        return web.Response(status=200)
    message = await request.json()
    method = message.get("method")
    state.methods[method] += 1
    if method == "server/discover":
        return web.json_response({"jsonrpc": "2.0", "id": message["id"],
                                  "error": {"code": -32600, "message": "Bad Request: Server not initialized"}},
                                 status=400)
    if method == "initialize":
        session = uuid.uuid4().hex
        state.sessions.add(session)
        return web.json_response(reply(message["id"], {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "faulty", "version": "1"}}), headers={"Mcp-Session-Id": session})
    if request.headers.get("Mcp-Session-Id") not in state.sessions:
        gone = {"code": -32001, "message": "Session not found"}
        return web.json_response({"jsonrpc": "2.0", "id": None, "error": gone}, status=404)
    if "id" not in message:
        return web.Response(status=202)
    if method == "tools/list":
        listed = tool_list()
        size = request.app[PAGE_SIZE]
        if size:  # pages of `size` tools, the cursor being the index of the next one
            start = int((message.get("params") or {}).get("cursor") or 0)
            listed["tools"] = listed["tools"][start:start + size]
            if start + size < len(TOOLS):
                listed["nextCursor"] = str(start + size)
        return web.json_response(reply(message["id"], listed))
    name = (message.get("params") or {}).get("name")
    if name == "hang":  # until the client gives up (so the app's shutdown does not wait for it)
        while request.transport is not None and not request.transport.is_closing():
            await asyncio.sleep(0.05)
        return web.Response(status=204)
    if name == "garbage":
        return web.Response(text="<html>definitely not JSON-RPC</html>", content_type="application/json")
    if name == "flood":
        body = json.dumps(reply(message["id"], ok_result("x" * TEN_MB)))
        return web.Response(text=body, content_type="application/json")
    if name == "flood_sse":
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"event: message\ndata: " + b"x" * TEN_MB + b"\n\n")
        return response
    if name == "crash":
        response = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": "1000"})
        await response.prepare(request)
        await response.write(b'{"jsonrpc": "2.0", "id": ')
        assert request.transport is not None
        request.transport.close()
        return response
    if name == "status500":
        return web.Response(status=500, text="Internal Server Error")
    if name == "wrong_shape":
        return web.json_response(reply(message["id"], ["not", "an", "object"]))
    if name == "forget":
        state.sessions.clear()
    return web.json_response(reply(message["id"], ok_result()))


def faulty_app(page_size: int = 0) -> web.Application:
    app = web.Application()
    app[STATE] = State()
    app[PAGE_SIZE] = page_size
    app.router.add_route("*", "/mcp", handle)
    return app


def stdio_main() -> None:
    """The stdio variant: one JSON-RPC message a line."""
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue
        if method == "server/discover":
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id,
                                      "error": {"code": -32601, "message": "Method not found"}}
        elif method == "initialize":
            answer = reply(request_id, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                        "serverInfo": {"name": "faulty-stdio", "version": "1"}})
        elif method == "tools/list":
            answer = reply(request_id, tool_list())
        else:
            name = (message.get("params") or {}).get("name")
            if name == "hang":
                continue
            if name == "exit":
                os._exit(3)
            if name == "huge_line":
                out.write(b'{"jsonrpc": "2.0", "id": ' + str(request_id).encode() + b', "result": {"x": "'
                          + b"x" * TEN_MB + b'"}}\n')
                out.flush()
                continue
            if name == "noise":
                out.write(b"starting up, please wait\n")
            if name == "garbage":
                out.write(b"\x00\xff not json at all\n")
                out.flush()
                continue
            text = json.dumps(dict(os.environ)) if name == "env" else "fine"
            answer = reply(request_id, ok_result(text))
        out.write(json.dumps(answer).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    stdio_main()
