"""What both kinds of Responses reply share (the plain and streamed ones in routes/responses.py,
the background one in routes/responses_background.py): what the turn continues, and storing the
response when it ends."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from gateway.http.run_loop import Messages
from gateway.http.sse import named_frames
from gateway.store.api import ConversationItem, ResponseStore, StoredResponse
from gateway.upstream.routes import RouteTurn
from gateway.wire.conversations import turn_items
from gateway.wire.responses_event_json import event_json
from gateway.wire.responses_output import ResponseBuilder
from gateway.wire.responses_request import ResponsesRequest


@dataclass
class Continuation:
    """What a request continues: the stored conversation as far back as the context window
    reaches (empty for a fresh start), and what the store checks when the turn is kept, so that a
    turn stored meanwhile (another replica's, or a concurrent request's) makes this one a 409
    rather than a lost turn (see store/api.py)."""

    transcript: list[dict[str, Any]] = field(default_factory=list)
    #: False: older history was left unread (the window's budget was spent before its start)
    complete: bool = True
    #: the record this turn continues: its parent when stored (previous_response_id, a named head)
    parent_id: str | None = None
    #: a named conversation: the head it continued ("" when fresh)
    expected_head: str | None = None
    #: a conversation object (`conv_...`): its id, and the last item the turn read ("" if none)
    conversation_id: str | None = None
    expected_last: str | None = None


def named(events: list[dict[str, Any]]) -> bytes:
    return named_frames([(event["type"], event_json(event)) for event in events])


def ending_on_assistant(messages: Messages) -> list[dict[str, Any]]:
    """A kept turn ends on an assistant message (what a chat upstream expects after tool
    results). The agent's finished turns always do; one the client cut short may not."""
    if not messages or messages[-1]["role"] == "tool":
        return [*messages, {"role": "assistant", "content": ""}]
    return list(messages)


class Reply:
    """What both kinds of Responses reply share: the builder, and storing the response."""

    def __init__(self, store: ResponseStore, parsed: ResponsesRequest, builder: ResponseBuilder,
                 continuation: Continuation, turn: RouteTurn | None = None) -> None:
        self.store, self.parsed, self.builder = store, parsed, builder
        self.continuation = continuation
        self.turn = turn

    def served(self) -> None:
        """The response's `model` is the route that answered (a fallback's, perhaps)."""
        if self.turn is not None:
            self.builder.model = self.turn.model_id

    async def save(self, messages: Messages) -> None:
        """Store the response as the builder has it, with its own turn (its input and the
        transcript the agent kept of it) and a link to the record it continued, never a copy of
        the history (a chain is read back by walking parents). A turn of a conversation
        object that ended (completed or incomplete, not failed or cut short) appends its input
        and output items to it, with the response in the same write, whatever `store` says
        (as OpenAI does: `store` is about the response object)."""
        builder, parsed, continuation = self.builder, self.parsed, self.continuation
        response = builder.response()
        conversation_id = continuation.conversation_id
        record = StoredResponse(
            id=builder.id, created_at=builder.created_at, response=response,
            transcript=[*parsed.messages, *messages], input_items=parsed.input_items,
            conversation=None if conversation_id is not None else parsed.conversation,
            parent_id=continuation.parent_id, expected_head=continuation.expected_head,
        )
        # Shielded: a client going away must not cancel the write halfway.
        if conversation_id is not None and builder.status in ("completed", "incomplete"):
            items = turn_items(parsed.input_items, builder.kept_output(), list(messages))
            await asyncio.shield(self.store.append_items(
                conversation_id, [ConversationItem(item, model) for item, model in items],
                expected_last=continuation.expected_last, response=record if parsed.store else None))
        elif parsed.store:
            await asyncio.shield(self.store.put(record))


