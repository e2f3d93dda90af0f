"""What the store tests build: a record, and the factory type of the `make_store` fixture."""

from __future__ import annotations

from collections.abc import Callable

from gateway.store.api import ResponseStore, StoredResponse

MakeStore = Callable[[int], ResponseStore]


def record(rid: str, conversation: str | None = None, text: str = "hi",
           expected_head: str | None = None) -> StoredResponse:
    return StoredResponse(
        id=rid, created_at=1_700_000_000,
        response={"id": rid, "object": "response", "output": [{"type": "message", "text": text}]},
        transcript=[{"role": "user", "content": text}, {"role": "assistant", "content": "ok é"}],
        input_items=[{"id": f"msg_{rid}", "type": "message", "role": "user", "content": text}],
        conversation=conversation, expected_head=expected_head,
    )
