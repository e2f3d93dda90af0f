"""A Responses request's `tools` and `tool_choice`, checked: the hosted web search tool's options
(gateway/wire/web_search.py), the client's own tools (gateway/wire/responses_tools.py, with those
of `additional_tools` input items), and `tool_choice` as the upstream's Chat Completions takes it.
Pure; each failure is a 400 naming the field."""

from __future__ import annotations

from typing import Any

from gateway.agent.tool_servers import McpServerRequest
from gateway.agent.web.options import WebSearchOptions
from gateway.errors import InvalidRequestError, echo
from gateway.wire import mcp_tool, web_search
from gateway.wire.checks import TOOL_CHOICE_MODES
from gateway.wire.responses_tools import ClientTools, collect

#: Input items whose tools are offered like the request's own: `additional_tools`, and the tools a
#: client-run tool search loaded (`tool_search_output`).
LOADING_ITEMS = ("additional_tools", "tool_search_output")


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def parse_tools(body: dict[str, Any], items: list[dict[str, Any]],
                ) -> tuple[list[dict[str, Any]], ClientTools, WebSearchOptions | None, tuple[McpServerRequest, ...]]:
    """The tools echoed (the top-level list; `mcp` tools without their secrets), the client's own
    tools (those and the ones `additional_tools` and `tool_search_output` input items add:
    gateway/wire/responses_tools.py), the web search options and the MCP servers named
    (gateway/wire/mcp_tool.py)."""
    value = body.get("tools")
    if value is not None and not isinstance(value, list):
        raise _bad("'tools' must be a list.", "tools")
    echoed: list[dict[str, Any]] = list(value or [])
    entries = [(tool, f"tools[{index}]") for index, tool in enumerate(echoed)]
    entries += [(tool, f"input[{index}].tools[{inner}]") for index, item in enumerate(items)
                if item["type"] in LOADING_ITEMS for inner, tool in enumerate(_sent_tools(body, index, item))]
    client: list[tuple[dict[str, Any], str]] = []
    web: WebSearchOptions | None = None
    servers: dict[str, McpServerRequest] = {}
    for tool, param in entries:
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise _bad("each tool must be an object with a 'type'.", param)
        if tool["type"] == "mcp":
            server = mcp_tool.parse_mcp_tool(tool, param)
            if server.label in servers:
                raise _bad(f"two mcp tools have the server_label {server.label!r}.", f"{param}.server_label")
            servers[server.label] = server
        elif tool["type"] in web_search.HOSTED_WEB_SEARCH:
            options = web_search.hosted_tool(tool, param)
            web = web if web is not None else options  # the first one counts, as with OpenAI
        else:
            client.append((tool, param))
    client_tools = ClientTools()
    collect(client_tools, client)
    if servers:
        echoed = [mcp_tool.echoed(tool) if isinstance(tool, dict) and tool.get("type") == "mcp" else tool
                  for tool in echoed]
    return echoed, client_tools, web, tuple(servers.values())


def _sent_tools(body: dict[str, Any], index: int, item: dict[str, Any]) -> list[Any]:
    """An input item's tools as sent: an `additional_tools` item is kept with its `mcp` tools'
    secrets taken out (responses_tool_items.py), which the call to the server needs."""
    raw = body.get("input")
    if item["type"] == "additional_tools" and isinstance(raw, list) and index < len(raw):
        sent = raw[index].get("tools") if isinstance(raw[index], dict) else None
        if isinstance(sent, list) and len(sent) == len(item["tools"]):
            return sent
    return list(item["tools"])


def mcp_choice(choice: str | dict[str, Any], servers: tuple[McpServerRequest, ...]) -> tuple[str, str | None] | None:
    """`tool_choice: {"type": "mcp", "server_label", "name"?}` as (label, tool name or None)."""
    if not isinstance(choice, dict) or choice.get("type") != "mcp":
        return None
    return choice["server_label"], choice.get("name")


def forces_search(choice: str | dict[str, Any], chat_tools: ClientTools, web: WebSearchOptions | None,
                   ) -> bool:
    """Whether tool_choice makes the first round call web_search."""
    if web is None:
        return False
    if isinstance(choice, dict):
        return choice.get("type") in web_search.HOSTED_WEB_SEARCH
    return choice == "required" and not chat_tools


def tool_choice(body: dict[str, Any], client_tools: ClientTools, web: WebSearchOptions | None,
                servers: tuple[McpServerRequest, ...] = ()) -> str | dict[str, Any]:
    value = body.get("tool_choice")
    if value is None:
        return "auto"
    if isinstance(value, str):
        if value not in TOOL_CHOICE_MODES:
            raise _bad("'tool_choice' must be none, auto, required or a tool object.", "tool_choice")
        return value
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise _bad("'tool_choice' must be none, auto, required or a tool object.", "tool_choice")
    if value["type"] in ("function", "custom"):
        chosen = client_tools.find(value["name"], value.get("namespace")) \
            if isinstance(value.get("name"), str) else None
        if chosen is None or chosen.custom != (value["type"] == "custom"):
            raise _bad(f"'tool_choice' names a {value['type']} tool that is not in 'tools'.", "tool_choice")
    elif value["type"] == "mcp":
        _check_mcp_choice(value, servers)
    elif value["type"] not in web_search.HOSTED_WEB_SEARCH:  # file_search, mcp, ...: tools this gateway lacks
        known = ", ".join(sorted(web_search.HOSTED_WEB_SEARCH))
        raise _bad(f"'tool_choice' type must be function, custom, mcp or a web search type ({known}); "
                   f"got {echo(repr(value['type']))}.", "tool_choice")
    elif web is None:
        raise _bad(f"'tool_choice' asks for {echo(value['type'])}, but 'tools' has no web search tool.", "tool_choice")
    return value


def _check_mcp_choice(value: dict[str, Any], servers: tuple[McpServerRequest, ...]) -> None:
    label, name = value.get("server_label"), value.get("name")
    if not isinstance(label, str) or not label:
        raise _bad("an mcp 'tool_choice' needs the 'server_label' of an mcp tool in 'tools'.",
                   "tool_choice.server_label")
    if label not in {server.label for server in servers}:
        raise _bad(f"'tool_choice' names the MCP server '{echo(label)}', which 'tools' has no mcp tool for.",
                   "tool_choice.server_label")
    if name is not None and (not isinstance(name, str) or not name):
        raise _bad("an mcp 'tool_choice' 'name' is the name of one of the server's tools.", "tool_choice.name")
    if set(value) - {"type", "server_label", "name"}:
        extra = sorted(set(value) - {"type", "server_label", "name"})[0]
        raise _bad(f"an mcp 'tool_choice' has type, server_label and name; not {echo(repr(extra))}.",
                   f"tool_choice.{extra}")


def chat_tool_choice(choice: str | dict[str, Any], client_tools: ClientTools) -> str | dict[str, Any] | None:
    if isinstance(choice, str):
        return choice
    if choice.get("type") in ("function", "custom"):
        flat = client_tools.flat_name(choice["name"], choice.get("namespace"))
        return {"type": "function", "function": {"name": flat}}
    return None  # a hosted tool type: let the model decide
