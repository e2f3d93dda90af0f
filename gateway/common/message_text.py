"""The text of a chat message's `content`, for the wire and the agent alike (below both layers)."""

from __future__ import annotations

from typing import Any


def text_of(content: Any) -> str:
    """A string as it is, the `text` parts of a content list joined, anything else ""."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""
