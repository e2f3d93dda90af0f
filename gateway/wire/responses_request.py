"""Responses API requests: validation, and the agent's request from them. Pure, no I/O.

`parse_responses_request(body)` checks every field a client may send and raises
`InvalidRequestError` (400, with `param`) for anything malformed; the `input` items are checked
and translated by gateway/wire/responses_input.py.

Tools: flat function tools (`{"type": "function", "name", "parameters", ...}`) are the client's
own and pass through to the model; a call to one ends the response with a `function_call` item.
The hosted web search tool (`web_search`, `web_search_preview`, dated variants) is echoed and
honoured: its filters, context size and location become the request's `WebSearchOptions`
(gateway/wire/web_search.py), carried out by the agent's own web tools; `tool_choice`
`{"type": "web_search"}` (or `required` with no function tools) makes the first round search.
Other hosted tool types (`file_search`, `code_interpreter`, ...) are a 400 naming the type: the
gateway cannot run them, and silently answering without them would mislead the client.

Unknown top-level fields are ignored rather than refused, so newer SDKs keep working.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from gateway.agent.web_options import WebSearchOptions
from gateway.errors import InvalidRequestError, echo
from gateway.wire import ids, web_search
from gateway.wire.checks import TOOL_CHOICE_MODES, in_range
from gateway.wire.reasoning_replay import Unseal
from gateway.wire.responses_input import input_to_messages, normalize_input
from gateway.wire.responses_reasoning import reasoning_config
from gateway.wire.web_search_replay import ReplayedCall, replayed_calls

TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
#: OpenAI's `include` values (its SDK's ResponseIncludable). All are accepted, as OpenAI accepts
#: them; `web_search_call.action.sources` is honoured, the others have nothing to add here.
INCLUDABLE = (
    "file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
    "message.input_image.image_url", "computer_call_output.output.image_url", "code_interpreter_call.outputs",
    "reasoning.encrypted_content", "message.output_text.logprobs",
)


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


@dataclass
class ResponsesRequest:
    """A validated `POST /v1/responses` body."""

    model: str | None = None
    #: This turn's input items, normalized, each with an `id`.
    input_items: list[dict[str, Any]] = field(default_factory=list)
    #: The same input as chat-format messages.
    messages: list[dict[str, Any]] = field(default_factory=list)
    instructions: str | None = None
    previous_response_id: str | None = None
    conversation: str | None = None
    store: bool = True
    stream: bool = False
    #: run on without the connection; polled with GET /v1/responses/{id} (needs `store`)
    background: bool = False
    #: Tools as the client sent them (echoed in the response object).
    tools: list[dict[str, Any]] = field(default_factory=list)
    #: The client's function tools in chat format, for the model.
    chat_tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str | dict[str, Any] = "auto"
    metadata: dict[str, str] = field(default_factory=dict)
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    parallel_tool_calls: bool = True
    user: str | None = None
    text: dict[str, Any] = field(default_factory=lambda: {"format": {"type": "text"}})
    #: The hosted web search tool's options; None when `tools` has none.
    web: WebSearchOptions | None = None
    #: What the client asked to have added to the output (`include`), e.g. the search sources.
    include: tuple[str, ...] = ()
    #: `reasoning` as asked (`effort`, `summary`: gateway/wire/responses_reasoning.py).
    reasoning: dict[str, Any] = field(default_factory=lambda: {"effort": None, "summary": None})
    #: "disabled" (a turn over the context window is a 400) or "auto" (its oldest history dropped).
    truncation: str = "disabled"
    #: The open turn's replayed searches, for the agent to run again (gateway/wire/web_search_replay.py).
    replayed: tuple[ReplayedCall, ...] = ()

    def upstream_params(self) -> dict[str, Any]:
        """Extra Chat Completions parameters for the upstream call (tools excluded)."""
        params: dict[str, Any] = {}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.top_p is not None:
            params["top_p"] = self.top_p
        if self.max_output_tokens is not None:
            params["max_tokens"] = self.max_output_tokens
        if self.user is not None:
            params["user"] = self.user
        if self.chat_tools:
            params["parallel_tool_calls"] = self.parallel_tool_calls
            chat_choice = _chat_tool_choice(self.tool_choice)
            if chat_choice is not None:
                params["tool_choice"] = chat_choice
        elif self.tool_choice == "none":  # no function tools, but "none" binds the agent's own too
            params["tool_choice"] = "none"
        fmt = self.text.get("format") or {}
        if fmt.get("type") == "json_object":
            params["response_format"] = {"type": "json_object"}
        elif fmt.get("type") == "json_schema":
            schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
            params["response_format"] = {"type": "json_schema", "json_schema": schema}
        return params


def _chat_tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any] | None:
    if isinstance(choice, str):
        return choice
    if choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice["name"]}}
    return None  # a hosted tool type: let the model decide


# ---- scalar fields --------------------------------------------------------------------------


def _optional_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise _bad(f"'{key}' must be a string.", key)
    return value


def _bool(body: dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _bad(f"'{key}' must be true or false.", key)
    return value


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not in_range(value, low, high):
        raise _bad(f"'{key}' must be a number from {low:g} to {high:g}.", key)
    return float(value)


def _truncation(body: dict[str, Any]) -> str:
    value = body.get("truncation")
    if value is None:
        return "disabled"
    if value not in ("auto", "disabled"):
        raise _bad("'truncation' must be 'auto' or 'disabled'.", "truncation")
    return str(value)


def _max_output_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_output_tokens")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad("'max_output_tokens' must be a positive integer.", "max_output_tokens")
    return value


def parse_metadata(body: dict[str, Any]) -> dict[str, str]:
    """`metadata` as OpenAI bounds it (16 pairs, keys to 64, values to 512 characters); {} if absent."""
    value = body.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad("'metadata' must be an object of string keys and string values.", "metadata")
    if len(value) > MAX_METADATA_PAIRS:
        raise _bad(f"'metadata' may hold at most {MAX_METADATA_PAIRS} pairs.", "metadata")
    for key, item in value.items():
        if len(key) > MAX_METADATA_KEY:
            raise _bad(f"metadata keys may be at most {MAX_METADATA_KEY} characters.", "metadata")
        if not isinstance(item, str):
            raise _bad(f"metadata value for '{key}' must be a string.", f"metadata.{key}")
        if len(item) > MAX_METADATA_VALUE:
            raise _bad(f"metadata values may be at most {MAX_METADATA_VALUE} characters.", f"metadata.{key}")
    return dict(value)


def _conversation(body: dict[str, Any]) -> str | None:
    value = body.get("conversation")
    if value is None:
        return None
    if isinstance(value, dict):
        value = value.get("id")
    if not isinstance(value, str) or not value.strip():
        raise _bad("'conversation' must be a name or an object with an 'id'.", "conversation")
    return ids.check(value, "conversation")


def _include(body: dict[str, Any]) -> tuple[str, ...]:
    value = body.get("include")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _bad("'include' must be a list of strings.", "include")
    for index, entry in enumerate(value):
        if entry not in INCLUDABLE:
            # a 400, as OpenAI gives: a misspelt value silently ignored would look like a gateway fault
            raise _bad(f"'include[{index}]' must be one of {', '.join(INCLUDABLE)}; got {echo(repr(entry))}.",
                       f"include[{index}]")
    return tuple(dict.fromkeys(value))


def _text_config(body: dict[str, Any]) -> dict[str, Any]:
    value = body.get("text")
    if value is None:
        return {"format": {"type": "text"}}
    fmt = value.get("format") if isinstance(value, dict) else None
    if fmt is None and isinstance(value, dict):
        return {**value, "format": {"type": "text"}}
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise _bad("'text.format.type' must be text, json_object or json_schema.", "text.format")
    if fmt["type"] == "json_schema" and (
        not isinstance(fmt.get("name"), str) or not isinstance(fmt.get("schema"), dict)
    ):
        raise _bad("a json_schema text format needs a 'name' and a 'schema' object.", "text.format")
    return dict(value)


# ---- tools ----------------------------------------------------------------------------------


def _tools(body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], WebSearchOptions | None]:
    value = body.get("tools")
    if value is None:
        return [], [], None
    if not isinstance(value, list):
        raise _bad("'tools' must be a list.", "tools")
    echoed: list[dict[str, Any]] = []
    chat: list[dict[str, Any]] = []
    web: WebSearchOptions | None = None
    for index, tool in enumerate(value):
        param = f"tools[{index}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise _bad("each tool must be an object with a 'type'.", param)
        echoed.append(tool)
        if tool["type"] in web_search.HOSTED_WEB_SEARCH:
            options = web_search.hosted_tool(tool, param)
            web = web if web is not None else options  # the first one counts, as with OpenAI
            continue
        if tool["type"] != "function":
            raise _bad(
                f"the hosted tool type {echo(repr(tool['type']))} is not supported by this gateway; it runs "
                "'web_search' (and its dated and preview variants) and your own 'function' tools.",
                f"{param}.type",
            )
        if "function" in tool and "name" not in tool:
            raise _bad(
                "Responses function tools are flat: put 'name' and 'parameters' on the tool itself, "
                "not under 'function'.",
                f"{param}.name",
            )
        name = tool.get("name")
        if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            raise _bad("a function tool needs a 'name' of 1-64 letters, digits, '_' or '-'.", f"{param}.name")
        parameters = tool.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise _bad("'parameters' must be a JSON schema object.", f"{param}.parameters")
        description = tool.get("description")
        if description is not None and not isinstance(description, str):
            raise _bad("'description' must be a string.", f"{param}.description")
        function: dict[str, Any] = {"name": name}
        if description is not None:
            function["description"] = description
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        function["parameters"] = parameters
        if isinstance(tool.get("strict"), bool):
            function["strict"] = tool["strict"]
        chat.append({"type": "function", "function": function})
    return echoed, chat, web


def _forces_search(choice: str | dict[str, Any], chat_tools: list[dict[str, Any]], web: WebSearchOptions | None,
                   ) -> bool:
    """Whether tool_choice makes the first round call web_search."""
    if web is None:
        return False
    if isinstance(choice, dict):
        return choice.get("type") in web_search.HOSTED_WEB_SEARCH
    return choice == "required" and not chat_tools


def _tool_choice(body: dict[str, Any], chat_tools: list[dict[str, Any]],
                 web: WebSearchOptions | None) -> str | dict[str, Any]:
    value = body.get("tool_choice")
    if value is None:
        return "auto"
    if isinstance(value, str):
        if value not in TOOL_CHOICE_MODES:
            raise _bad("'tool_choice' must be none, auto, required or a tool object.", "tool_choice")
        return value
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise _bad("'tool_choice' must be none, auto, required or a tool object.", "tool_choice")
    if value["type"] == "function":
        names = {tool["function"]["name"] for tool in chat_tools}
        if not isinstance(value.get("name"), str) or value["name"] not in names:
            raise _bad("'tool_choice' names a function that is not in 'tools'.", "tool_choice")
    elif value["type"] not in web_search.HOSTED_WEB_SEARCH:  # file_search, mcp, ...: tools this gateway lacks
        known = ", ".join(sorted(web_search.HOSTED_WEB_SEARCH))
        raise _bad(f"'tool_choice' type must be function or a web search type ({known}); "
                   f"got {echo(repr(value['type']))}.", "tool_choice")
    elif web is None:
        raise _bad(f"'tool_choice' asks for {echo(value['type'])}, but 'tools' has no web search tool.", "tool_choice")
    return value


# ---- input items ----------------------------------------------------------------------------


def parse_responses_request(body: Any, unseal: Unseal | None = None) -> ResponsesRequest:
    """Validate a `POST /v1/responses` body; raises InvalidRequestError (400) naming the field.
    `unseal` opens the reasoning a client replays sealed (gateway/wire/reasoning_replay.py)."""
    if not isinstance(body, dict):
        raise InvalidRequestError("The request body must be a JSON object.")
    background = _bool(body, "background", False)
    if background and not _bool(body, "store", True):
        # OpenAI's refusal: a background response lives in the store, where it is polled
        raise _bad("Background mode requires 'store' to be true: a background response is "
                   "kept in the store to be retrieved.", "background")
    previous = _optional_str(body, "previous_response_id")
    if previous is not None:
        ids.check(previous, "previous_response_id")
    conversation = _conversation(body)
    if previous is not None and conversation is not None:
        raise _bad(
            "'previous_response_id' and 'conversation' cannot be used together.", "previous_response_id"
        )
    raw_input = body.get("input")
    items = [] if raw_input is None else normalize_input(raw_input)
    if not items and previous is None and conversation is None:
        raise _bad("'input' is required: a string or a non-empty list of input items.", "input")
    tools, chat_tools, web = _tools(body)
    tool_choice = _tool_choice(body, chat_tools, web)
    if web is not None and _forces_search(tool_choice, chat_tools, web):
        web = replace(web, force_search=True)
    return ResponsesRequest(
        model=_optional_str(body, "model"),
        input_items=items,
        messages=input_to_messages(items, replay_searches=True, unseal=unseal),
        replayed=replayed_calls(items),
        instructions=_optional_str(body, "instructions"),
        previous_response_id=previous,
        conversation=conversation,
        store=_bool(body, "store", True),
        stream=_bool(body, "stream", False),
        background=background,
        tools=tools,
        chat_tools=chat_tools,
        tool_choice=tool_choice,
        metadata=parse_metadata(body),
        temperature=_number(body, "temperature", 0, 2),
        top_p=_number(body, "top_p", 0, 1),
        max_output_tokens=_max_output_tokens(body),
        parallel_tool_calls=_bool(body, "parallel_tool_calls", True),
        user=_optional_str(body, "user"),
        text=_text_config(body),
        web=web,
        include=_include(body),
        reasoning=reasoning_config(body),
        truncation=_truncation(body),
    )

