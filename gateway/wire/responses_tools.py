"""The client's own tools in a Responses request, as the upstream sees them and back. Pure.

Three client tool types, each run by the client, never by the gateway:

- `function` (`{"type": "function", "name", "parameters", ...}`): offered as it is.
- `custom`, freeform (`{"type": "custom", "name", "description", "format": {"type": "text"} |
  {"type": "grammar", "syntax", "definition"}}`, Codex's `apply_patch`): a Chat Completions upstream
  has no such thing, so it is offered as a function with one string argument, `input`, the format
  (the grammar's text) told in its description; the model's call comes back to the client as a
  `custom_tool_call` whose `input` is that argument.
- `namespace` (`{"type": "namespace", "name", "description", "tools": [function | custom ...]}`):
  its tools are offered flat, under their own names, the namespace told in each description; a
  name another tool already has is renamed `<namespace>__<name>` (numbered if even that is taken),
  and the call comes back under the inner `name` with `namespace` set.
- `tool_search` run by the client (`{"type": "tool_search", "execution": "client", "description",
  "parameters"}`, Codex's search of its deferred tools): offered as a function `tool_search` with
  the parameters given; the call comes back as a `tool_search_call` item (`arguments` an object),
  and the tools a replayed `tool_search_output` loaded are offered like the request's own. A
  search OpenAI runs (`execution: "server"`) is a hosted tool this gateway does not run.

`ClientTools` keeps the way back: the upstream's function name -> which tool that is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from gateway.errors import InvalidRequestError, echo

TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: The argument a custom tool's function takes: the freeform text.
CUSTOM_INPUT = "input"
#: OpenAI's hosted tools, which run on OpenAI's side and which this gateway cannot run.
HOSTED_TYPES = frozenset({"file_search", "code_interpreter", "image_generation", "mcp",
                          "programmatic_tool_calling"})
#: The upstream's function name for a client-run tool search (it has no name of its own).
TOOL_SEARCH = "tool_search"
#: Tools a replayed `tool_search_output` loaded (OpenAI's ToolSearchOutputNamespaceTool and its members).
LOADED_TYPES = ("function", "custom", "namespace")
#: OpenAI's built-in tools a client runs, whose calls are items of their own (`shell_call`,
#: `computer_call` ...) that this gateway does not produce.
BUILTIN_CLIENT_TYPES = frozenset({"computer", "computer_use_preview", "local_shell", "shell", "apply_patch"})
#: Tools a namespace may hold (OpenAI's NamespaceTool).
NAMESPACE_MEMBERS = ("function", "custom")


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def unsupported_type(kind: Any, param: str) -> InvalidRequestError:
    """The 400 for a tool type the gateway does not take, worded for what the type is."""
    shown = echo(repr(kind))
    if kind in HOSTED_TYPES:
        return _bad(f"the hosted tool type {shown} is not supported by this gateway; it runs 'web_search' "
                    "(and its dated and preview variants) itself, and passes your 'function', 'custom' and "
                    "'namespace' tools (and a 'tool_search' with execution 'client') to the model.",
                    f"{param}.type")
    if kind in BUILTIN_CLIENT_TYPES:
        return _bad(f"the tool type {shown} is not supported by this gateway: describe the tool as a 'function' "
                    "or 'custom' tool instead.", f"{param}.type")
    return _bad(f"unknown tool type {shown}; this gateway takes 'function', 'custom', 'namespace' and "
                "'web_search' tools.", f"{param}.type")


@dataclass(frozen=True, slots=True)
class ClientTool:
    """One client tool as the upstream knows it (`flat`) and as the client named it."""

    flat: str
    name: str
    namespace: str | None = None
    kind: str = "function"  # function, custom or tool_search: the item a call comes back as

    @property
    def custom(self) -> bool:
        return self.kind == "custom"


@dataclass(frozen=True, slots=True)
class _Pending:
    tool: dict[str, Any]
    param: str
    namespace: str | None = None
    namespace_description: str | None = None


class ClientTools:
    """The client's tools of one request: the chat-format functions offered upstream, and the way
    from an upstream function name back to the tool."""

    __slots__ = ("chat", "_by_flat", "_by_name")

    def __init__(self) -> None:
        self.chat: list[dict[str, Any]] = []
        self._by_flat: dict[str, ClientTool] = {}
        self._by_name: dict[tuple[str | None, str], ClientTool] = {}

    def __bool__(self) -> bool:
        return bool(self.chat)

    def get(self, flat: str) -> ClientTool | None:
        """The tool behind an upstream function name; None for a name the client did not give."""
        return self._by_flat.get(flat)

    def find(self, name: str, namespace: str | None = None) -> ClientTool | None:
        return self._by_name.get((namespace, name))

    def flat_name(self, name: str, namespace: str | None = None) -> str:
        """The upstream's name for a replayed call: the tool's, if this request has it, else `name`."""
        tool = self._by_name.get((namespace, name))
        return tool.flat if tool is not None else name

    def names(self) -> set[str]:
        return set(self._by_flat)

    def _free(self, name: str, namespace: str) -> str:
        if name not in self._by_flat:
            return name
        base = f"{namespace}__{name}"[:64]
        candidate, number = base, 2
        while candidate in self._by_flat:
            suffix = f"_{number}"
            candidate, number = base[:64 - len(suffix)] + suffix, number + 1
        return candidate

    def _add(self, entry: _Pending) -> None:
        tool, param = entry.tool, entry.param
        kind = tool["type"]
        custom = kind == "custom"
        name = TOOL_SEARCH if kind == TOOL_SEARCH else _checked_name(tool, param)
        description = _description(tool, param)
        if (entry.namespace, name) in self._by_name and self._by_name[(entry.namespace, name)].kind == kind:
            return  # the same tool again (loaded by two tool searches): offered once
        if kind == TOOL_SEARCH:
            description = description or ("Search for more tools to load; the tools found become "
                                          "callable on the next turn.")
        if entry.namespace is None:
            flat = name
        else:
            flat = self._free(name, entry.namespace)
            told = f"(One of the '{entry.namespace}' tools" + (f": {entry.namespace_description})"
                                                               if entry.namespace_description else ")")
            description = f"{description}\n{told}" if description else told
        function: dict[str, Any] = {"name": flat}
        if custom:
            function["description"] = _custom_description(description, tool.get("format"), param)
            function["parameters"] = {"type": "object", "properties": {CUSTOM_INPUT: {"type": "string"}},
                                      "required": [CUSTOM_INPUT]}
        else:
            if description is not None:
                function["description"] = description
            parameters = tool.get("parameters")
            if parameters is not None and not isinstance(parameters, dict):
                raise _bad("'parameters' must be a JSON schema object.", f"{param}.parameters")
            function["parameters"] = parameters if parameters is not None else {"type": "object", "properties": {}}
            if isinstance(tool.get("strict"), bool):
                function["strict"] = tool["strict"]
        self.chat.append({"type": "function", "function": function})
        known = ClientTool(flat, name, entry.namespace, kind)
        self._by_flat[flat] = known
        self._by_name[(entry.namespace, name)] = known


def _checked_name(tool: dict[str, Any], param: str) -> str:
    if tool["type"] == "function" and "function" in tool and "name" not in tool:
        raise _bad("Responses function tools are flat: put 'name' and 'parameters' on the tool itself, "
                   "not under 'function'.", f"{param}.name")
    name = tool.get("name")
    if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
        raise _bad(f"a {tool['type']} tool needs a 'name' of 1-64 letters, digits, '_' or '-'.", f"{param}.name")
    return name


def _description(tool: dict[str, Any], param: str) -> str | None:
    description = tool.get("description")
    if description is not None and not isinstance(description, str):
        raise _bad("'description' must be a string.", f"{param}.description")
    return description


def _custom_description(description: str | None, fmt: Any, param: str) -> str:
    """What the model is told of a custom tool: its description, then what `input` must be."""
    said = [description] if description else []
    if fmt is None or (isinstance(fmt, dict) and fmt.get("type") == "text"):
        said.append(f"Call it with one argument, '{CUSTOM_INPUT}': the raw text the tool takes, unquoted "
                    "and unescaped beyond what JSON needs.")
    elif isinstance(fmt, dict) and fmt.get("type") == "grammar":
        syntax, definition = fmt.get("syntax"), fmt.get("definition")
        if syntax not in ("lark", "regex") or not isinstance(definition, str):
            raise _bad("a grammar format needs 'syntax' (lark or regex) and a 'definition' string.",
                       f"{param}.format")
        said.append(f"Call it with one argument, '{CUSTOM_INPUT}': text that follows this {syntax} grammar "
                    f"exactly:\n{definition}")
    else:
        raise _bad("a custom tool's 'format' is {\"type\": \"text\"} or {\"type\": \"grammar\", \"syntax\", "
                   "\"definition\"}.", f"{param}.format")
    return "\n\n".join(said)


def collect(client_tools: ClientTools, entries: list[tuple[dict[str, Any], str]]) -> None:
    """Add the client tools among `entries` ((tool, param) of every tool whose type is not a hosted
    web search), plain ones first so that a namespace's tool is the one renamed on a collision."""
    plain: list[_Pending] = []
    nested: list[_Pending] = []
    for tool, param in entries:
        kind = tool["type"]
        if kind in ("function", "custom"):
            plain.append(_Pending(tool, param))
        elif kind == TOOL_SEARCH:
            if tool.get("execution") != "client":
                raise _bad(f"this gateway takes a 'tool_search' tool run by the client (\"execution\": \"client\"), "
                           f"got 'execution' {echo(repr(tool.get('execution')))}: it cannot run OpenAI's hosted "
                           "tool search.", f"{param}.execution")
            plain.append(_Pending(tool, param))
        elif kind == "namespace":
            nested.extend(_namespace(tool, param))
        else:
            raise unsupported_type(kind, param)
    for entry in [*plain, *nested]:
        client_tools._add(entry)


