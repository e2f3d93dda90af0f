"""The client's history as the upstream gets it: roles it accepts, no reasoning.

What the gateway itself wrote into an earlier answer's text (progress markers, reasoning tags)
is the wire's to take out (gateway/wire/frontends.py): the agent knows no wire format.
"""

from __future__ import annotations

from typing import Any

from gateway.upstream.deltas import REASONING_FIELDS

_REASONING_KEYS = frozenset(REASONING_FIELDS)


def clean_message(message: dict[str, Any]) -> dict[str, Any]:
    """What the upstream gets for one client message: `developer` as `system` (many
    OpenAI-compatible servers reject the newer role), and no reasoning: a reasoning field on an
    earlier turn's assistant message is the client's copy of what we relayed, and some upstreams
    (DeepSeek) refuse it in a new turn's input."""
    role = message.get("role")
    if role == "developer":
        return {**message, "role": "system"}
    if role != "assistant" or _REASONING_KEYS.isdisjoint(message):
        return message
    return {k: v for k, v in message.items() if k not in _REASONING_KEYS}
