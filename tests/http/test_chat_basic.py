"""Chat Completions without tools: the objects and streams clients parse."""

from __future__ import annotations

import time

from tests.fakes.upstream import text
from tests.support.helpers import chat_chunks, streamed_text


async def test_non_streaming_reply_is_a_chat_completion(client, upstream):
    upstream.queue(text("Paris is the capital.", usage=(12, 4)))
    resp = await client.post("/v1/chat/completions", json={
        "model": "whatever", "messages": [{"role": "user", "content": "Capital of France?"}]})
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("application/json")
    body = await resp.json()
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    assert body["model"] == "whatever"
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Paris is the capital.", "refusal": None,
                                 "annotations": []}
    assert choice["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}


async def test_streaming_reply_has_role_content_finish_usage_and_done(client, upstream):
    upstream.queue(text("Streaming works fine.", usage=(7, 3)))
    resp = await client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "hi"}], "stream": True,
        "stream_options": {"include_usage": True}})
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    assert resp.headers["Cache-Control"] == "no-cache"
    assert resp.headers["X-Accel-Buffering"] == "no"
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    raw = await resp.text()
    assert "event:" not in raw
    chunks = chat_chunks(raw)
    assert {c["id"] for c in chunks} == {chunks[0]["id"]}
    assert {c["created"] for c in chunks} == {chunks[0]["created"]}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert streamed_text(chunks) == "Streaming works fine."
    finish = chunks[-2]
    assert finish["choices"][0]["delta"] == {} and finish["choices"][0]["finish_reason"] == "stop"
    usage = chunks[-1]
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert "timings" not in usage


async def test_stream_without_include_usage_sends_no_usage_chunk(client, upstream):
    resp = await client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "hi"}], "stream": True})
    chunks = chat_chunks(await resp.text())
    assert all(c["choices"] for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_sampling_fields_pass_upstream_and_model_is_cosmetic(client, upstream):
    await client.post("/v1/chat/completions", json={
        "model": "gpt-cosmetic", "messages": [{"role": "user", "content": "hi"}],
        "temperature": 1, "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0, "max_tokens": 50,
        "stop": ["\n\n"], "seed": 7, "user": "librechat-user-1"})
    sent = upstream.requests[-1]
    assert sent["model"] == "fake-model"
    for field, value in {"temperature": 1, "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0,
                         "max_tokens": 50, "stop": ["\n\n"], "seed": 7, "user": "librechat-user-1"}.items():
        assert sent[field] == value


async def test_open_webui_user_object_is_not_forwarded(client, upstream):
    resp = await client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "hi"}], "user": {"id": "u1", "name": "Ann"}})
    assert resp.status == 200
    assert "user" not in upstream.requests[-1]


async def test_agent_system_prompt_comes_first_and_client_system_joins_it_in_one_message(client, upstream):
    await client.post("/v1/chat/completions", json={"messages": [
        {"role": "system", "content": "Answer in French."},
        {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Salut."},
        {"role": "system", "content": "Now in German."},
        {"role": "user", "content": "again"}]})
    messages = upstream.requests[-1]["messages"]
    # one leading system message (Gemma's, Mistral's and Qwen's templates refuse any other):
    # the gateway's prompt first, then the client's system/developer texts in their order
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    prompt, *client_parts = messages[0]["content"].split("\n\n")
    assert "web" in prompt and prompt.startswith("You are a helpful assistant")
    assert client_parts[-3:] == ["Answer in French.", "Be brief.", "Now in German."]
    assert messages[1:] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Salut."},
                            {"role": "user", "content": "again"}]


async def test_agent_system_prompt_states_todays_utc_date(client, upstream):
    for _ in range(2):  # the second request gets the prompt built for the first
        before = time.strftime("%A, %d %B %Y", time.gmtime())
        await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        after = time.strftime("%A, %d %B %Y", time.gmtime())
        prompt = upstream.requests[-1]["messages"][0]["content"]
        assert f"Today is {before} (UTC)" in prompt or f"Today is {after} (UTC)" in prompt


async def test_content_parts_are_accepted_and_forwarded(client, upstream):
    parts = [{"type": "text", "text": "What is this?"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": parts}]})
    assert resp.status == 200
    assert upstream.requests[-1]["messages"][-1]["content"] == parts


async def test_upstream_model_defaults_to_first_listed(make_client, upstream):
    client = await make_client(llm_model=None)
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert resp.status == 200
    assert upstream.requests[-1]["model"] == "fake-model"


async def test_long_text_is_split_so_no_sse_line_exceeds_64k(client, upstream):
    upstream.queue(text("x" * 200_000, chunk_size=200_000))
    resp = await client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "hi"}], "stream": True})
    raw = await resp.text()
    assert max(len(line.encode()) for line in raw.split("\n")) < 64 * 1024
    assert streamed_text(chat_chunks(raw)) == "x" * 200_000
