"""Owners on both backends (schema version 4): each owner's view of one store (store/owned.py)
sees only its own records, named conversations and conversation objects; another owner's id reads
as an unknown one; the owner survives a reopen (it is a column, not memory)."""

from __future__ import annotations

import pytest

from gateway.store.api import ConversationConflictError, UnknownConversationError
from gateway.store.owned import OwnedStore
from tests.store.records import MakeStore, record
from tests.store.test_conversation_store import conv, ids, item


async def test_each_owner_sees_only_its_own(make_store: MakeStore) -> None:
    async with make_store(100) as store:
        alice, bob = OwnedStore(store, "/alice"), OwnedStore(store, "/bob")
        await alice.put(record("resp_a", conversation="notes", text="hunter2"))
        await bob.put(record("resp_b", conversation="notes", text="bob here"))
        await alice.create_conversation(conv("conv_a"), [item("msg_1")])
    async with make_store(100) as store:  # reopened: the owners are kept with the rows
        alice, bob = OwnedStore(store, "/alice"), OwnedStore(store, "/bob")
        assert (await alice.get("resp_a")) is not None and await bob.get("resp_a") is None
        assert await bob.chain("resp_a", max_bytes=10**6) is None
        assert not await bob.delete("resp_a") and await alice.get("resp_a") is not None
        heads = [await view.conversation_head("notes") for view in (alice, bob)]
        assert [h.id if h else None for h in heads] == ["resp_a", "resp_b"]
        assert heads[0] is not None and heads[0].conversation == "notes"  # the client's name, not the stored one
        calls = (lambda s, c: s.get_conversation(c), lambda s, c: s.conversation_items(c),
                 lambda s, c: s.update_conversation(c, {"x": "y"}), lambda s, c: s.get_item(c, "msg_1"),
                 lambda s, c: s.append_items(c, [item("msg_2")]), lambda s, c: s.delete_item(c, "msg_1"),
                 lambda s, c: s.conversation_tail(c, max_bytes=100), lambda s, c: s.list_items(c, limit=10),
                 lambda s, c: s.delete_conversation(c))
        for call in calls:
            messages = []
            for conversation_id in ("conv_a", "conv_none"):  # alice's, and one never stored
                with pytest.raises(UnknownConversationError) as refused:
                    await call(bob, conversation_id)
                messages.append(refused.value.message.replace(conversation_id, "?"))
            assert messages[0] == messages[1]
        assert ids(await alice.conversation_items("conv_a")) == ["msg_1"]
        assert await alice.delete("resp_a") and await store.get("resp_a") is None


async def test_a_conflict_names_the_clients_conversation(make_store: MakeStore) -> None:
    async with make_store(100) as store:
        alice = OwnedStore(store, "/alice")
        await alice.put(record("resp_1", conversation="notes"))
        await alice.put(record("resp_2", conversation="notes", expected_head="resp_1"))
        with pytest.raises(ConversationConflictError) as refused:
            await alice.put(record("resp_3", conversation="notes", expected_head="resp_1"))
        assert "'notes'" in refused.value.message and "alice" not in refused.value.message
