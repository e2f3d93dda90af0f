"""Input items about the client's tools, checked, and what the model reads of them. Pure.

`function_call` (with its `namespace`, if any) and `custom_tool_call` replay a call the model made:
both become an assistant message's tool call under the upstream's function name
(gateway/wire/responses_tools.py: a custom call's `input` as the `input` argument).
`function_call_output` and `custom_tool_call_output` become a `tool` message; an output given as
parts keeps them, images included: the tool message gets the text (or a short note) and the images
follow, once the run of tool messages ends (a strict upstream wants every tool message right after
the calls), in one user message: as images for a route that reads them, else as notes
(gateway/wire/images.py). `additional_tools` items add tools to the request (read by
responses_request.py) and say nothing to the model themselves. A client-run tool search replays as
`tool_search_call` (an assistant tool call of the `tool_search` function, its `arguments` as JSON)
and `tool_search_output` (a `tool` message naming the tools it loaded, which responses_request.py
offers to the model like the request's own).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gateway.errors import InvalidRequestError
from gateway.wire import mcp_tool, web_search
from gateway.wire.images import image_part
from gateway.wire.responses_tools import LOADED_TYPES, TOOL_SEARCH, ClientTools, collect, custom_arguments

#: (name, namespace) -> the upstream's function name for a replayed call.
FlatName = Callable[[str, str | None], str]
TOOL_OUTPUTS = ("function_call_output", "custom_tool_call_output")
#: The tool message's text when the output was images alone.
IMAGES_ONLY = "(the tool returned an image, shown next)"
IMAGES_ONLY_NOT_SHOWN = "(the tool returned an image)"


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def _strings(item: dict[str, Any], kind: str, keys: tuple[str, ...], param: str) -> None:
    for key in keys:
        if not isinstance(item.get(key), str):
            raise _bad(f"a {kind} item needs a string '{key}'.", f"{param}.{key}")


def function_call(item: dict[str, Any], item_id: str, param: str) -> dict[str, Any]:
    _strings(item, "function_call", ("call_id", "name", "arguments"), param)
    normalized = {"id": item_id, "type": "function_call", "call_id": item["call_id"], "name": item["name"],
                  "arguments": item["arguments"], "status": "completed"}
    return _with_namespace(item, normalized, param)


def custom_tool_call(item: dict[str, Any], item_id: str, param: str) -> dict[str, Any]:
    _strings(item, "custom_tool_call", ("call_id", "name", "input"), param)
    normalized = {"id": item_id, "type": "custom_tool_call", "call_id": item["call_id"], "name": item["name"],
                  "input": item["input"], "status": "completed"}
    return _with_namespace(item, normalized, param)


def _with_namespace(item: dict[str, Any], normalized: dict[str, Any], param: str) -> dict[str, Any]:
    namespace = item.get("namespace")
    if namespace is not None:
        if not isinstance(namespace, str):
            raise _bad("'namespace' must be a string.", f"{param}.namespace")
        normalized["namespace"] = namespace
    return normalized


def additional_tools(item: dict[str, Any], item_id: str, param: str) -> dict[str, Any]:
    """`{"type": "additional_tools", "role": "developer", "tools": [...]}`: kept as sent, its tools
    checked as a request's `tools` are (a conversation's items are kept without a request)."""
    if item.get("role", "developer") != "developer":
        raise _bad("an additional_tools item's 'role' is 'developer'.", f"{param}.role")
    tools = item.get("tools")
    if not isinstance(tools, list):
        raise _bad("an additional_tools item needs a 'tools' list.", f"{param}.tools")
    client: list[tuple[dict[str, Any], str]] = []
    for index, tool in enumerate(tools):
        where = f"{param}.tools[{index}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise _bad("each tool must be an object with a 'type'.", where)
        if tool["type"] in web_search.HOSTED_WEB_SEARCH:
            web_search.hosted_tool(tool, where)
        elif tool["type"] == "mcp":
            mcp_tool.parse_mcp_tool(tool, where)
        else:
            client.append((tool, where))
    collect(ClientTools(), client)
    # kept (and stored) as the top-level tools are echoed: an mcp tool without its secrets; the
    # request's own parse reads them from the body it was sent (responses_request_tools.py)
    shown = [mcp_tool.echoed(tool) if tool["type"] == "mcp" else tool for tool in tools]
    return {"id": item_id, "type": "additional_tools", "role": "developer", "tools": shown}


def _client_execution(item: dict[str, Any], kind: str, param: str) -> None:
    if item.get("execution", "client") != "client":
        raise _bad(f"a {kind} item this gateway takes is one of a tool search the client ran "
                   "(\"execution\": \"client\").", f"{param}.execution")
    _strings(item, kind, ("call_id",), param)


def tool_search_call(item: dict[str, Any], item_id: str, param: str) -> dict[str, Any]:
    _client_execution(item, "tool_search_call", param)
    if "arguments" not in item:
        raise _bad("a tool_search_call item needs 'arguments'.", f"{param}.arguments")
    return {"id": item_id, "type": "tool_search_call", "call_id": item["call_id"], "execution": "client",
            "arguments": item["arguments"], "status": "completed"}


def tool_search_output(item: dict[str, Any], item_id: str, param: str) -> dict[str, Any]:
    """The tools a client-run tool search loaded (function, custom and namespace tools), checked as
    a request's `tools` are."""
    _client_execution(item, "tool_search_output", param)
    tools = item.get("tools")
    if not isinstance(tools, list):
        raise _bad("a tool_search_output item needs a 'tools' list.", f"{param}.tools")
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") not in LOADED_TYPES:
            raise _bad("a tool search loads function, custom and namespace tools.", f"{param}.tools[{index}].type")
    collect(ClientTools(), [(tool, f"{param}.tools[{index}]") for index, tool in enumerate(tools)])
    return {"id": item_id, "type": "tool_search_output", "call_id": item["call_id"], "execution": "client",
            "tools": tools, "status": "completed"}


