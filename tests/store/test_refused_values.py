"""What a database refuses as data is the client's doing, not an outage: a 400
(UnstorableValueError), never StoreUnavailableError's 503. The wire layer already keeps such ids
and names out (tests/http/test_ids_and_names.py); this is the store's own line behind it, on both
backends: SQLite stores or finds nothing, PostgreSQL refuses, and neither says "unavailable"."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from gateway.errors import InvalidRequestError, UnstorableValueError
from gateway.store.api import Conversation, ConversationItem, ResponseStore, StoreUnavailableError
from tests.store.records import record

#: Random text over PostgreSQL's btree row limit (2,704 bytes) even after its index compression.
HUGE_ID = secrets.token_urlsafe(9000)


def _item(item_id: str) -> ConversationItem:
    return ConversationItem({"id": item_id, "type": "message", "role": "user", "content": []})


async def _outcome(work: Awaitable[Any]) -> str:
    try:
        await work
    except StoreUnavailableError:
        return "unavailable"
    except UnstorableValueError as exc:
        assert exc.status == 400 and exc.code == "invalid_value"
        assert HUGE_ID not in exc.message  # the value is not echoed back
        return "refused"
    except InvalidRequestError:
        return "4xx"
    return "ok"


Operation = Callable[[ResponseStore], Awaitable[Any]]
OPERATIONS: dict[str, Operation] = {
    "get with a NUL": lambda s: s.get("resp_\x00"),
    "delete with a NUL": lambda s: s.delete("resp_\x00"),
    "conversation head with a NUL": lambda s: s.conversation_head("name\x00"),
    "put with a NUL name": lambda s: s.put(record("resp_nul", conversation="a\x00b", expected_head="")),
    "put with a huge name": lambda s: s.put(record("resp_huge", conversation=HUGE_ID, expected_head="")),
    "conversation with a NUL id": lambda s: s.get_conversation("conv_\x00"),
    "item with a NUL id": lambda s: s.create_conversation(Conversation("conv_nul", 1), [_item("a\x00")]),
    "item with a huge id": lambda s: s.create_conversation(Conversation("conv_huge", 1), [_item(HUGE_ID)]),
}


@pytest.mark.parametrize("operation", list(OPERATIONS))
async def test_a_value_the_database_refuses_is_never_store_unavailable(store: ResponseStore, operation: str) -> None:
    assert await _outcome(OPERATIONS[operation](store)) != "unavailable"
    await store.check()  # and the store is still there


async def test_postgres_refuses_a_nul_and_an_oversize_key_as_a_400(make_store: Any, request: Any) -> None:
    if "postgres" not in request.node.callspec.id:
        pytest.skip("SQLite stores what PostgreSQL refuses")
    async with make_store(10) as store:
        assert await _outcome(store.get("resp_\x00")) == "refused"
        assert await _outcome(store.create_conversation(Conversation("conv_huge", 1), [_item(HUGE_ID)])) == "refused"
