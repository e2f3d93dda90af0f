"""Responses API requests: validation, and the agent's request from them. Pure, no I/O.

`parse_responses_request(body)` checks every field a client may send and raises
`InvalidRequestError` (400, with `param`) for anything malformed; the `input` items are checked
and translated by gateway/wire/responses_input.py.

Tools: the client's own tools, `function`, `custom` (freeform) and `namespace` tools, from `tools`
and from `additional_tools` input items, are offered to the model as functions
(gateway/wire/responses_tools.py); a call to one ends the response with a `function_call` (or
`custom_tool_call`) item.
The hosted web search tool (`web_search`, `web_search_preview`, dated variants) is echoed and
honoured: its filters, context size and location become the request's `WebSearchOptions`
(gateway/wire/web_search.py), carried out by the agent's own web tools; `tool_choice`
`{"type": "web_search"}` (or `required` with no function tools) makes the first round search.
Other tool types (`file_search`, `code_interpreter`, `computer` ...) are a 400 naming the type: the
gateway cannot run them, and silently answering without them would mislead the client.

Unknown top-level fields are ignored rather than refused, so newer SDKs keep working.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from gateway.agent.tool_servers import McpServerRequest
from gateway.agent.web.options import WebSearchOptions
from gateway.errors import InvalidRequestError, echo
from gateway.wire import ids, mcp_tool, responses_request_tools
from gateway.wire.checks import in_range
from gateway.wire.reasoning_replay import Unseal
from gateway.wire.responses_input import input_to_messages, normalize_input
from gateway.wire.responses_reasoning import reasoning_config
from gateway.wire.responses_tool_items import TOOL_OUTPUTS
from gateway.wire.responses_tools import ClientTools
from gateway.wire.web_search_replay import ReplayedCall, replayed_calls

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
    #: The client's tools in chat format, for the model (function, custom and namespace tools flattened).
    chat_tools: list[dict[str, Any]] = field(default_factory=list)
    #: The way back from an upstream function name to the client's tool (gateway/wire/responses_tools.py).
    client_tools: ClientTools = field(default_factory=ClientTools)
    tool_choice: str | dict[str, Any] = "auto"
    metadata: dict[str, str] = field(default_factory=dict)
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    #: The most calls the gateway's own tools (web and MCP) may make in this response; None: no cap.
    max_tool_calls: int | None = None
    parallel_tool_calls: bool = True
    user: str | None = None
    text: dict[str, Any] = field(default_factory=lambda: {"format": {"type": "text"}})
    #: The hosted web search tool's options; None when `tools` has none.
    web: WebSearchOptions | None = None
    #: The MCP servers the request names (`mcp` tools; gateway/wire/mcp_tool.py).
    mcp: tuple[McpServerRequest, ...] = ()
    #: The output items of the responses `previous_response_id` continues, for the approval requests
    #: the input answers (gateway/wire/mcp_approvals.py); set where the chain is read.
    earlier_items: list[dict[str, Any]] = field(default_factory=list)
    #: What the client asked to have added to the output (`include`), e.g. the search sources.
    include: tuple[str, ...] = ()
    #: `reasoning` as asked (`effort`, `summary`: gateway/wire/responses_reasoning.py).
    reasoning: dict[str, Any] = field(default_factory=lambda: {"effort": None, "summary": None})
    #: "disabled" (a turn over the context window is a 400) or "auto" (its oldest history dropped).
    truncation: str = "disabled"
    #: The open turn's replayed searches, for the agent to run again (gateway/wire/web_search_replay.py).
    replayed: tuple[ReplayedCall, ...] = ()
    #: Opens sealed reasoning replayed in `input` (kept to rebuild `messages`: show_tool_images).
    unseal: Unseal | None = field(default=None, repr=False, compare=False)

    def show_tool_images(self) -> None:
        """The messages again with the images tool outputs returned as images, not notes: for a
        route whose model reads them (parsing cannot know the route)."""
        if any(item["type"] in TOOL_OUTPUTS and isinstance(item["output"], list) for item in self.input_items):
            self.messages = input_to_messages(self.input_items, self.client_tools.flat_name, vision=True,
                                              replay_searches=True, unseal=self.unseal)

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
        params.update(_effort_and_verbosity(self.reasoning, self.text))
        if self.chat_tools:
            params["parallel_tool_calls"] = self.parallel_tool_calls
            chat_choice = responses_request_tools.chat_tool_choice(self.tool_choice, self.client_tools)
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


def _effort_and_verbosity(reasoning: dict[str, Any], text: dict[str, Any]) -> dict[str, Any]:
    """`reasoning.effort` and `text.verbosity` under Chat Completions' names (`reasoning_effort`,
    `verbosity`), as a client of that API sends them; a route's `drop_params` can hold them back."""
    params: dict[str, Any] = {}
    if reasoning.get("effort") is not None:
        params["reasoning_effort"] = reasoning["effort"]
    if text.get("verbosity") is not None:
        params["verbosity"] = text["verbosity"]
    return params


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


def _max_output_tokens(body: dict[str, Any], key: str = "max_output_tokens", low: int = 1) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _bad(f"'{key}' must be {'a positive' if low else 'a non-negative'} integer.", key)
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
    verbosity = value.get("verbosity") if isinstance(value, dict) else None
    if verbosity is not None and not isinstance(verbosity, str):
        raise _bad("'text.verbosity' must be low, medium or high.", "text.verbosity")
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
    tools, client_tools, web, mcp = responses_request_tools.parse_tools(body, items)
    tool_choice = responses_request_tools.tool_choice(body, client_tools, web, mcp)
    if web is not None and responses_request_tools.forces_search(tool_choice, client_tools, web):
        web = replace(web, force_search=True)
    return ResponsesRequest(
        model=_optional_str(body, "model"),
        input_items=items,
        messages=input_to_messages(items, client_tools.flat_name, replay_searches=True, unseal=unseal),
        replayed=replayed_calls(items),
        unseal=unseal,
        instructions=_optional_str(body, "instructions"),
        previous_response_id=previous,
        conversation=conversation,
        store=_bool(body, "store", True),
        stream=_bool(body, "stream", False),
        background=background,
        tools=tools,
        chat_tools=client_tools.chat,
        client_tools=client_tools,
        tool_choice=tool_choice,
        metadata=parse_metadata(body),
        temperature=_number(body, "temperature", 0, 2),
        top_p=_number(body, "top_p", 0, 1),
        max_output_tokens=_max_output_tokens(body),
        max_tool_calls=_max_output_tokens(body, "max_tool_calls", 0),
        parallel_tool_calls=_bool(body, "parallel_tool_calls", True),
        user=_optional_str(body, "user"),
        text=_text_config(body),
        web=web,
        # a replayed mcp_list_tools item (store: false) stands for the list: no second tools/list
        mcp=mcp_tool.with_known(mcp, mcp_tool.listed_tools(items)) if mcp else mcp,
        include=_include(body),
        reasoning=reasoning_config(body),
        truncation=_truncation(body),
    )