def search_message(item: dict[str, Any], flat_name: FlatName | None) -> dict[str, Any]:
    """A replayed tool_search_output as the `tool` message the model reads: the tools it loaded,
    under the names the model calls them by."""
    names: list[str] = []
    for tool in item["tools"]:
        members = tool["tools"] if tool["type"] == "namespace" else [tool]
        namespace = tool["name"] if tool["type"] == "namespace" else None
        names += [flat_name(m["name"], namespace) if flat_name is not None else m["name"] for m in members
                  if isinstance(m, dict) and isinstance(m.get("name"), str)]
    said = f"Loaded {len(names)} tool{'s' if len(names) != 1 else ''}, callable now: {', '.join(names)}." \
        if names else "No tools matched the search."
    return {"role": "tool", "tool_call_id": item["call_id"], "content": said}


def tool_call(item: dict[str, Any], flat_name: FlatName | None) -> dict[str, Any]:
    """A replayed function_call, custom_tool_call or tool_search_call as a chat tool call."""
    if item["type"] == "tool_search_call":
        name = flat_name(TOOL_SEARCH, None) if flat_name is not None else TOOL_SEARCH
        arguments = item["arguments"]
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return {"id": item["call_id"], "type": "function", "function": {"name": name, "arguments": text}}
    namespace = item.get("namespace")
    name = flat_name(item["name"], namespace) if flat_name is not None else item["name"]
    arguments = item["arguments"] if item["type"] == "function_call" else custom_arguments(item["input"])
    return {"id": item["call_id"], "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_messages(item: dict[str, Any], vision: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A tool output item as its `tool` message, and the chat parts of the images it returned
    (to follow in a user message: images, or notes for a model that reads none)."""
    output = item["output"]
    if isinstance(output, str):
        return {"role": "tool", "tool_call_id": item["call_id"], "content": output}, []
    texts = [part.get("text") or "" for part in output if part["type"] != "input_image"]
    images = [image_part(part, vision) for part in output if part["type"] == "input_image"]
    text = "\n".join(t for t in texts if t)
    if not images:
        return {"role": "tool", "tool_call_id": item["call_id"], "content": text}, []
    if not vision:  # the notes go in the tool message itself: nothing need follow it
        notes = "\n".join(part["text"] for part in images)
        content = "\n".join(filter(None, [text or IMAGES_ONLY_NOT_SHOWN, notes]))
        return {"role": "tool", "tool_call_id": item["call_id"], "content": content}, []
    said = f"(The image{'s' if len(images) > 1 else ''} returned by tool call {item['call_id']}.)"
    return ({"role": "tool", "tool_call_id": item["call_id"], "content": text or IMAGES_ONLY},
            [{"type": "text", "text": said}, *images])
