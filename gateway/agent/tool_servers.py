"""An MCP server a request names: what the wire hands the agent. A plain record: importing it loads
no MCP client code (the wire imports it for every Responses request)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class McpServerRequest:
    """An MCP server a request names (the Responses API's `mcp` tool). `url` None: the configured
    server of that label. `headers` are secrets: never stored, logged or echoed."""

    label: str
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    #: Tool names allowed; None: every tool the server lists.
    allowed_tools: tuple[str, ...] | None = None
    #: True: only tools the server marks `readOnlyHint`.
    read_only: bool = False
    #: Where the request named it, for a 400's `param` (`tools[2]`).
    param: str = "tools"
    #: The tools an `mcp_list_tools` item in the context lists (OpenAI's McpListToolsTool shape):
    #: used instead of asking the server again; None: list them.
    known_tools: tuple[dict[str, Any], ...] | None = None
