"""The store's JSON columns, for both backends: TEXT written with the gateway's JSON encoder
(orjson when installed; bench/README.md) and read back byte for byte, so the database reads the
same with the sqlite3 shell, psql, or an older gateway."""

from __future__ import annotations

from typing import Any

from gateway.common import json_in, json_out


def to_text(value: Any) -> str:
    return json_out.dumps(value, ensure_ascii=True).decode()


def from_text(text: str | bytes) -> Any:
    return json_in.loads(text.encode() if isinstance(text, str) else text)


def to_text_or_none(value: Any) -> str | None:
    """A nullable column: None stays NULL (a conversation item's model view, say)."""
    return None if value is None else to_text(value)


def from_text_or_none(text: str | bytes | None) -> Any:
    return None if text is None else from_text(text)


def item_rows(conversation_id: str, items: list[Any], first: int) -> list[tuple[Any, ...]]:
    """The rows of conversation items as both backends insert them: (conversation, position, id,
    item JSON, model view JSON or NULL, bytes of the two)."""
    rows = []
    for offset, item in enumerate(items):
        text, model = to_text(item.item), to_text_or_none(item.model)
        rows.append((conversation_id, first + offset, item.id, text, model,
                     len(text) + (len(model) if model is not None else 0)))
    return rows
