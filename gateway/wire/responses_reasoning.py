"""The model's reasoning as Responses `reasoning` items. Pure.

One item per stretch of reasoning: it opens at the first piece of reasoning after something else
(the start, a message, tool calls) and closes when the text, a call or the end comes. The item
carries the reasoning as `content: [{"type": "reasoning_text", "text"}]` and, as OpenAI's service
sends it and the clients built on it read it (the Vercel AI SDK's `reasoningText`,
langchain-openai's reasoning block, pydantic-ai's `ThinkingPart` read only this), as `summary:
[{"type": "summary_text", "text"}]`. The summary is the reasoning text itself: the upstreams
behind the gateway send no summary of their own, and the gateway writes none. `reasoning.summary`
`none` leaves the item's `summary` empty.

The text is streamed once, never twice (a client that prints both kinds of delta, as llm does,
would show it twice): when the request asks for a summary (`reasoning.summary` `auto`, `concise`
or `detailed`) as `response.reasoning_summary_part.added`, `response.reasoning_summary_text.delta`s,
`.done` and `response.reasoning_summary_part.done`, as OpenAI streams it then; otherwise (no
`reasoning.summary`, or `none`) as `response.content_part.added`, `response.reasoning_text.delta`s,
`response.reasoning_text.done` and `response.content_part.done`. Either way the item is announced
by `response.output_item.added` and whole, with both, in `response.output_item.done`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.errors import InvalidRequestError
from gateway.wire.chat_stream import split_text
from gateway.wire.reasoning_replay import sealed_value
from gateway.wire.responses_input import new_id

Event = Callable[..., dict[str, Any]]
SUMMARIES = ("auto", "concise", "detailed", "none")
#: `reasoning.context` (which turns' reasoning the model sees: Codex sends `all_turns`): echoed only;
#: the upstream gets the reasoning the gateway replays (gateway/wire/reasoning_replay.py), not this.
CONTEXTS = ("auto", "current_turn", "all_turns")
#: The efforts OpenAI documents; any other word is taken too (Codex offers `max` and `ultra`, and an
#: upstream may know more): the gateway passes it on as `reasoning_effort` and lets the upstream judge.
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
MAX_EFFORT_CHARS = 64


def reasoning_config(body: dict[str, Any]) -> dict[str, Any]:
    """The request's `reasoning` (`{"effort", "summary"}`, each may be null, and `context` if
    given), checked; echoed on the response object."""
    value = body.get("reasoning")
    if value is None:
        return {"effort": None, "summary": None}
    if not isinstance(value, dict):
        raise InvalidRequestError("'reasoning' must be an object with 'effort' and 'summary'.", param="reasoning")
    effort, summary = value.get("effort"), value.get("summary", value.get("generate_summary"))
    if effort is not None and (not isinstance(effort, str) or not 0 < len(effort) <= MAX_EFFORT_CHARS):
        raise InvalidRequestError(f"'reasoning.effort' must be a word such as {', '.join(EFFORTS)}.",
                                  param="reasoning.effort")
    if summary is not None and summary not in SUMMARIES:
        raise InvalidRequestError(f"'reasoning.summary' must be one of {', '.join(SUMMARIES)}.",
                                  param="reasoning.summary")
    config: dict[str, Any] = {"effort": effort, "summary": summary}
    if "context" in value and value["context"] is not None:
        if value["context"] not in CONTEXTS:
            raise InvalidRequestError(f"'reasoning.context' must be one of {', '.join(CONTEXTS)}.",
                                      param="reasoning.context")
        config["context"] = value["context"]
    return config


class ReasoningItems:
    """The `reasoning` items of one response, kept in the builder's `output` list and announced
    through its `event` maker (so sequence numbers stay one series)."""

    def __init__(self, output: list[dict[str, Any]], event: Event, snapshot: Callable[[Any], Any], *,
                 summary: bool = True, stream_summary: bool = False,
                 seal: Callable[[dict[str, Any]], str] | None = None) -> None:
        self._output, self._event, self._snapshot = output, event, snapshot
        # `include: ["reasoning.encrypted_content"]`: each item's text and field, sealed
        # (gateway/wire/reasoning_replay.py reads them back)
        self._seal = seal
        self._field = "reasoning_content"  # the open item's, as the upstream sent it
        self._summary = summary  # also as the item's `summary`
        # the events: the summary's (asked for) or the reasoning text's, never both
        self._stream_summary = summary and stream_summary
        self._index: int | None = None  # the open reasoning item, if any
        # Text of the open item not yet joined into it: joined when something reads it.
        self._pending: list[str] = []

    @property
    def is_open(self) -> bool:
        return self._index is not None

    def sync(self) -> None:
        """Join the pending text into the open item."""
        if self._pending:
            assert self._index is not None
            item = self._output[self._index]
            text = "".join(self._pending)
            item["content"][0]["text"] += text
            if self._summary:
                item["summary"][0]["text"] += text
            self._pending.clear()

    def add(self, text: str, field: str = "reasoning_content") -> list[dict[str, Any]]:
        """A piece of reasoning: opens an item when none is (the caller closes its message first)."""
        events: list[dict[str, Any]] = []
        self._field = field
        if self._index is None:
            item: dict[str, Any] = {"id": new_id("rs"), "type": "reasoning", "summary": [], "content": [],
                                    "status": "in_progress"}
            self._index = len(self._output)
            self._output.append(item)
            part = {"type": "reasoning_text", "text": ""}
            events.append(self._event("response.output_item.added", output_index=self._index,
                                      item=self._snapshot(item)))
            item["content"].append(part)
            summary = {"type": "summary_text", "text": ""}
            if self._summary:
                item["summary"].append(summary)
            if self._stream_summary:
                events.append(self._event("response.reasoning_summary_part.added", item_id=item["id"],
                                          output_index=self._index, summary_index=0, part=self._snapshot(summary)))
            else:
                events.append(self._event("response.content_part.added", item_id=item["id"],
                                          output_index=self._index, content_index=0, part=self._snapshot(part)))
        index = self._index
        item_id = self._output[index]["id"]
        self._pending.append(text)
        if self._stream_summary:
            events.extend(self._event("response.reasoning_summary_text.delta", item_id=item_id, output_index=index,
                                      summary_index=0, delta=piece) for piece in split_text(text))
        else:
            events.extend(self._event("response.reasoning_text.delta", item_id=item_id, output_index=index,
                                      content_index=0, delta=piece) for piece in split_text(text))
        return events

    def close(self, status: str) -> list[dict[str, Any]]:
        """Close the open item, if any, with `status`."""
        self.sync()
        index, self._index = self._index, None
        if index is None:
            return []
        item = self._output[index]
        item["status"] = status
        if self._seal is not None:
            item["encrypted_content"] = self._seal(sealed_value(item["content"][0]["text"], self._field))
        if self._stream_summary:
            summary = item["summary"][0]
            events = [
                self._event("response.reasoning_summary_text.done", item_id=item["id"], output_index=index,
                            summary_index=0, text=summary["text"]),
                self._event("response.reasoning_summary_part.done", item_id=item["id"], output_index=index,
                            summary_index=0, part=self._snapshot(summary)),
            ]
        else:
            part = item["content"][0]
            events = [
                self._event("response.reasoning_text.done", item_id=item["id"], output_index=index, content_index=0,
                            text=part["text"]),
                self._event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                            part=self._snapshot(part)),
            ]
        events.append(self._event("response.output_item.done", output_index=index, item=self._snapshot(item)))
        return events
