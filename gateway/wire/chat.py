"""Chat Completions on the wire: request validation and agent events -> OpenAI objects. No I/O."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import Any

from gateway.agent.events import (
    ClientToolCall,
    Finished,
    ReasoningDelta,
    Source,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)
from gateway.agent.web_options import WebSearchOptions
from gateway.errors import InvalidRequestError
from gateway.wire import openwebui, web_search
from gateway.wire.checks import chat_tool_choice, expect, optional_int, optional_number
from gateway.wire.citations import citations
from gateway.wire.markers import format_marker

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
PART_TYPES = frozenset({"text", "image_url", "input_audio", "file", "refusal"})
#: Fields handed to the upstream model as they came.
PASSTHROUGH = (
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed", "response_format",
    "presence_penalty", "frequency_penalty", "logit_bias", "tool_choice", "parallel_tool_calls",
    "reasoning_effort",
)
_PASSTHROUGH_NAMES = frozenset(PASSTHROUGH)


#: What follows the text in a content chunk (see ChatChunkEncoder._content_chunk).
CONTENT_TAIL = '},"logprobs":null,"finish_reason":null}]}'
#: The choices of every stream's first chunk, `_chunk({"role": "assistant", "content": ""})` prebuilt.
ROLE_CHOICES = '[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}'

#: Longest text in one chunk: even fully escaped it keeps a `data:` line far below 64 KiB.
MAX_DELTA_CHARS = 4096

#: What comes between two rounds' reasoning in chat's one reasoning field: a blank line.
ROUND_BREAK = "\n\n"


class ReasoningRounds:
    """A turn's reasoning as chat carries it: in one field (`reasoning_content`, streamed or
    whole), where the reasoning of a round after a tool round would run on from the last sentence
    of the one before (Open WebUI shows it all as one "Thought" block). The first piece of a
    round's reasoning gets ROUND_BREAK in front when an earlier round had reasoning: never before
    the first, never trailing. Rounds end with the agent's tool calls (agent/events.py): the
    Responses API gives each round a reasoning item of its own and needs none of this."""

    __slots__ = ("_any", "_due")

    def __init__(self) -> None:
        self._any = False  # some reasoning was relayed
        self._due = False  # ... and a round ended since

    def piece(self, text: str) -> str:
        if self._due:
            self._due = False
            return ROUND_BREAK + text
        self._any = True
        return text

    def round_ended(self) -> None:
        self._due = self._any


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


def parse_chat_request(body: dict[str, Any]) -> ChatRequest:
    model = body.get("model")
    if model is not None:
        expect(model, str, "model", "a string")
    messages = body.get("messages")
    if messages is None:
        raise InvalidRequestError("'messages' is required", param="messages")
    expect(messages, list, "messages", "a list of messages")
    if not messages:
        raise InvalidRequestError("'messages' must contain at least one message", param="messages")
    for index, message in enumerate(messages):
        _check_message(message, f"messages[{index}]")

    stream = body.get("stream", False)
    if stream is None:
        stream = False
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

    tools = _check_tools(body.get("tools"))
    params = {name: body[name] for name in PASSTHROUGH if body.get(name) is not None} if named else {}
    if "tool_choice" in params and not tools and params["tool_choice"] != "none":  # "none" also binds our tools
        params.pop("tool_choice")
        params.pop("parallel_tool_calls", None)
    user = body.get("user")
    if isinstance(user, str) and user:
        params["user"] = user  # Open WebUI may send an object; upstreams want a string
    web = web_search.chat_options(body.get("web_search_options"))
    return ChatRequest(messages, model, stream, include_usage, tools, params, web)


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


def new_completion_id() -> str:
    return "chatcmpl-" + secrets.token_hex(12)


def usage_object(usage: Usage) -> dict[str, Any]:
    """Chat's `usage`. The details (optional in OpenAI's type) come only when an upstream reported
    them: a server that counts no reasoning tokens must not read as one that counted none."""
    out: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cached_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    if usage.reasoning_tokens is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return out


class ChatCompletionBuilder:
    """Collects agent events into one `chat.completion` object. `reasoning`: relay the model's
    reasoning as `message.reasoning_content` (API_SERVER_REASONING=show)."""

    def __init__(self, model: str, *, reasoning: bool = True) -> None:
        self.id = new_completion_id()
        self.created = int(time.time())
        self.model = model
        self.reasoning = reasoning
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._rounds = ReasoningRounds()
        self._calls: list[dict[str, Any]] = []
        self._sources: list[Source] = []
        self.usage: Usage | None = None  # unknown until the agent reports it (some upstreams never do)
        self.finish = "stop"

    def add(self, event: object) -> None:
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            if self.reasoning:
                self._reasoning.append(self._rounds.piece(event.text))
        elif isinstance(event, ToolCallFinished):
            self._rounds.round_ended()
            self._sources.extend(event.sources)
        elif isinstance(event, ClientToolCall):
            self._calls.append({"id": event.call_id, "type": "function",
                                "function": {"name": event.name, "arguments": event.arguments}})
        elif isinstance(event, Usage):
            self.usage = event
        elif isinstance(event, Finished):
            self.finish = event.reason

    def result(self) -> dict[str, Any]:
        text = "".join(self._text)
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        if self._calls:
            message["tool_calls"] = self._calls
        elif message["content"] is None:
            message["content"] = ""
        message["refusal"] = None
        message["annotations"] = [c.chat() for c in citations(text, self._sources)] if self._sources else []
        usage = {} if self.usage is None else {"usage": usage_object(self.usage)}  # optional: unknown is no 0s
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish, "logprobs": None}],
            **usage,
            "system_fingerprint": None,
        }


class ChatChunkEncoder:
    """Turns agent events into `chat.completion.chunk` JSON strings, in the order strict clients need.

    `progress` (AGENT_TOOL_PROGRESS): `inline` writes a marker line into the content per tool call,
    `openwebui` sends Open WebUI's status events instead (not OpenAI chunks: for Open WebUI only),
    `off` nothing. `reasoning`: relay the model's reasoning as `delta.reasoning_content`.
    Citations go on the finish chunk as `delta.annotations`, found once at the end in the content
    as the client received it (rebuilt from the turn's transcript and the markers sent), and only
    when a tool returned sources: the text path keeps no copy of the text.
    """

    def __init__(self, model: str, *, include_usage: bool, progress: str = "inline", reasoning: bool = True) -> None:
        self.id = new_completion_id()
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        self.progress = progress
        self.inline_markers = progress == "inline"
        self.reasoning = reasoning
        self._rounds = ReasoningRounds()
        self._call_index = 0
        self._usage: Usage | None = None
        self._sources: list[Source] = []
        self._markers: dict[str, str] = {}  # call id -> the marker text sent for it
        self._started: dict[str, ToolCallStarted] = {}  # for Open WebUI's "done" status
        self._prefix = (
            '{"id":' + json.dumps(self.id) + ',"object":"chat.completion.chunk","created":'
            + str(self.created) + ',"model":' + json.dumps(model) + ',"system_fingerprint":null,"choices":'
        )
        self._content_head = self._prefix + '[{"index":0,"delta":{"content":'

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return self._prefix + json.dumps([choice], ensure_ascii=False, separators=(",", ":")) + "}"

    def _content_chunk(self, text: str) -> str:
        """`_chunk({"content": text})` without building and walking the dicts: the same bytes,
        and the one chunk a stream sends dozens of times. `encode_basestring` is what
        `json.dumps(text, ensure_ascii=False)` returns for a string, without building a JSONEncoder
        per call (json.dumps only caches one for its default arguments)."""
        return self._content_head + encode_basestring(text) + CONTENT_TAIL

    def start(self) -> str:
        return self._prefix + ROLE_CHOICES

    def encode(self, event: object) -> list[str]:
        if isinstance(event, TextDelta):
            text = event.text
            if len(text) <= MAX_DELTA_CHARS:  # the usual delta: no split_text and list building
                return [self._content_head + encode_basestring(text) + CONTENT_TAIL] if text else []
            return [self._content_chunk(piece) for piece in split_text(text)]
        if isinstance(event, ReasoningDelta):
            if not self.reasoning:
                return []
            return [self._chunk({"reasoning_content": piece})
                    for piece in split_text(self._rounds.piece(event.text))]
        if isinstance(event, ToolCallStarted):
            if self.inline_markers and event.marker:
                marker = format_marker(event.marker)
                self._markers[event.call_id] = marker
                return [self._chunk({"content": marker})]
            if self.progress == "openwebui":
                self._started[event.call_id] = event
                return [json.dumps(openwebui.started(event), ensure_ascii=False)]
            return []
        if isinstance(event, ToolCallFinished):
            self._rounds.round_ended()
            self._sources.extend(event.sources)
            if self.progress == "openwebui":
                status = openwebui.finished(self._started.pop(event.call_id, None), event)
                return [json.dumps(status, ensure_ascii=False)]
            return []
        if isinstance(event, ClientToolCall):
            index = self._call_index
            self._call_index += 1
            head = {"index": index, "id": event.call_id, "type": "function",
                    "function": {"name": event.name, "arguments": ""}}
            frames = [self._chunk({"tool_calls": [head]})]
            for piece in split_text(event.arguments):
                frames.append(self._chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
            return frames
        if isinstance(event, Usage):
            self._usage = event  # sent after the finish chunk, as OpenAI orders them
            return []
        if isinstance(event, Finished):
            annotations = self._annotations(event) if self._sources else []
            if annotations:
                frames = [self._chunk({"annotations": annotations}, event.reason)]
            else:
                # `_chunk({}, event.reason)` without building and dumping the dicts: the same bytes
                frames = [self._prefix + '[{"index":0,"delta":{},"logprobs":null,"finish_reason":'
                          + encode_basestring(event.reason) + "}]}"]
            if self.include_usage and self._usage is not None:  # unknown usage: no usage chunk
                frames.append(self._prefix + '[],"usage":' + json.dumps(usage_object(self._usage)) + "}")
            return frames
        return []

    def _annotations(self, finished: Finished) -> list[dict[str, Any]]:
        """The citations in the content the client received: each round's text, then the markers
        of that round's calls (the order the agent yields them in, see agent/events.py)."""
        parts: list[str] = []
        for message in finished.messages:
            if message.get("role") != "assistant":
                continue
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            for call in message.get("tool_calls") or ():
                parts.append(self._markers.get(call.get("id"), ""))
        return [c.chat() for c in citations("".join(parts), self._sources)]


def split_text(text: str, size: int = MAX_DELTA_CHARS) -> list[str]:
    """Cut a long delta so that no SSE line grows past what aiohttp-based clients accept."""
    if len(text) <= size:
        return [text] if text else []
    return [text[i:i + size] for i in range(0, len(text), size)]
