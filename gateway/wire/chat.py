"""Chat Completions requests on the wire: validation into a ChatRequest (the history without the
gateway's own writing, what a frontend's request is: gateway/wire/frontends.py). No I/O.

The replies are built in gateway/wire/chat_output.py (whole) and gateway/wire/chat_stream.py (chunks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.agent.web.options import WebSearchOptions
from gateway.errors import InvalidRequestError
from gateway.wire import frontends, web_search
from gateway.wire.checks import chat_tool_choice, expect, optional_int, optional_number
from gateway.wire.file_inputs import chat_file_part

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
PART_TYPES = frozenset({"text", "image_url", "input_audio", "file", "refusal"})
#: Fields handed to the upstream model as they came.
PASSTHROUGH = (
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed", "response_format",
    "presence_penalty", "frequency_penalty", "logit_bias", "tool_choice", "parallel_tool_calls",
    "reasoning_effort",
)
_PASSTHROUGH_NAMES = frozenset(PASSTHROUGH)


@dataclass
class ChatRequest:
    messages: list[dict[str, Any]]
    model: str | None
    stream: bool
    include_usage: bool
    client_tools: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    #: `web_search_options`, checked; None when the request has none.
    web: WebSearchOptions | None = None
    #: A frontend's housekeeping task (gateway/wire/frontends.py): no web tools for it.
    background: bool = False
    #: The number of the web's first source (after the documents the question already numbers).
    first_source: int = 1


def parse_chat_request(body: dict[str, Any]) -> ChatRequest:
    # The usual values are checked inline; `expect` (a call) runs only to word the 400.
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        expect(model, str, "model", "a string")
    messages = body.get("messages")
    if messages is None:
        raise InvalidRequestError("'messages' is required", param="messages")
    if not isinstance(messages, list):
        expect(messages, list, "messages", "a list of messages")
    if not messages:
        raise InvalidRequestError("'messages' must contain at least one message", param="messages")
    for index, message in enumerate(messages):
        _check_message(message, f"messages[{index}]")

    stream = body.get("stream", False)
    if stream is None:
        stream = False
    elif stream is not False and stream is not True:
        expect(stream, bool, "stream", "true or false")
    stream_options = body.get("stream_options")
    include_usage = False
    if stream_options is not None:
        expect(stream_options, dict, "stream_options", "an object")
        include_usage = stream_options.get("include_usage") is True

    n = body.get("n")
    if n is not None and n != 1:
        raise InvalidRequestError("only n=1 is supported", param="n")
    # Every field checked in this block is one of PASSTHROUGH: a request naming none of them (many
    # name only model, messages and stream) skips checks that could not fail, and the copy below.
    named = _PASSTHROUGH_NAMES.intersection(body)
    if named:
        optional_number(body, "temperature", 0, 2)
        optional_number(body, "top_p", 0, 1)
        optional_number(body, "presence_penalty", -2, 2)
        optional_number(body, "frequency_penalty", -2, 2)
        optional_int(body, "max_tokens")
        optional_int(body, "max_completion_tokens")
        seed = body.get("seed")
        if seed is not None:
            expect(seed, int, "seed", "an integer")
        stop = body.get("stop")
        if stop is not None and not (
            isinstance(stop, str) or (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
        ):
            raise InvalidRequestError("'stop' must be a string or a list of strings", param="stop")
        for name in ("response_format", "logit_bias"):
            if body.get(name) is not None:
                expect(body[name], dict, name, "an object")
        if body.get("tool_choice") is not None:
            chat_tool_choice(body["tool_choice"])

    tools = _check_tools(listed) if (listed := body.get("tools")) is not None else []
    params = {name: body[name] for name in PASSTHROUGH if body.get(name) is not None} if named else {}
    if "tool_choice" in params and not tools and params["tool_choice"] != "none":  # "none" also binds our tools
        params.pop("tool_choice")
        params.pop("parallel_tool_calls", None)
    user = body.get("user")
    if isinstance(user, str) and user:
        params["user"] = user  # Open WebUI may send an object; upstreams want a string
    options = body.get("web_search_options")
    web = web_search.chat_options(options) if options is not None else None
    messages = frontends.without_gateway_writing(messages)
    question = frontends.last_user_text(messages)  # read once for both frontend checks
    return ChatRequest(messages, model, stream, include_usage, tools, params, web,
                       frontends.is_background_task(messages, stream=stream, tools=bool(tools), text=question),
                       frontends.first_web_source(messages, text=question))


def _check_message(message: Any, param: str) -> None:
    if not isinstance(message, dict):
        raise InvalidRequestError(f"'{param}' must be an object with 'role' and 'content'", param=param)
    role = message.get("role")
    # isinstance first: a dict or list is unhashable, and `in` on a frozenset would raise TypeError (a 500).
    if not isinstance(role, str) or role not in ROLES:
        raise InvalidRequestError(
            f"'{param}.role' must be one of {', '.join(sorted(ROLES))}", param=f"{param}.role"
        )
    content = message.get("content")
    if content is None:
        if role != "assistant":
            raise InvalidRequestError(f"'{param}.content' is required for a {role} message", param=f"{param}.content")
    elif isinstance(content, list):
        for index, part in enumerate(content):
            part_param = f"{param}.content[{index}]"
            if not isinstance(part, dict) or not isinstance(part.get("type"), str) or part["type"] not in PART_TYPES:
                raise InvalidRequestError(
                    f"'{part_param}' must be a content part with type {', '.join(sorted(PART_TYPES))}",
                    param=part_param,
                )
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                raise InvalidRequestError(f"'{part_param}.text' must be a string", param=f"{part_param}.text")
            elif part["type"] == "file":
                chat_file_part(part, part_param)
    elif not isinstance(content, str):
        raise InvalidRequestError(f"'{param}.content' must be a string or a list of parts", param=f"{param}.content")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise InvalidRequestError(f"'{param}.tool_call_id' is required for a tool message",
                                  param=f"{param}.tool_call_id")
    tool_calls = message.get("tool_calls")
    if tool_calls is not None:
        if role != "assistant" or not isinstance(tool_calls, list):
            raise InvalidRequestError(f"'{param}.tool_calls' must be a list on an assistant message",
                                      param=f"{param}.tool_calls")
        for index, call in enumerate(tool_calls):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise InvalidRequestError(f"'{param}.tool_calls[{index}]' must have function.name",
                                          param=f"{param}.tool_calls[{index}]")


def _check_tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    expect(tools, list, "tools", "a list of function tools")
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type", "function") != "function" or not isinstance(function, dict) \
                or not isinstance(function.get("name"), str) or not function["name"]:
            raise InvalidRequestError(
                f"'tools[{index}]' must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}",
                param=f"tools[{index}]",
            )
    return tools
