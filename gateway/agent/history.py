"""The client's history as the upstream gets it: markers out, roles it accepts, no reasoning.

And which requests are a frontend's housekeeping (Open WebUI's `### Task:` prompts for titles,
tags and follow-ups), which get no web tools.
"""

from __future__ import annotations

from typing import Any

from gateway.upstream.deltas import REASONING_FIELDS
from gateway.wire.markers import strip_markers

BACKGROUND_TASK_PREFIX = "### Task:"
_REASONING_KEYS = frozenset(REASONING_FIELDS)


def is_background_task(messages: list[dict[str, Any]]) -> bool:
    """A frontend's housekeeping prompt (Open WebUI's title/tags/follow-ups): no web tools for it."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return _text_of(message.get("content")).lstrip().startswith(BACKGROUND_TASK_PREFIX)
    return False


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def clean_message(message: dict[str, Any]) -> dict[str, Any]:
    """What the upstream gets for one client message: markers stripped, `developer` as `system`
    (many OpenAI-compatible servers reject the newer role), and no reasoning: a reasoning field
    on an earlier turn's assistant message is the client's copy of what we relayed, and some
    upstreams (DeepSeek) refuse it in a new turn's input."""
    role = message.get("role")
    if role == "developer":
        return {**message, "role": "system"}
    if role != "assistant":
        return message
    if not _REASONING_KEYS.isdisjoint(message):
        message = {k: v for k, v in message.items() if k not in _REASONING_KEYS}
    content = message.get("content")
    if isinstance(content, str):
        stripped = strip_markers(content)
        # most answers hold no marker: the message itself, not a copy per message per turn
        return message if stripped is content else {**message, "content": stripped}
    if isinstance(content, list):
        parts = [
            {**p, "text": strip_markers(p["text"])} if isinstance(p, dict) and isinstance(p.get("text"), str) else p
            for p in content
        ]
        return {**message, "content": parts}
    return message
