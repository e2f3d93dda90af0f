"""A `reasoning` item a client replays, as the reasoning field of the assistant message it led to.
Pure.

Within a turn's tool rounds a thinking model wants its reasoning back (DeepSeek's thinking models,
gpt-oss), which the gateway's own loop gives it. A client that keeps its own history (`store:
false`, Codex CLI) replays the open turn's `reasoning` items before its `function_call`s; each
becomes the reasoning field of the assistant message holding those calls. Its text is the
`encrypted_content` the gateway sealed (`include: ["reasoning.encrypted_content"]`: the text and the
field the upstream used, gateway/common/seal.py) when that opens here, else the item's
`reasoning_text` content, else its summary (the gateway's summary is the same text). A sealed value
that does not open (another deployment's, changed, forged) is ignored, not refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The field a replayed reasoning goes upstream under when the upstream's own is not known:
#: DeepSeek's, whose thinking models require it back within a turn's tool calls.
DEFAULT_FIELD = "reasoning_content"
#: The fields upstreams send reasoning under (gateway/upstream/deltas.py), accepted from a sealed value.
FIELDS = ("reasoning_content", "reasoning", "reasoning_text")

Unseal = Callable[[object], "dict[str, Any] | None"]


def sealed_value(text: str, field: str) -> dict[str, Any]:
    """What a reasoning item's `encrypted_content` seals."""
    return {"text": text, "field": field if field in FIELDS else DEFAULT_FIELD}


def replayed(item: dict[str, Any], unseal: Unseal | None) -> tuple[str, str] | None:
    """(field, text) a replayed reasoning item gives the upstream; None when it holds none."""
    opened = unseal(item.get("encrypted_content")) if unseal is not None else None
    if opened is not None and isinstance(opened.get("text"), str) and opened.get("field") in FIELDS:
        return opened["field"], opened["text"]
    content = item.get("content") or []
    text = "".join(part.get("text") or "" for part in content
                   if isinstance(part, dict) and part.get("type") in ("reasoning_text", "text"))
    if not text:
        text = "\n\n".join(part.get("text") or "" for part in item.get("summary") or [] if isinstance(part, dict))
    return (DEFAULT_FIELD, text) if text.strip() else None
