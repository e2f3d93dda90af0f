"""The handle the agent holds for one MCP server: list its tools, call one, close it.

Transport-neutral: a `Connection` (Streamable HTTP in either era, or a stdio process) sends one
JSON-RPC request and returns its result. The handle keeps the tool list it last fetched, so a
call never triggers a `tools/list` of its own (the `mcp` SDK's `call_tool` may send one to check
results against the tool's output schema; OpenAI never refetches while an `mcp_list_tools` item is
in the context). Every failure is an McpError of OpenAI's kinds; a call past its timeout is
`http_error` 504.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from gateway.agent.mcp.results import (
    INVALID_REPLY,
    MAX_OUTPUT_BYTES,
    MAX_TOOLS,
    CallResult,
    McpHttpError,
    McpProtocolError,
    ToolList,
    parse_call_result,
    parse_tools,
)

DEFAULT_TIMEOUT = 60.0
MAX_LIST_PAGES = 10


class Connection(Protocol):
    era: str | None

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]: ...

    async def close(self) -> None: ...


class McpServer:
    """One MCP server by its label; `timeout` is the default per request, in seconds."""

    def __init__(self, label: str, connection: Connection, *, timeout: float = DEFAULT_TIMEOUT,
                 max_output_bytes: int = MAX_OUTPUT_BYTES) -> None:
        self.label = label
        self.connection = connection
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        self.tools: ToolList | None = None  # the last list fetched

    @property
    def era(self) -> str | None:
        """The protocol era the server was found to speak ("2025-11-25" or "2026-07-28"), once known."""
        return self.connection.era

    async def _request(self, method: str, params: dict[str, Any] | None, timeout: float | None) -> dict[str, Any]:
        limit = self.timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(limit):
                return await self.connection.request(method, params)
        except TimeoutError:
            raise McpHttpError(504, f"the MCP server {self.label} did not answer {method} within {limit:g} s") from None

    async def list_tools(self, *, refresh: bool = False, timeout: float | None = None) -> ToolList:
        """The server's tools (at most MAX_TOOLS), fetched once and kept until `refresh`."""
        if self.tools is not None and not refresh:
            return self.tools
        limit = self.timeout if timeout is None else timeout
        pages: list[Any] = []
        cursor: str | None = None
        try:
            async with asyncio.timeout(limit):  # one budget for every page
                for _page in range(MAX_LIST_PAGES):
                    page = await self.connection.request("tools/list", {"cursor": cursor} if cursor else None)
                    pages.append(page)
                    cursor = page.get("nextCursor")
                    listed = sum(len(tools) for p in pages if isinstance(tools := p.get("tools"), list))
                    if not isinstance(cursor, str) or not cursor or listed >= MAX_TOOLS:
                        break
        except TimeoutError:
            raise McpHttpError(504, f"the MCP server {self.label} did not list its tools within {limit:g} s") from None
        self.tools = parse_tools(pages)
        return self.tools

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None,
                        timeout: float | None = None) -> CallResult:
        """Run one tool. A tool that reports failure (`isError`) is a result with `is_error` set."""
        if not isinstance(name, str) or not name:
            raise McpProtocolError(INVALID_REPLY, "a tool call needs a tool name")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise McpProtocolError(INVALID_REPLY, "a tool's arguments must be a JSON object")
        result = await self._request("tools/call", {"name": name, "arguments": dict(arguments or {})}, timeout)
        return parse_call_result(result, self.max_output_bytes)

    async def close(self) -> None:
        await self.connection.close()
