"""The context window (issue 25 items 3 and 4): `truncation` on /v1/responses, a clear 400 on
/v1/chat/completions, the window as the upstream states it, and per-turn records."""

from __future__ import annotations

import sqlite3
from typing import Any

from tests.fakes.upstream import text
from tests.support.helpers import assert_error_envelope

LONG = "word " * 600  # about 3,000 bytes: some 1,000 tokens by the gateway's estimate


def _sent(upstream: Any) -> list[Any]:
    return [m.get("content") for m in upstream.requests[-1]["messages"]]


async def _chain(client: Any, turns: int, **body: Any) -> str:
    previous = None
    for turn in range(turns):
        payload = {"input": f"Q{turn} {LONG}", **body}
        if previous:
            payload["previous_response_id"] = previous
        resp = await client.post("/v1/responses", json=payload)
        assert resp.status == 200, await resp.text()
        previous = (await resp.json())["id"]
    assert previous is not None
    return previous


async def test_a_turn_over_the_window_is_400_context_length_exceeded_before_the_upstream(
        make_client: Any, upstream: Any) -> None:
    client = await make_client(tools=[], llm_context_window=6500)
    last = await _chain(client, 5)
    asked = len(upstream.requests)
    resp = await client.post("/v1/responses", json={"input": "one more " + LONG, "previous_response_id": last})
    assert resp.status == 400
    assert_error_envelope(await resp.json(), code="context_length_exceeded", param="input")
    assert len(upstream.requests) == asked  # nothing went upstream


async def test_truncation_auto_drops_the_oldest_turns_never_the_instructions_nor_the_input(
        make_client: Any, upstream: Any) -> None:
    client = await make_client(tools=[], llm_context_window=6000)
    last = await _chain(client, 6, truncation="auto")
    resp = await client.post("/v1/responses", json={"input": "latest " + LONG, "previous_response_id": last,
                                                    "instructions": "Be brief.", "truncation": "auto"})
    assert resp.status == 200
    assert (await resp.json())["truncation"] == "auto"
    sent = _sent(upstream)
    assert "Be brief." in sent[0] and sent[-1] == "latest " + LONG  # the instructions ride the system prompt
    questions = [c for c in sent if isinstance(c, str) and c.startswith("Q")]
    assert questions and questions[-1].startswith("Q5") and not any(q.startswith("Q0 ") for q in questions)


async def test_an_input_alone_over_the_window_is_refused_even_with_auto(make_client: Any) -> None:
    client = await make_client(tools=[], llm_context_window=1500)
    resp = await client.post("/v1/responses", json={"input": LONG * 3, "truncation": "auto"})
    assert resp.status == 400
    assert_error_envelope(await resp.json(), code="context_length_exceeded", param="input")


async def test_truncation_must_be_auto_or_disabled(client: Any) -> None:
    resp = await client.post("/v1/responses", json={"input": "x", "truncation": "sometimes"})
    assert resp.status == 400
    assert_error_envelope(await resp.json(), param="truncation")


async def test_the_window_is_the_one_the_upstream_states(make_client: Any, upstream: Any) -> None:
    upstream.model_fields = {m: {"max_model_len": 2048} for m in upstream.models}  # as vLLM lists its models
    client = await make_client(tools=[])
    resp = await client.post("/v1/chat/completions",
                             json={"model": "m", "messages": [{"role": "user", "content": LONG * 3}]})
    assert resp.status == 400
    body = await resp.json()
    assert_error_envelope(body, code="context_length_exceeded", param="messages")
    assert "2048 tokens" in body["error"]["message"]
    assert upstream.requests == []
    small = await client.post("/v1/chat/completions",
                              json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert small.status == 200


async def test_a_conversation_object_turn_reads_only_its_newest_items(make_client: Any, upstream: Any) -> None:
    client = await make_client(tools=[], llm_context_window=6000)
    created = await client.post("/v1/conversations", json={"items": [
        {"type": "message", "role": "user", "content": f"old {n} {LONG}"} for n in range(20)]})
    conversation = (await created.json())["id"]
    refused = await client.post("/v1/responses", json={"input": "next", "conversation": conversation})
    assert refused.status == 400
    assert_error_envelope(await refused.json(), code="context_length_exceeded")
    upstream.queue(text("ok"))
    resp = await client.post("/v1/responses", json={"input": "next", "conversation": conversation,
                                                    "truncation": "auto"})
    assert resp.status == 200
    sent = [c for c in _sent(upstream) if isinstance(c, str) and c.startswith("old ")]
    assert sent and sent[-1].startswith("old 19 ") and len(sent) < 20


async def test_each_record_keeps_its_own_turn_so_a_chain_grows_linearly(make_client: Any, tmp_path: Any) -> None:
    client = await make_client(tools=[], llm_context_window=1_000_000)
    await _chain(client, 20)
    db = sqlite3.connect(tmp_path / "responses.db")
    sizes = [row[0] for row in db.execute("SELECT length(transcript) FROM responses ORDER BY created_at, rowid")]
    db.close()
    assert len(sizes) == 20 and max(sizes) < 2 * min(sizes)  # a whole-history copy would grow 20-fold


async def test_an_input_id_already_far_back_in_the_conversation_is_refused_before_the_model_runs(
        make_client: Any, upstream: Any) -> None:
    client = await make_client(tools=[], llm_context_window=6000)
    created = await client.post("/v1/conversations", json={"items": [
        {"id": f"msg_old{n}", "type": "message", "role": "user", "content": f"old {n} {LONG}"} for n in range(20)]})
    conversation = (await created.json())["id"]
    resp = await client.post("/v1/responses", json={
        "conversation": conversation, "truncation": "auto",
        "input": [{"id": "msg_old0", "type": "message", "role": "user", "content": "again"}]})
    assert resp.status == 400
    assert_error_envelope(await resp.json(), param="input[0].id")
    assert upstream.requests == []


async def test_a_streamed_turn_over_the_window_is_a_plain_400_before_any_event(make_client: Any, upstream: Any) -> None:
    client = await make_client(tools=[], llm_context_window=3000)
    resp = await client.post("/v1/responses", json={"input": LONG * 3, "stream": True})
    assert resp.status == 400 and resp.content_type == "application/json"
    assert_error_envelope(await resp.json(), code="context_length_exceeded", param="input")
    assert upstream.requests == []
