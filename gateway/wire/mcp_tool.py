"""The Responses API's `mcp` tool in a request (openai-python `tool_param.Mcp`). Pure.

    {"type": "mcp", "server_label": "deepwiki", "server_url": "https://mcp.deepwiki.com/mcp",
     "headers": {...}, "authorization": "...", "server_description": "...",
     "allowed_tools": ["ask"] | {"tool_names": [...], "read_only": true}, "require_approval": "never"}

`server_url` absent: a configured server of that label (`offer: on_request`). `require_approval`:
`"always"` (OpenAI's default when absent), `"never"`, or `{"always": FILTER, "never": FILTER}` with
FILTER `{"tool_names": [...], "read_only": bool}` (gateway/agent/tool_servers.py ApprovalPolicy;
the approval items are gateway/wire/mcp_approvals.py).
What is echoed (`tools` of the response, stored) has no `headers` or `authorization` and the URL
without its path, as OpenAI returns it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from gateway.agent.tool_servers import ALWAYS, NEVER, ApprovalPolicy, McpServerRequest, ToolFilter
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
    approval = _approval(tool.get("require_approval"), f"{param}.require_approval")
    description = tool.get("server_description")
    if description is not None and not isinstance(description, str):
        raise _bad("'server_description' must be a string.", f"{param}.server_description")
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
    return McpServerRequest(label, url, headers, names, read_only, param, approval=approval,
                            description=description or None)


def _approval(value: Any, param: str) -> ApprovalPolicy | None:
    if value is None:
        return None
    if value in ("always", "never"):
        return ALWAYS if value == "always" else NEVER
    if not isinstance(value, dict) or not value or set(value) - {"always", "never"}:
        raise _bad("'require_approval' is \"always\", \"never\" or {\"always\": {...}, \"never\": {...}} "
                   "with {\"tool_names\": [...], \"read_only\": true|false} filters.", param)
    always, never = (_filter(value.get(key), f"{param}.{key}") for key in ("always", "never"))
    # only an `always` filter: the tools it names need approval and the others do not; otherwise
    # a tool no filter matches needs it (OpenAI's default)
    return ApprovalPolicy(never is not None or always is None, always, never)


def _filter(value: Any, param: str) -> ToolFilter | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"tool_names", "read_only"}:
        raise _bad("an approval filter is {\"tool_names\": [...], \"read_only\": true|false}.", param)
    names = value.get("tool_names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
        raise _bad("'tool_names' is a list of tool names.", f"{param}.tool_names")
    read_only = value.get("read_only")
    if read_only is not None and not isinstance(read_only, bool):
        raise _bad("'read_only' is true or false.", f"{param}.read_only")
    return ToolFilter(frozenset(names) if names is not None else None, read_only)


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


# ---- a previous response's MCP items replayed in `input` -------------------------------------

ERROR_KINDS = ("mcp_protocol_error", "mcp_tool_execution_error", "http_error")


def replayed_list(item: dict[str, Any], item_id: str, param: str) -> dict[str, Any]:
    """An `mcp_list_tools` item sent back: while it is in the context its tools are used, not refetched."""
    label, tools = item.get("server_label"), item.get("tools")
    if not isinstance(label, str) or not label:
        raise _bad("an mcp_list_tools item needs a 'server_label'.", f"{param}.server_label")
    if not isinstance(tools, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools):
        raise _bad("an mcp_list_tools item needs a 'tools' list of {name, input_schema, ...}.", f"{param}.tools")
    error = item.get("error")
    if error is not None and not isinstance(error, str):
        raise _bad("an mcp_list_tools 'error' is a string.", f"{param}.error")
    listed = {"id": item_id, "type": "mcp_list_tools", "server_label": label, "tools": tools}
    if error is not None:
        listed["error"] = error
    return listed


def replayed_call(item: dict[str, Any], item_id: str, param: str) -> dict[str, Any]:
    """An `mcp_call` item sent back; `error` the typed object, or a string as older clients send it."""
    for key in ("server_label", "name", "arguments"):
        if not isinstance(item.get(key), str):
            raise _bad(f"an mcp_call item needs a string '{key}'.", f"{param}.{key}")
    output, error = item.get("output"), item.get("error")
    if output is not None and not isinstance(output, str):
        raise _bad("an mcp_call 'output' is a string.", f"{param}.output")
    if error is not None and not isinstance(error, str) and not (
            isinstance(error, dict) and error.get("type") in ERROR_KINDS):
        raise _bad(f"an mcp_call 'error' is a string or an object whose type is one of {', '.join(ERROR_KINDS)}.",
                   f"{param}.error")
    call = {"id": item_id, "type": "mcp_call", "server_label": item["server_label"], "name": item["name"],
            "arguments": item["arguments"], "output": output, "error": error}
    status = item.get("status")
    if status is not None and not isinstance(status, str):
        raise _bad("an mcp_call 'status' is a string.", f"{param}.status")
    if status is not None:
        call["status"] = status
    approval = item.get("approval_request_id")
    if approval is not None and not isinstance(approval, str):
        raise _bad("an mcp_call 'approval_request_id' is a string.", f"{param}.approval_request_id")
    if approval is not None:  # a call the client approved
        call["approval_request_id"] = approval
    return call


def call_messages(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A replayed `mcp_call` as the model saw it: its call (under the upstream name) and its result."""
    name = f"{item['server_label']}__{item['name']}"[:64]
    error = item.get("error")
    result = item.get("output")
    if result is None:
        result = error if isinstance(error, str) else (error or {}).get("message") or "the call failed"
    return [{"role": "assistant", "content": "",
             "tool_calls": [{"id": item["id"], "type": "function",
                             "function": {"name": name, "arguments": item["arguments"] or "{}"}}]},
            {"role": "tool", "tool_call_id": item["id"], "content": result}]


def listed_tools(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """label -> the tools of the last good `mcp_list_tools` item among `items` (output or input items)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        if isinstance(item, dict) and item.get("type") == "mcp_list_tools" and not item.get("error") \
                and isinstance(item.get("tools"), list) and isinstance(item.get("server_label"), str):
            found[item["server_label"]] = item["tools"]
    return found


def with_known(servers: tuple[McpServerRequest, ...],
               known: dict[str, list[dict[str, Any]]]) -> tuple[McpServerRequest, ...]:
    """The named servers, each with the tools an `mcp_list_tools` item in the context listed for its label."""
    if not known:
        return servers
    return tuple(replace(server, known_tools=tuple(known[server.label])) if server.label in known else server
                 for server in servers)
