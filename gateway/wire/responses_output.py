"""Agent events -> a Responses API response object and its stream events. Pure.

One builder per response. Feed it the agent's events; each call returns the stream events to send
(dicts with `type` and a rising `sequence_number`), and `response()` is the response object at any
moment (the final one after `finish()`, `fail()` or `interrupt()`).

Output items are in the order things happened: text opens a `message` item, a call to one of the
agent's own tools closes it and adds `web_search_call` items (gateway/wire/web_search_items.py:
hosted tools, never `function_call`s, which a client would try to run); a call to a client tool
adds a `function_call` (or `custom_tool_call`) item for the client
(gateway/wire/client_call_items.py). The common shape is therefore the searches first, then
one message; a model that writes a preamble before calling tools yields a message before the calls
too, as OpenAI does. The model's reasoning opens a `reasoning` item before the message or calls it
led to (closed when they begin). A message closed after the agent's tools returned sources gets its
`url_citation`s then, each announced (`response.output_text.annotation.added`) before
`response.output_text.done`.

The conversation in chat format, what a stored response is continued from, is not built here:
the agent keeps it (`AgentRun`, `Finished.messages`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gateway.agent.events import (
    AgentEvent,
    ClientToolCall,
    Finished,
    McpApprovalRequested,
    McpToolsListed,
    ReasoningDelta,
    Source,
    TextDelta,
    TextDeltas,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)
from gateway.wire.chat_stream import split_text
from gateway.wire.citations import citations
from gateway.wire.client_call_items import ClientCalls
from gateway.wire.mcp_items import McpItems
from gateway.wire.responses_event_json import json_copy
from gateway.wire.responses_input import new_id
from gateway.wire.responses_reasoning import ReasoningItems
from gateway.wire.responses_request import ResponsesRequest
from gateway.wire.web_search_items import SOURCES, WebSearchCalls

INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}
#: The `include` value that adds a sealed copy of each reasoning item (gateway/wire/reasoning_replay.py).
ENCRYPTED_REASONING = "reasoning.encrypted_content"

class ResponseBuilder:
    def __init__(
        self,
        request: ResponsesRequest,
        *,
        model: str,
        response_id: str | None = None,
        created_at: int | None = None,
        events: bool = True,
        reasoning: bool = True,
        seal: Callable[[dict[str, Any]], str] | None = None,
    ) -> None:
        """`events=False` when nobody reads the stream events (a request without `stream`): the
        builder keeps the same state but skips the snapshots the events would carry (the
        `response.created` / `in_progress` / final response and a copy of each item).
        `reasoning=False` (API_SERVER_REASONING=hide): no reasoning items. `seal` makes a reasoning
        item's `encrypted_content` when the request's `include` asks for it."""
        self.request = request
        self._events = events
        self._relay_reasoning = reasoning
        self._sources: list[Source] = []
        self.model = model
        self.id = response_id or new_id("resp")
        self.created_at = int(time.time()) if created_at is None else created_at
        self.status = "in_progress"
        self._output: list[dict[str, Any]] = []
        self._seq = 0
        self._message_index: int | None = None  # the open message item, if any
        # Text of the open message not yet joined into it: one join when something reads it, not
        # a copy of the whole text so far per delta.
        self._pending: list[str] = []
        self._usage: Usage | None = None
        self._finish_reason: str | None = None
        self._error: dict[str, Any] | None = None
        self._incomplete_details: dict[str, Any] | None = None
        self._completed_at: int | None = None
        self._ending_seq: int | None = None  # the sequence number of the ending event, once made
        self._web = WebSearchCalls(self._output, self._event, self._snapshot, sources=SOURCES in request.include)
        self._mcp = McpItems(self._output, self._event, self._snapshot)
        self._client_calls = ClientCalls(self._output, self._event, self._snapshot, request.client_tools)
        asked = request.reasoning["summary"]
        self._thinking = ReasoningItems(self._output, self._event, self._snapshot, summary=asked != "none",
                                        stream_summary=asked not in (None, "none"),
                                        seal=seal if ENCRYPTED_REASONING in request.include else None)

    # ---- stream events ------------------------------------------------------------------------

    def _snapshot(self, value: Any) -> Any:
        """What an event carries of an item: a copy, so later changes to the item do not reach an
        event not yet sent; the item itself when no event is sent."""
        return json_copy(value) if self._events else value

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return event

    def start(self) -> list[dict[str, Any]]:
        """`response.created` (with `output: []`) and `response.in_progress`."""
        if not self._events:
            return []
        snapshot = self.response()
        return [
            self._event("response.created", response=snapshot),
            self._event("response.in_progress", response=json_copy(snapshot)),
        ]

    def feed(self, event: AgentEvent) -> list[dict[str, Any]]:
        """Take one agent event; return the stream events it produces (possibly none; always
        none with `events=False`)."""
        if isinstance(event, TextDelta):
            produced = self._text(event.text)
        elif isinstance(event, TextDeltas):  # an event per text, as each alone would have made
            produced = [out for text in event.texts for out in self._text(text)]
        elif isinstance(event, ReasoningDelta):
            produced = self._reasoning(event.text, event.field) if self._relay_reasoning else []
        elif isinstance(event, ToolCallStarted):
            produced = self._close_open("completed")  # first: its events take the earlier sequence numbers
            produced.extend(self._mcp.started(event) if event.mcp is not None else self._web.started(event))
        elif isinstance(event, ClientToolCall):
            produced = [*self._close_open("completed"), *self._client_calls.add(event)]
        elif isinstance(event, ToolCallFinished):
            self._sources.extend(event.sources)
            produced = self._mcp.finished(event) if self._mcp.owns(event.call_id) else self._web.finished(event)
        elif isinstance(event, McpToolsListed):
            produced = self._mcp.listed(event)
        elif isinstance(event, McpApprovalRequested):
            produced = [*self._close_open("completed"), *self._mcp.approval_requested(event)]
        else:
            self._note(event)
            return []
        return produced if self._events else []

    def _note(self, event: AgentEvent) -> None:
        if isinstance(event, Usage):
            self._usage = event
        elif isinstance(event, Finished):
            self._finish_reason = event.reason

    def finish(self) -> list[dict[str, Any]]:
        """End normally: `response.completed`, or `response.incomplete` when the model stopped on
        its token limit or a content filter."""
        reason = INCOMPLETE_REASONS.get(self._finish_reason or "")
        status = "incomplete" if reason else "completed"
        events = self._close_open("incomplete" if reason else "completed")
        if reason:
            self._incomplete_details = {"reason": reason}
        self._end(status)
        return self._ending(events, f"response.{status}")

    def fail(self, message: str, code: str = "server_error") -> list[dict[str, Any]]:
        """End with an error after the stream started: `response.failed`. After `finish()` (the
        finished response could not be stored) the failure takes the place of the ending event,
        with its sequence number: the ending was never sent."""
        if self._ending_seq is not None:
            self._seq = self._ending_seq
        events = self._close_open("incomplete")
        self._error = {"code": code, "message": message}
        self._end("failed")
        return self._ending(events, "response.failed")

    def interrupt(self, reason: str | None = None) -> list[dict[str, Any]]:
        """End because the client went away (or, with `reason` as `incomplete_details.reason`, the
        gateway stopped): an `incomplete` response with what was produced."""
        events = self._close_open("incomplete")
        if reason is not None:
            self._incomplete_details = {"reason": reason}
        self._end("incomplete")
        return self._ending(events, "response.incomplete")

    def cancel(self) -> None:
        """End because the client cancelled a background run: `cancelled`, with what was produced.
        No event: OpenAI's streams have none for it (a follower's stream just ends)."""
        self._close_open("incomplete")
        self._end("cancelled")

    def _ending(self, events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
        self._ending_seq = self._seq  # the events before it have taken theirs already
        return [*events, self._event(kind, response=self.response())] if self._events else []

    def _end(self, status: str) -> None:
        self._sync()
        self._web.cut_short()
        self._mcp.cut_short()
        self.status = status
        self._completed_at = int(time.time()) if status == "completed" else None

    # ---- items --------------------------------------------------------------------------------

    def _sync(self) -> None:
        """Join the pending text into the open message (and reasoning) item; every reader and
        every change of item calls this first."""
        self._thinking.sync()
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        assert self._message_index is not None
        self._output[self._message_index]["content"][0]["text"] += text

    def _text(self, text: str) -> list[dict[str, Any]]:
        if not text:
            return []
        events: list[dict[str, Any]] = self._thinking.close("completed") if self._thinking.is_open else []
        if self._message_index is None:
            events.extend(self._open_message())
        index = self._message_index
        assert index is not None
        item = self._output[index]
        self._pending.append(text)
        # One huge upstream delta becomes several events, as in chat streams, so no delta line is huge.
        events.extend(self._event(
            "response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
            delta=piece, logprobs=[],
        ) for piece in split_text(text))
        return events

    def _open_message(self) -> list[dict[str, Any]]:
        item: dict[str, Any] = {"id": new_id("msg"), "type": "message", "role": "assistant", "status": "in_progress",
                "content": []}
        index = len(self._output)
        self._output.append(item)
        self._message_index = index
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        events = [self._event("response.output_item.added", output_index=index, item=self._snapshot(item))]
        item["content"].append(part)
        events.append(self._event(
            "response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
            part=self._snapshot(part),
        ))
        return events

    def _close_open(self, status: str) -> list[dict[str, Any]]:
        return [*self._thinking.close(status), *self._close_message(status)]

    def _close_message(self, status: str) -> list[dict[str, Any]]:
        self._sync()
        index, self._message_index = self._message_index, None
        if index is None:
            return []
        item = self._output[index]
        item["status"] = status
        part = item["content"][0]
        events = []
        if self._sources:  # found once, when the text is whole; only after a tool returned pages
            for position, citation in enumerate(citations(part["text"], self._sources)):
                annotation = citation.responses()
                part["annotations"].append(annotation)
                events.append(self._event(
                    "response.output_text.annotation.added", item_id=item["id"], output_index=index,
                    content_index=0, annotation_index=position, annotation=self._snapshot(annotation)))
        return [
            *events,
            self._event("response.output_text.done", item_id=item["id"], output_index=index,
                        content_index=0, text=part["text"], logprobs=[]),
            self._event("response.content_part.done", item_id=item["id"], output_index=index,
                        content_index=0, part=self._snapshot(part)),
            self._event("response.output_item.done", output_index=index, item=self._snapshot(item)),
        ]

    def _reasoning(self, text: str, field: str) -> list[dict[str, Any]]:
        if not text:
            return []
        # reasoning after text: a new step begins
        events = [] if self._thinking.is_open else self._close_message("completed")
        return [*events, *self._thinking.add(text, field)]

    # ---- results ------------------------------------------------------------------------------

    @property
    def output_text(self) -> str:
        self._sync()
        return "".join(
            part["text"] for item in self._output if item["type"] == "message" for part in item["content"]
        )

    def usage(self) -> dict[str, Any] | None:
        if self._usage is None:
            return None
        usage = self._usage
        # the details are required in the Responses API's usage: 0 when no upstream reported them
        return {
            "input_tokens": usage.prompt_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_tokens or 0, "cache_write_tokens": 0},
            "output_tokens": usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
            "total_tokens": usage.total_tokens,
        }

    def kept_output(self) -> list[dict[str, Any]]:
        """The output as a conversation keeps it: searches with their sources, included or not."""
        self._sync()
        return self._web.with_sources(json_copy(self._output))

    def response(self) -> dict[str, Any]:
        """The response object as it stands (a fresh copy)."""
        self._sync()
        request = self.request
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": self.status,
            "completed_at": self._completed_at,
            "background": request.background,
            "error": json_copy(self._error),
            "incomplete_details": json_copy(self._incomplete_details),
            "instructions": request.instructions,
            "max_output_tokens": request.max_output_tokens,
            "max_tool_calls": request.max_tool_calls,
            "model": self.model,
            "output": json_copy(self._output),
            "parallel_tool_calls": request.parallel_tool_calls,
            "previous_response_id": request.previous_response_id,
            "conversation": {"id": request.conversation} if request.conversation else None,
            "reasoning": dict(request.reasoning),
            "service_tier": "default",
            "store": request.store,
            "temperature": request.temperature,
            "text": json_copy(request.text),
            "tool_choice": json_copy(request.tool_choice),
            "tools": json_copy(request.tools),
            "top_p": request.top_p,
            "truncation": request.truncation,
            "usage": self.usage(),
            "user": request.user,
            "metadata": dict(request.metadata),
        }
