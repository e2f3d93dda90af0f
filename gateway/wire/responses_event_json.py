"""A Responses stream event as JSON text, and the deep copy the builder snapshots items with. Pure.

Split from gateway/wire/responses_output.py (the builder), which stays about the events' content;
this is about their bytes.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring
from typing import Any

#: The text-delta event's keys, in the order `_text` builds them (the fast lane of `event_json`).
TEXT_DELTA_KEYS = ("type", "sequence_number", "item_id", "output_index", "content_index", "delta", "logprobs")


def json_copy(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars). All the builder copies is such
    data, and copy.deepcopy's memo and dispatch made it most of the builder's time on a stream
    (snapshots in `response.created`, `in_progress`, the item events and the final response)."""
    if isinstance(value, dict):
        return {key: json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_copy(item) for item in value]
    return value


def event_json(event: dict[str, Any]) -> str:
    """A stream event as `json.dumps(event, ensure_ascii=False)` writes it. The text delta, most of
    a stream, is assembled from its parts: the same bytes at about a third of the cost (no
    JSONEncoder and walk per event); any other event, or one of another shape, goes through json.dumps."""
    if event.get("type") == "response.output_text.delta" and tuple(event) == TEXT_DELTA_KEYS:
        _, seq, item_id, output_index, content_index, delta, logprobs = event.values()
        if (type(item_id) is str and type(delta) is str and type(seq) is int and type(output_index) is int
                and type(content_index) is int and logprobs == []):
            return (
                f'{{"type": "response.output_text.delta", "sequence_number": {seq}, '
                f'"item_id": {encode_basestring(item_id)}, "output_index": {output_index}, '
                f'"content_index": {content_index}, "delta": {encode_basestring(delta)}, "logprobs": []}}'
            )
    return json.dumps(event, ensure_ascii=False)
