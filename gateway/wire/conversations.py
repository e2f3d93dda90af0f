"""The Conversations API on the wire, and how a conversation's items read to the model. Pure.

Requests: `POST /v1/conversations` (`items`, `metadata`), `POST /v1/conversations/{id}`
(`metadata`), `POST /v1/conversations/{id}/items` (`items`), and the list queries (`limit`,
`order`, `after`, `include`) that `/v1/responses/{id}/input_items` shares.

Two views of one item: the client sees the item (a message, a `web_search_call`, a
`function_call` ...), the model reads what the agent really had. A turn's output items are stored
with the agent's own messages of the turn (its tool calls with their full results) on the last of
them, `{"covers": [ids of the turn's output items], "messages": [...]}`. While every covered item
is still there, the model reads those messages in their place; once the client deletes one of
them, the turn reads as its remaining items say (`input_to_messages`), like items a client added.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.errors import InvalidRequestError, echo
from gateway.wire import ids
from gateway.wire.responses_input import input_to_messages, normalize_input
from gateway.wire.responses_request import INCLUDABLE, parse_metadata
from gateway.wire.responses_tool_items import FlatName
from gateway.wire.web_search_items import SOURCES

#: OpenAI's bound on the items one request adds to a conversation.
MAX_ITEMS_PER_REQUEST = 20
CONVERSATION_ID_PREFIX = "conv_"
MAX_LIST_LIMIT = 100

#: An item as the store keeps it: the client's view and the model's (None: the item itself).
Stored = tuple[dict[str, Any], Any]


def is_conversation_id(value: str) -> bool:
    """A Conversations API id (`conv_...`), as against a named conversation (any other string)."""
    return value.startswith(CONVERSATION_ID_PREFIX)


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequestError("The request body must be a JSON object.")
    return body


def _items(body: dict[str, Any], *, required: bool) -> list[dict[str, Any]]:
    value = body.get("items")
    if value is None and not required:
        return []
    if not isinstance(value, list) or (required and not value):
        raise _bad("'items' must be a non-empty list of items." if required else "'items' must be a list of items.",
                   "items")
    if len(value) > MAX_ITEMS_PER_REQUEST:
        raise _bad(f"'items' may hold at most {MAX_ITEMS_PER_REQUEST} items per request.", "items")
    items = normalize_input(value, "items")
    _check_unique_ids(items, "items")
    return items


def _check_unique_ids(items: list[dict[str, Any]], param: str) -> None:
    seen: set[str] = set()
    for index, item in enumerate(items):
        if item["id"] in seen:
            raise _bad(f"item id '{echo(item['id'])}' appears twice; item ids are unique within a conversation.",
                       f"{param}[{index}].id")
        seen.add(item["id"])


def parse_create(body: Any) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """`POST /v1/conversations`: its metadata and its first items (normalized, with ids)."""
    body = _object(body)
    return parse_metadata(body), _items(body, required=False)


def parse_update(body: Any) -> dict[str, str]:
    """`POST /v1/conversations/{id}`: the new metadata (required, as OpenAI has it)."""
    body = _object(body)
    if "metadata" not in body:
        raise _bad("'metadata' is required.", "metadata")
    return parse_metadata(body)


def parse_add_items(body: Any) -> list[dict[str, Any]]:
    """`POST /v1/conversations/{id}/items`: the items to append (1 to 20)."""
    return _items(_object(body), required=True)


@dataclass(frozen=True)
class ListQuery:
    limit: int
    order: str
    after: str | None
    include: tuple[str, ...]


def parse_list_query(query: Mapping[str, str], include: list[str] | None = None) -> ListQuery:
    """`limit` (1-100, default 20), `order` (`asc` or `desc`, the default), `after` (an item id)
    and `include` (the values of a repeated `include` or `include[]` parameter)."""
    raw = query.get("limit", "20")
    # plain ASCII digits only: int() would also take "1_0", " 5" or an Arabic-Indic five
    limit = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 10 else 0
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise _bad(f"'limit' must be an integer from 1 to {MAX_LIST_LIMIT}.", "limit")
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise _bad("'order' must be asc or desc.", "order")
    after = query.get("after")
    if after is not None:
        ids.check(after, "after", item_id=True)
    return ListQuery(limit=limit, order=order, after=after, include=parse_include(include or []))


def parse_include(values: list[str]) -> tuple[str, ...]:
    """The values of a repeated `include` query parameter, each one OpenAI knows (else a 400)."""
    for value in values:
        if value not in INCLUDABLE:
            raise _bad(f"'include' must be one of {', '.join(INCLUDABLE)}; got {echo(repr(value))}.", "include")
    return tuple(values)


def item_list(items: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """OpenAI's list object (`first_id`/`last_id` null on an empty page)."""
    return {
        "object": "list",
        "data": items,
        "first_id": items[0]["id"] if items else None,
        "last_id": items[-1]["id"] if items else None,
        "has_more": has_more,
    }


def shown(item: dict[str, Any], include: tuple[str, ...]) -> dict[str, Any]:
    """An item as a listing shows it: a search's `action.sources` only with
    `include=web_search_call.action.sources` (kept either way), as OpenAI's listing does."""
    if item.get("type") != "web_search_call" or SOURCES in include or "sources" not in item.get("action", {}):
        return item
    return {**item, "action": {k: v for k, v in item["action"].items() if k != "sources"}}


def deleted(conversation_id: str) -> dict[str, Any]:
    return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}


# ---- the model's view ------------------------------------------------------------------------


def turn_items(input_items: list[dict[str, Any]], output: list[dict[str, Any]],
               messages: list[dict[str, Any]]) -> list[Stored]:
    """What a finished turn appends: its input items (each reads as itself), then its output
    items, the last carrying the agent's messages of the turn for all of them."""
    stored: list[Stored] = [(item, None) for item in input_items]
    if output:
        *first, last = output
        stored += [(item, None) for item in first]
        stored.append((last, {"covers": [item["id"] for item in output], "messages": messages}))
    return stored


def transcript(items: list[Stored], flat_name: FlatName | None = None) -> list[dict[str, Any]]:
    """A conversation's items as chat-format messages for the next turn (see the module docstring);
    `flat_name`: the upstream's names of the request's namespace tools (responses_tools.py)."""
    present = {item["id"] for item, _ in items}
    covered: set[str] = set()
    carriers: set[str] = set()
    for item, model in items:
        if _whole(model, present):
            covered.update(model["covers"])
            carriers.add(item["id"])
    messages: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []  # consecutive items read as themselves, converted together
    for item, model in items:
        if item["id"] in carriers:
            messages += input_to_messages(run, flat_name)
            run = []
            messages += model["messages"]
        elif item["id"] not in covered:
            run.append(item)
    return messages + input_to_messages(run, flat_name)


def _whole(model: Any, present: set[str]) -> bool:
    return (isinstance(model, dict) and isinstance(model.get("messages"), list)
            and isinstance(model.get("covers"), list) and all(i in present for i in model["covers"]))
