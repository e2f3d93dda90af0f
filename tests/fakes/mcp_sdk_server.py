"""An MCP server built with the official `mcp` SDK (2.x), Streamable HTTP on 127.0.0.1 or stdio.

`python -m tests.fakes.mcp_sdk_server PORT [--json]` serves http://127.0.0.1:PORT/mcp with the
SDK's own transport (uvicorn + starlette), which answers each request in the era its
`MCP-Protocol-Version` names: 2025-11-25 sessions after `initialize`, 2026-07-28 stateless requests.
`--json` makes it reply with JSON bodies instead of SSE. `python -m tests.fakes.mcp_sdk_server stdio`
serves the same tools over stdin/stdout. Run as a child process by tests/support/mcp_servers.py
and by bench/mcp_call.py; nothing here is gateway code.
"""

from __future__ import annotations

import asyncio
import base64
import sys

from mcp.server.mcpserver import Image, MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel

# a 1x1 PNG
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


class Sum(BaseModel):
    total: int


def build() -> MCPServer:
    server = MCPServer("sdk-test-server")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def add(a: int, b: int) -> Sum:
        """Add two integers (structured output)."""
        return Sum(total=a + b)

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails with the reason."""
        raise ValueError(reason)

    @server.tool()
    def big(kilobytes: int) -> str:
        """Return that many kilobytes of text."""
        return "x" * (kilobytes * 1024)

    @server.tool()
    async def slow(seconds: float) -> str:
        """Answer after a while."""
        await asyncio.sleep(seconds)
        return "done"

    @server.tool()
    def pixel() -> Image:
        """A one-pixel PNG."""
        return Image(data=PIXEL, format="png")

    @server.tool(name="héllo")
    def hello() -> str:
        """A tool whose name is not ASCII."""
        return "bonjour"

    return server


def main() -> None:
    server = build()
    if sys.argv[1] == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app(json_response="--json" in sys.argv)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
