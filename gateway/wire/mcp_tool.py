"""The Responses API's `mcp` tool in a request (openai-python `tool_param.Mcp`). Pure.

    {"type": "mcp", "server_label": "deepwiki", "server_url": "https://mcp.deepwiki.com/mcp",
     "headers": {...}, "authorization": "...", "server_description": "...",
     "allowed_tools": ["ask"] | {"tool_names": [...], "read_only": true}, "require_approval": "never"}

`server_url` absent: a configured server of that label (`offer: on_request`). Approvals are not
run yet, so `require_approval` must be `"never"` (absent means `"always"`, as with OpenAI): anything
else is a 400 saying so rather than a call made without the approval the client expects.
What is echoed (`tools` of the response, stored) has no `headers` or `authorization` and the URL
without its path, as OpenAI returns it.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from gateway.agent.mcp.named import McpServerRequest
from gateway.errors import InvalidRequestError

_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
TOOL_KEYS = frozenset({"type", "server_label", "server_url", "connector_id", "headers", "authorization",
                       "server_description", "allowed_tools", "require_approval", "defer_loading"})


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def parse_mcp_tool(tool: dict[str, Any], param: str) -> McpServerRequest:
    label = tool.get("server_label")
    if not isinstance(label, str) or not _LABEL.match(label) or "__" in label:
        raise _bad("an mcp tool needs a 'server_label' of 1-32 letters, digits, '_' or '-' (no '__').",
                   f"{param}.server_label")
    if tool.get("connector_id") is not None:
        raise _bad("connectors are OpenAI's own; give the MCP server's 'server_url' instead.", f"{param}.connector_id")
    approval = tool.get("require_approval", "always")
    if approval != "never":
        raise _bad("this gateway does not run MCP approvals yet: set 'require_approval' to \"never\" "
                   "(absent means \"always\", as with OpenAI).", f"{param}.require_approval")
    url = tool.get("server_url")
    if url is not None:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise _bad("'server_url' must be an http(s) URL.", f"{param}.server_url")
    headers = tool.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise _bad("'headers' must be an object of strings.", f"{param}.headers")
    headers = dict(headers)
    authorization = tool.get("authorization")
    if authorization is not None:
        if not isinstance(authorization, str):
            raise _bad("'authorization' must be a string.", f"{param}.authorization")
        # OpenAI's field holds the token (an OAuth access token): sent as a bearer token
        headers["Authorization"] = authorization if " " in authorization.strip() else f"Bearer {authorization}"
    names, read_only = _allowed(tool.get("allowed_tools"), f"{param}.allowed_tools")
    return McpServerRequest(label, url, headers, names, read_only, param)


def _allowed(value: Any, param: str) -> tuple[tuple[str, ...] | None, bool]:
    if value is None:
        return None, False
    if isinstance(value, list):
        if not all(isinstance(name, str) for name in value):
            raise _bad("'allowed_tools' is a list of tool names.", param)
        return tuple(value), False
    if isinstance(value, dict):
        names = value.get("tool_names")
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            raise _bad("'allowed_tools.tool_names' is a list of tool names.", f"{param}.tool_names")
        read_only = value.get("read_only", False)
        if not isinstance(read_only, bool):
            raise _bad("'allowed_tools.read_only' is true or false.", f"{param}.read_only")
        return (tuple(names) if names is not None else None), read_only
    raise _bad("'allowed_tools' is a list of tool names or {\"tool_names\", \"read_only\"}.", param)


def echoed(tool: dict[str, Any]) -> dict[str, Any]:
    """The tool as a response shows and stores it: no secrets, the URL without its path."""
    shown = {key: value for key, value in tool.items() if key not in ("headers", "authorization")}
    url = shown.get("server_url")
    if isinstance(url, str):
        parts = urlsplit(url)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        port = f":{parts.port}" if parts.port else ""
        shown["server_url"] = f"{parts.scheme}://{host}{port}"
    return shown
