"""The model's reasoning as Responses `reasoning` items. Pure.

One item per stretch of reasoning: it opens at the first piece of reasoning after something else
(the start, a message, tool calls) and closes when the text, a call or the end comes. The item
carries the reasoning as `content: [{"type": "reasoning_text", "text"}]`; its events are
`response.output_item.added`, `response.content_part.added`, `response.reasoning_text.delta`s,
then `response.reasoning_text.done`, `response.content_part.done` and `response.output_item.done`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.wire.chat_stream import split_text
from gateway.wire.responses_input import new_id

Event = Callable[..., dict[str, Any]]


class ReasoningItems:
    """The `reasoning` items of one response, kept in the builder's `output` list and announced
    through its `event` maker (so sequence numbers stay one series)."""

    def __init__(self, output: list[dict[str, Any]], event: Event, snapshot: Callable[[Any], Any]) -> None:
        self._output, self._event, self._snapshot = output, event, snapshot
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
            self._output[self._index]["content"][0]["text"] += "".join(self._pending)
            self._pending.clear()

    def add(self, text: str) -> list[dict[str, Any]]:
        """A piece of reasoning: opens an item when none is (the caller closes its message first)."""
        events: list[dict[str, Any]] = []
        if self._index is None:
            item: dict[str, Any] = {"id": new_id("rs"), "type": "reasoning", "summary": [], "content": [],
                                    "status": "in_progress"}
            self._index = len(self._output)
            self._output.append(item)
            part = {"type": "reasoning_text", "text": ""}
            events.append(self._event("response.output_item.added", output_index=self._index,
                                      item=self._snapshot(item)))
            item["content"].append(part)
            events.append(self._event("response.content_part.added", item_id=item["id"],
                                      output_index=self._index, content_index=0, part=self._snapshot(part)))
        index = self._index
        item_id = self._output[index]["id"]
        self._pending.append(text)
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
        part = item["content"][0]
        return [
            self._event("response.reasoning_text.done", item_id=item["id"], output_index=index, content_index=0,
                        text=part["text"]),
            self._event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                        part=self._snapshot(part)),
            self._event("response.output_item.done", output_index=index, item=self._snapshot(item)),
        ]
