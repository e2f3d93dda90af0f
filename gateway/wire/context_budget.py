"""Whether a turn's input fits the model's context window, and what history it keeps. Pure.

The gateway has no tokenizer for the upstream's model, so it estimates, erring high: a message
costs its JSON (UTF-8, as it goes upstream) at `BYTES_PER_TOKEN` ASCII bytes per token and one token
per byte of any other character (no byte-level tokenizer makes more than one token of a byte, so a
non-ASCII character counts 2 to 4), plus `MESSAGE_OVERHEAD` tokens for its role and framing. Real
tokenizers give about 4 bytes of English per token, so the estimate says more tokens than the
model will count, and a request it lets through fits. An image counts by its size, not its base64
(gateway/wire/image_tokens.py). On top of the input, `reserve` tokens are
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
from gateway.wire.image_tokens import image_tokens

BYTES_PER_TOKEN = 3
MESSAGE_OVERHEAD = 4
#: Tokens kept for the agent's system prompt and the schemas of its web tools.
AGENT_RESERVE = 1024
#: No model the gateway fronts has a smaller context: a turn with no history whose `fixed` tokens
#: are within it fits whatever the window, so it is not checked (and the window not looked up).
SMALLEST_WINDOW = 2048
#: the bytes 0x80-0xFF, deleted by bytes.translate to count the ASCII bytes of an encoding
_HIGH_BYTES = bytes(range(0x80, 0x100))


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


def encoded_tokens(encoded: bytes) -> int:
    """The tokens of UTF-8 JSON at most: ASCII at BYTES_PER_TOKEN, every other byte one token."""
    if encoded.isascii():
        return len(encoded) // BYTES_PER_TOKEN
    ascii_bytes = len(encoded.translate(None, _HIGH_BYTES))
    return ascii_bytes // BYTES_PER_TOKEN + (len(encoded) - ascii_bytes)


def message_tokens(message: Any) -> int:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list) and any(_is_image(part) for part in content):
        # the image's base64 is not what the model reads: its size is (image_tokens.py)
        images = sum(image_tokens(part) for part in content if _is_image(part))
        rest = {**message, "content": [part for part in content if not _is_image(part)]}
        return encoded_tokens(json_out.dumps(rest)) + images + MESSAGE_OVERHEAD
    return encoded_tokens(json_out.dumps(message)) + MESSAGE_OVERHEAD


def _is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "image_url"


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
    the items' divided one by one. An image's base64 is no bound of its cost (a small image's is
    less): a list with images is counted item by item."""
    encoded = json_out.dumps(fixed)
    # find, not `in`: bytes.__contains__ tries the needle as an int first and pays for the TypeError
    if encoded.find(b'"image_url"') >= 0:
        return fixed_tokens(fixed, max_output)
    return encoded_tokens(encoded) + MESSAGE_OVERHEAD * len(fixed) + (max_output or 0) + AGENT_RESERVE


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


def cut_to_tokens(text: str, tokens: int) -> tuple[str, int]:
    """`text` cut from its end by at least `tokens` tokens if it holds them (at a line's end where
    one is near), and the tokens cut."""
    whole = encoded_tokens(json_out.dumps(text))
    keep_tokens = whole - tokens
    if keep_tokens <= 0:
        return "", whole
    end = len(text) * keep_tokens // whole
    while end > 0 and encoded_tokens(json_out.dumps(text[:end])) > keep_tokens:
        end = end * 9 // 10
    line = text.rfind("\n", 0, end)
    if line > end * 9 // 10:
        end = line
    return text[:end], whole - encoded_tokens(json_out.dumps(text[:end]))
