"""Chat Completions streams: agent events -> `chat.completion.chunk` JSON strings. Pure."""

from __future__ import annotations

import json
import time
from json.encoder import encode_basestring
from typing import Any

from gateway.agent.events import (
    AgentEvent,
    ClientToolCall,
    Finished,
    Progress,
    ReasoningDelta,
    Source,
    TextDelta,
    TextDeltas,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)
from gateway.wire import openwebui
from gateway.wire.chat_output import ReasoningRounds, new_completion_id, usage_object
from gateway.wire.citations import citations
from gateway.wire.markers import format_marker

#: What follows the text in a content chunk (see ChatChunkEncoder._content_chunk).
CONTENT_TAIL = '},"logprobs":null,"finish_reason":null}]}'
#: The choices of every stream's first chunk, `_chunk({"role": "assistant", "content": ""})` prebuilt.
ROLE_CHOICES = '[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}'

#: Longest text in one chunk: even fully escaped it keeps a `data:` line far below 64 KiB.
MAX_DELTA_CHARS = 4096


class ChatChunkEncoder:
    """Turns agent events into `chat.completion.chunk` JSON strings, in the order strict clients need.

    `progress` (AGENT_TOOL_PROGRESS, resolved for the client): `inline` writes a marker line into
    the content per tool call, `openwebui` drives Open WebUI's own display instead (not OpenAI
    chunks: for Open WebUI only; see gateway/wire/openwebui.py), `off` nothing. `reasoning`: relay
    the model's reasoning as `delta.reasoning_content` (under `openwebui`: as `<think>` blocks in
    the content, one per round, closed at each tool call). Citations go on the finish chunk as
    `delta.annotations`, found once at the end in the content as the client received it (rebuilt
    from the turn's transcript and the markers sent), and only when a tool returned sources: the
    text path keeps no copy of the text. Open WebUI gets its own source events instead.
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
        self._owui = openwebui.Display() if progress == "openwebui" else None
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

    def encode_all(self, events: list[AgentEvent]) -> list[str]:
        """`encode` of each event, in one list. The usual event, a short text delta outside Open
        WebUI's display, is encoded here without the call and the one-item list per event."""
        out: list[str] = []
        if self._owui is not None:  # its thinking state moves with the events: each one through encode
            for event in events:
                out.extend(self.encode(event))
            return out
        head = self._content_head
        for event in events:
            if type(event) is TextDeltas:  # a burst: one chunk per text, as each alone would be
                for text in event.texts:
                    if 0 < len(text) <= MAX_DELTA_CHARS:
                        out.append(head + encode_basestring(text) + CONTENT_TAIL)
                    else:
                        out.extend(self.encode(TextDelta(text)))
            elif type(event) is TextDelta and 0 < len(event.text) <= MAX_DELTA_CHARS:
                out.append(head + encode_basestring(event.text) + CONTENT_TAIL)
            else:
                out.extend(self.encode(event))
        return out

    def encode(self, event: object) -> list[str]:
        if isinstance(event, TextDeltas):
            return [chunk for text in event.texts for chunk in self.encode(TextDelta(text))]
        if isinstance(event, TextDelta):
            text = event.text
            if self._owui is not None and self._owui.thinking:
                return [self._content_chunk(piece) for piece in split_text(self._owui.end_thinking() + text)]
            if len(text) <= MAX_DELTA_CHARS:  # the usual delta: no split_text and list building
                return [self._content_head + encode_basestring(text) + CONTENT_TAIL] if text else []
            return [self._content_chunk(piece) for piece in split_text(text)]
        if isinstance(event, ReasoningDelta):
            if not self.reasoning:
                return []
            if self._owui is not None:
                return [self._content_chunk(piece) for piece in split_text(self._owui.thinking_text(event.text))]
            return [self._chunk({"reasoning_content": piece})
                    for piece in split_text(self._rounds.piece(event.text))]
        if isinstance(event, ToolCallStarted):
            if self.inline_markers and event.marker:
                marker = format_marker(event.marker)
                self._markers[event.call_id] = marker
                return [self._chunk({"content": marker})]
            if self._owui is not None:
                self._started[event.call_id] = event
                closing = [self._content_chunk(self._owui.end_thinking())] if self._owui.thinking else []
                return [*closing, json.dumps(openwebui.started(event), ensure_ascii=False)]
            return []
        if isinstance(event, ToolCallFinished):
            self._rounds.round_ended()
            self._sources.extend(event.sources)
            if self._owui is not None:
                status = openwebui.finished(self._started.pop(event.call_id, None), event)
                return [json.dumps(status, ensure_ascii=False),
                        *(json.dumps(source, ensure_ascii=False) for source in self._owui.sources(event.sources))]
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
        if isinstance(event, Progress):  # the status line; other clients read the reasoning
            return [json.dumps(openwebui.progress(event), ensure_ascii=False)] if self._owui is not None else []
        if isinstance(event, Finished):
            closing = [self._content_chunk(self._owui.end_thinking())] if self._owui and self._owui.thinking else []
            # Open WebUI has had a source event per page: annotations would add each cited one again
            annotations = self._annotations(event) if self._sources and self._owui is None else []
            if annotations:
                frames = [self._chunk({"annotations": annotations}, event.reason)]
            else:
                # `_chunk({}, event.reason)` without building and dumping the dicts: the same bytes
                frames = [self._prefix + '[{"index":0,"delta":{},"logprobs":null,"finish_reason":'
                          + encode_basestring(event.reason) + "}]}"]
            if self.include_usage and self._usage is not None:  # unknown usage: no usage chunk
                frames.append(self._prefix + '[],"usage":' + json.dumps(usage_object(self._usage)) + "}")
            return [*closing, *frames]
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
