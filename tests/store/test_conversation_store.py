"""The Conversations part of the store contract (gateway/store/api.py): conversation objects and
their items, the same cases against every backend (the `store`/`make_store` fixtures, conftest.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.store.api import (
    Conversation,
    ConversationConflictError,
    ConversationItem,
    DuplicateItemError,
    ResponseStore,
    UnknownConversationError,
    UnknownItemError,
)
from tests.store.records import MakeStore, record


def item(item_id: str, text: str = "hi", model: Any = None) -> ConversationItem:
    return ConversationItem(
        item={"id": item_id, "type": "message", "role": "user", "status": "completed",
              "content": [{"type": "input_text", "text": text}]},
        model=model)


def conv(cid: str = "conv_1", **metadata: str) -> Conversation:
    return Conversation(id=cid, created_at=1_700_000_000, metadata=dict(metadata))


def ids(items: list[ConversationItem]) -> list[str]:
    return [i.id for i in items]


async def test_a_created_conversation_reads_back_with_its_items_in_order(store: ResponseStore) -> None:
    await store.create_conversation(conv(topic="trip"), [item("msg_a"), item("msg_b", "é ✓")])
    assert await store.get_conversation("conv_1") == conv(topic="trip")
    got = await store.conversation_items("conv_1")
    assert ids(got) == ["msg_a", "msg_b"]
    assert got[1] == item("msg_b", "é ✓")


async def test_the_model_view_is_kept_beside_the_item_as_given(store: ResponseStore) -> None:
    model = {"covers": ["ws_1", "msg_b"], "messages": [{"role": "tool", "tool_call_id": "c", "content": "ü"}]}
    await store.create_conversation(conv(), [item("msg_a"), item("msg_b", model=model)])
    got = await store.conversation_items("conv_1")
    assert [i.model for i in got] == [None, model]


async def test_unknown_conversations_are_404_for_every_operation(store: ResponseStore) -> None:
    for call in (store.get_conversation("conv_x"), store.update_conversation("conv_x", {}),
                 store.delete_conversation("conv_x"), store.append_items("conv_x", [item("msg_a")]),
                 store.conversation_items("conv_x"), store.list_items("conv_x", limit=10),
                 store.get_item("conv_x", "msg_a"), store.delete_item("conv_x", "msg_a")):
        with pytest.raises(UnknownConversationError) as raised:
            await call
        assert raised.value.status == 404 and "conv_x" in raised.value.message


async def test_metadata_is_replaced_by_an_update(store: ResponseStore) -> None:
    await store.create_conversation(conv(a="1", b="2"), [])
    updated = await store.update_conversation("conv_1", {"c": "3"})
    assert updated.metadata == {"c": "3"} and updated.created_at == 1_700_000_000
    assert await store.get_conversation("conv_1") == updated


async def test_a_deleted_conversation_is_gone_with_its_items_and_its_responses_stay(store: ResponseStore) -> None:
    await store.create_conversation(conv(), [item("msg_a")])
    await store.append_items("conv_1", [item("msg_b")], response=record("resp_1"))
    await store.delete_conversation("conv_1")
    with pytest.raises(UnknownConversationError):
        await store.conversation_items("conv_1")
    with pytest.raises(UnknownConversationError):
        await store.delete_conversation("conv_1")
    assert await store.get("resp_1", touch=False) is not None
    # the id is free again, and the new conversation starts empty
    await store.create_conversation(conv(), [])
    assert await store.conversation_items("conv_1") == []


async def test_appends_go_after_the_last_item_and_store_the_response_with_them(store: ResponseStore) -> None:
    await store.create_conversation(conv(), [item("msg_a")])
    await store.append_items("conv_1", [item("msg_b"), item("msg_c")], expected_last="msg_a",
                             response=record("resp_1"))
    await store.append_items("conv_1", [item("msg_d")])
    assert ids(await store.conversation_items("conv_1")) == ["msg_a", "msg_b", "msg_c", "msg_d"]
    assert await store.get("resp_1", touch=False) == record("resp_1")


async def test_an_append_whose_conversation_moved_on_is_a_409_and_keeps_nothing(store: ResponseStore) -> None:
    await store.create_conversation(conv(), [])
    results = await asyncio.gather(
        store.append_items("conv_1", [item("msg_a")], expected_last="", response=record("resp_a")),
        store.append_items("conv_1", [item("msg_b")], expected_last="", response=record("resp_b")),
        return_exceptions=True)
    refused = [r for r in results if isinstance(r, ConversationConflictError)]
    assert len(refused) == 1 and refused[0].status == 409
    kept = ids(await store.conversation_items("conv_1"))
    assert kept in (["msg_a"], ["msg_b"])
    loser = "resp_b" if kept == ["msg_a"] else "resp_a"
    assert await store.get(loser, touch=False) is None


async def test_an_append_from_the_last_item_it_read_is_kept(store: ResponseStore) -> None:
    await store.create_conversation(conv(), [item("msg_a")])
    with pytest.raises(ConversationConflictError):
        await store.append_items("conv_1", [item("msg_b")], expected_last="")
    await store.append_items("conv_1", [item("msg_b")], expected_last="msg_a")
    await store.delete_item("conv_1", "msg_b")
    # the last item is msg_a again: a turn that read it may append
    await store.append_items("conv_1", [item("msg_c")], expected_last="msg_a")
    assert ids(await store.conversation_items("conv_1")) == ["msg_a", "msg_c"]


async def test_duplicate_item_ids_are_a_400_and_append_nothing(store: ResponseStore) -> None:
    await store.create_conversation(conv(), [item("msg_a")])
    for batch in ([item("msg_b"), item("msg_a")], [item("msg_c"), item("msg_c")]):
        with pytest.raises(DuplicateItemError) as raised:
            await store.append_items("conv_1", batch, response=record("resp_1"))
        assert raised.value.status == 400
    with pytest.raises(DuplicateItemError):
        await store.create_conversation(conv("conv_2"), [item("msg_x"), item("msg_x")])
    with pytest.raises(UnknownConversationError):
        await store.get_conversation("conv_2")
    assert ids(await store.conversation_items("conv_1")) == ["msg_a"]
    assert await store.get("resp_1", touch=False) is None
    # ids are unique per conversation, not across them
    await store.create_conversation(conv("conv_3"), [item("msg_a")])


async def test_list_items_pages_both_ways(store: ResponseStore) -> None:
    names = [f"msg_{i}" for i in range(5)]
    await store.create_conversation(conv(), [item(n) for n in names])
    page = await store.list_items("conv_1", limit=2)
    assert ids(page.items) == ["msg_4", "msg_3"] and page.has_more
    page = await store.list_items("conv_1", limit=2, after="msg_3")
    assert ids(page.items) == ["msg_2", "msg_1"] and page.has_more
    page = await store.list_items("conv_1", limit=2, after="msg_1")
    assert ids(page.items) == ["msg_0"] and not page.has_more
    page = await store.list_items("conv_1", limit=3, order="asc", after="msg_0")
    assert ids(page.items) == ["msg_1", "msg_2", "msg_3"] and page.has_more
    page = await store.list_items("conv_1", limit=2, order="asc", after="msg_3")
    assert ids(page.items) == ["msg_4"] and not page.has_more
    with pytest.raises(UnknownItemError) as raised:
        await store.list_items("conv_1", limit=2, after="msg_nope")
    assert raised.value.param == "after"


async def test_get_and_delete_one_item(store: ResponseStore) -> None:
    await store.create_conversation(conv(k="v"), [item("msg_a"), item("msg_b", "two")])
    assert await store.get_item("conv_1", "msg_b") == item("msg_b", "two")
    assert await store.delete_item("conv_1", "msg_a") == conv(k="v")
    assert ids(await store.conversation_items("conv_1")) == ["msg_b"]
    for call in (store.get_item("conv_1", "msg_a"), store.delete_item("conv_1", "msg_a")):
        with pytest.raises(UnknownItemError):
            await call


async def test_items_of_one_conversation_are_not_seen_from_another(store: ResponseStore) -> None:
    await store.create_conversation(conv("conv_1"), [item("msg_a")])
    await store.create_conversation(conv("conv_2"), [])
    with pytest.raises(UnknownItemError):
        await store.get_item("conv_2", "msg_a")
    assert (await store.list_items("conv_2", limit=10)).items == []


async def test_conversations_survive_a_reopen_and_are_shared_by_two_stores(make_store: MakeStore) -> None:
    async with make_store(10) as a:
        await a.create_conversation(conv(), [item("msg_a")])
    async with make_store(10) as a, make_store(10) as b:
        await b.append_items("conv_1", [item("msg_b")], expected_last="msg_a")
        assert ids(await a.conversation_items("conv_1")) == ["msg_a", "msg_b"]


async def test_conversations_are_not_evicted_by_the_response_bound(make_store: MakeStore) -> None:
    async with make_store(1) as store:
        await store.create_conversation(conv(), [item("msg_a")])
        await store.append_items("conv_1", [item("msg_b")], response=record("resp_1"))
        await store.put(record("resp_2"))
        assert await store.get("resp_1", touch=False) is None
        assert ids(await store.conversation_items("conv_1")) == ["msg_a", "msg_b"]
        assert await store.count() == 1