def _namespace(tool: dict[str, Any], param: str) -> list[_Pending]:
    name = tool.get("name")
    if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
        raise _bad("a namespace tool needs a 'name' of 1-64 letters, digits, '_' or '-'.", f"{param}.name")
    description = _description(tool, param)
    members = tool.get("tools")
    if not isinstance(members, list):
        raise _bad("a namespace tool needs a 'tools' list of function and custom tools.", f"{param}.tools")
    pending = []
    for index, member in enumerate(members):
        where = f"{param}.tools[{index}]"
        if not isinstance(member, dict) or member.get("type") not in NAMESPACE_MEMBERS:
            raise _bad("a namespace holds function and custom tools only.", f"{where}.type")
        pending.append(_Pending(member, where, name, description))
    return pending


def custom_input(arguments: str) -> str:
    """A custom tool's freeform input from the arguments its function was called with: the `input`
    string (or the one string there is); text that is no JSON object was meant as the input itself."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments
    if not isinstance(value, dict):
        return arguments
    if isinstance(value.get(CUSTOM_INPUT), str):
        return str(value[CUSTOM_INPUT])
    strings = [item for item in value.values() if isinstance(item, str)]
    return strings[0] if len(strings) == 1 else ("" if not value else arguments)


def custom_arguments(text: str) -> str:
    """A replayed custom call's input as the arguments of its function."""
    return json.dumps({CUSTOM_INPUT: text}, ensure_ascii=False)
