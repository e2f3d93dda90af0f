"""Whether a turn's input fits the model's context window, and what history it keeps. Pure.

The gateway has no tokenizer for the upstream's model, so it estimates, erring high: a message
costs its JSON's length in bytes (ASCII-escaped, as it goes upstream: a non-ASCII character counts
6) divided by `BYTES_PER_TOKEN`, plus `MESSAGE_OVERHEAD` tokens for its role and framing. Real
tokenizers give about 4 bytes of English per token, so the estimate says more tokens than the
model will count, and a request it lets through fits. On top of the input, `reserve` tokens are
kept free: the client's `max_output_tokens` (or max_tokens) and `AGENT_RESERVE` for the agent's
own system prompt and tool schemas.

`truncation` (the Responses API's): "disabled" (OpenAI's default) refuses a turn over the window
with 400 `context_length_exceeded` before anything goes upstream; "auto" drops the oldest history
until it fits, never the instructions nor the turn's own input (a turn whose own input is over the
window is refused either way). The store reads history newest first within `history_bytes(...)`,
so a turn never holds more of a long conversation than it could send.
"""

from __future__ import annotations

from typing import Any

from gateway.common import json_out
from gateway.errors import InvalidRequestError

BYTES_PER_TOKEN = 3
MESSAGE_OVERHEAD = 4
#: Tokens kept for the agent's system prompt and the schemas of its web tools.
AGENT_RESERVE = 1024
#: No model the gateway fronts has a smaller context: a turn with no history whose `fixed` tokens
#: are within it fits whatever the window, so it is not checked (and the window not looked up).
SMALLEST_WINDOW = 2048


class ContextLengthExceededError(InvalidRequestError):
    code = "context_length_exceeded"

    @classmethod
    def responses(cls, window: int, needed: int) -> ContextLengthExceededError:
        return cls(f"Your input exceeds the context window of this model ({window} tokens; this request needs "
                   f"about {needed}). Please adjust your input and try again, or send truncation: \"auto\" "
                   "to drop the oldest history.", param="input")

    @classmethod
    def chat(cls, window: int, needed: int) -> ContextLengthExceededError:
        return cls(f"This model's maximum context length is {window} tokens. However, your messages resulted "
                   f"in about {needed} tokens. Please reduce the length of the messages.", param="messages")


def message_tokens(message: Any) -> int:
    return len(json_out.dumps(message, ensure_ascii=True)) // BYTES_PER_TOKEN + MESSAGE_OVERHEAD


def tokens(messages: list[dict[str, Any]]) -> int:
    return sum(message_tokens(message) for message in messages)


def fixed_tokens(fixed: list[Any], max_output: int | None) -> int:
    """What a turn needs whatever its history: its instructions, input and tools (`fixed`), the
    room for its answer and the agent's own prompt."""
    return tokens(fixed) + (max_output or 0) + AGENT_RESERVE


def fixed_tokens_at_most(fixed: list[Any], max_output: int | None) -> int:
    """An upper bound of `fixed_tokens(fixed, max_output)` from one encoding of the whole list:
    each item's own encoding is part of the list's (which adds only brackets and commas, and
    escapes nothing an item's own would not), so its length divided once is at least the sum of
    the items' divided one by one."""
    return (len(json_out.dumps(fixed, ensure_ascii=True)) // BYTES_PER_TOKEN + MESSAGE_OVERHEAD * len(fixed)
            + (max_output or 0) + AGENT_RESERVE)


def history_bytes(window: int, fixed: int) -> int:
    """The stored bytes of history worth reading: what the window leaves after `fixed` tokens."""
    return max(0, window - fixed) * BYTES_PER_TOKEN


def fit(history: list[dict[str, Any]], *, complete: bool, window: int, fixed: int,
        truncation: str, api: str = "responses") -> list[dict[str, Any]]:
    """The history to send, or ContextLengthExceededError. `complete`: `history` is all there is
    (False: the store stopped reading older turns, the budget spent, so it does not fit whole)."""
    if fixed > window:
        raise _exceeded(api, window, fixed)
    costs = [message_tokens(message) for message in history]
    total = fixed + sum(costs)
    if total <= window and complete:
        return history
    if truncation != "auto":
        raise _exceeded(api, window, total if total > window else window + 1)
    start = 0
    while total > window and start < len(history):
        total -= costs[start]
        start += 1
    # a tool result whose call was dropped is refused by chat upstreams: it goes with its call
    while start < len(history) and history[start].get("role") == "tool":
        start += 1
    return history[start:]


def _exceeded(api: str, window: int, needed: int) -> ContextLengthExceededError:
    return (ContextLengthExceededError.chat if api == "chat" else ContextLengthExceededError.responses)(
        window, needed)
