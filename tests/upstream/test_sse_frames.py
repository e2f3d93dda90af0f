"""Upstream stream frames: the orjson fast lane reads exactly what the stdlib path reads, or steps aside."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.upstream.deltas import Text, deltas_of
from gateway.upstream.shapes import well_formed as _well_formed
from gateway.upstream.sse_frames import (
    UsualFrames,
    is_done,
    is_text_delta,
    load_stdlib,
    load_text_delta,
    usual_text,
)
from tests.fakes.upstream import Reply
from tests.support.helpers import chat_chunks, streamed_text

orjson = pytest.importorskip("orjson")

TRICKY = ['tok0 ', 'quote " backslash \\ slash /', 'new\nline\ttab \x00 nul \x1f \x7f', 'é ü 中文 😀 \u2028 \u2029',
          '</script>', '']


def frame(content: Any, **extra: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1700000000, "model": "m",
            "choices": [{"index": 0, "delta": {"content": content}, "logprobs": None, "finish_reason": None}],
            **extra}


def read_by_agent(chunk: dict[str, Any]) -> Any:
    """The fields the agent reads from a chunk."""
    return (chunk.get("usage"), [(c.get("delta", {}).get("content"), c.get("delta", {}).get("tool_calls"),
                                  c.get("finish_reason")) for c in chunk["choices"]])


@pytest.mark.parametrize("text", TRICKY)
@pytest.mark.parametrize("ensure_ascii", [True, False], ids=["escaped", "raw-utf8"])
def test_text_deltas_read_the_same_with_orjson_and_stdlib(text, ensure_ascii):
    payload = b" " + json.dumps(frame(text), ensure_ascii=ensure_ascii).encode() + b"\r"
    fast = load_text_delta(payload, fast=orjson.loads)
    assert fast is not None
    assert fast == load_stdlib(payload) == frame(text)
    assert _well_formed(fast, "delta")


@pytest.mark.parametrize("payload", [
    b'{"choices":[{"delta":{"content":"a\\ud800b"}}]}',  # lone surrogate escape: orjson refuses it
    b'{"choices":[{"delta":{"content":"\\udc00"}}]}',
    b'{"choices":[{"delta":{"content":"bad \xff utf-8"}}]}',  # stdlib reads it leniently (U+FFFD)
    b'{"choices":[{"delta":{"content":"x"}}],"created":NaN}',
    b'{"choices":[{"delta":{"content":"x"}}]}\x0c',
], ids=["lone-high-surrogate", "lone-low-surrogate", "invalid-utf8", "nan", "form-feed"])
def test_frames_orjson_refuses_go_the_stdlib_way(payload):
    assert load_text_delta(payload, fast=orjson.loads) is None
    assert isinstance(load_stdlib(payload), dict)


def test_lone_surrogates_become_replacement_characters_on_the_stdlib_path():
    # they could not be encoded again downstream (SSE frames, the store): see providers/json_in.py
    assert load_stdlib(b'{"choices":[{"delta":{"content":"a\\ud800b"}}]}')["choices"][0]["delta"]["content"] \
        == "a\ufffdb"


@pytest.mark.parametrize("chunk", [
    frame("x", usage={"prompt_tokens": 1, "completion_tokens": 2}),
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]},
    {"error": {"message": "boom"}},
    {"choices": "x"}, {"choices": [1]}, {"choices": [{"delta": "x"}]}, {"choices": [{"delta": None}]},
    {"choices": [{"delta": {"content": 5}}]}, {"choices": [{"delta": {}, "finish_reason": 1}]},
    [1, 2],
], ids=["usage", "tool-calls", "error", "choices-str", "choice-int", "delta-str", "delta-null", "content-int",
        "finish-int", "array"])
def test_anything_but_a_plain_text_delta_leaves_the_fast_lane(chunk):
    assert not is_text_delta(chunk)
    assert load_text_delta(json.dumps(chunk).encode(), fast=orjson.loads) is None


@pytest.mark.parametrize("chunk", [
    frame("x"), frame(""), frame(None), {"choices": [{"delta": {}}]}, {"choices": [{"delta": {"role": "assistant"}}]},
    {"choices": [{"delta": {"content": "x"}, "finish_reason": "stop"}]},
    {"choices": [{"delta": {"content": "a", "reasoning_content": "think"}}]},
    {"choices": [{"delta": {"reasoning": "think"}}]}, {"choices": [{"delta": {"reasoning_text": "think"}}]},
    {"choices": [{"delta": {"content": "a"}}, {"delta": {"content": "b"}}]}, {"choices": []},
    frame("x", usage={"prompt_tokens": 1, "completion_tokens": 2}),
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]},
    {"error": {"message": "boom"}}, {"choices": [{"delta": {"content": 5}}]}, {"choices": [{"delta": None}]}, [1, 2],
], ids=["text", "empty", "null", "no-content", "role", "finish", "reasoning-content", "reasoning", "reasoning-text",
        "two-choices", "no-choices", "usage", "tool-calls", "error", "content-int", "delta-null", "array"])
def test_the_usual_frames_text_is_what_the_deltas_hold(chunk):
    # the fast lane's one-pass read gives the agent what the full reading (deltas_of) would, or steps aside
    text = usual_text(chunk)
    if text is not None:
        assert is_text_delta(chunk)
        assert deltas_of(chunk, "delta") == ([Text(text)] if text else [])


def test_integers_past_64_bits_never_reach_the_agent_as_floats():
    # orjson reads 10**30 as a float; a text delta holds no number the agent reads, and a usage
    # chunk (whose numbers it does read) always goes the stdlib way.
    big = frame("hi", created=10**30)
    fast = load_text_delta(json.dumps(big).encode(), fast=orjson.loads)
    assert fast is not None and read_by_agent(fast) == read_by_agent(big)
    usage = frame("", usage={"prompt_tokens": 10**30, "completion_tokens": 1})
    assert load_text_delta(json.dumps(usage).encode(), fast=orjson.loads) is None
    assert load_stdlib(json.dumps(usage).encode())["usage"]["prompt_tokens"] == 10**30


def test_finish_chunk_is_a_plain_delta():
    chunk = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    assert load_text_delta(json.dumps(chunk).encode(), fast=orjson.loads) == chunk


def test_done_is_recognised_with_or_without_spaces():
    assert is_done(b" [DONE]") and is_done(b"[DONE]\r") and not is_done(b' "[DONE]"') and not is_done(b"{}")


def test_without_orjson_every_frame_goes_the_stdlib_way():
    assert load_text_delta(json.dumps(frame("x")).encode(), fast=None) is None


async def test_tricky_text_streams_through_the_gateway_unchanged(client, upstream):
    tricky = "".join(TRICKY)
    upstream.queue(Reply(text=tricky, chunk_size=3))
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                           "stream": True})
    assert resp.status == 200
    assert streamed_text(chat_chunks(await resp.text())) == tricky


def _parsed_text(payload: bytes) -> str | None:
    """What the parse (orjson, then `usual_text`) reads from a frame."""
    try:
        return usual_text(orjson.loads(payload))
    except ValueError:
        return None


def _learnt(payload: bytes) -> UsualFrames:
    usual = UsualFrames()
    text = _parsed_text(payload)
    assert text
    usual.learn(payload, text)
    return usual


LEARNT = b" " + json.dumps(frame("tok0 "), ensure_ascii=False).encode() + b"\r"


@pytest.mark.parametrize("text", [*TRICKY, "tok1 ", "x" * 5000, "a\u00e9b", '", "finish_reason": "stop'])
@pytest.mark.parametrize("ensure_ascii", [True, False], ids=["escaped", "raw-utf8"])
def test_a_frame_told_by_its_bytes_reads_what_the_parse_reads_or_steps_aside(text, ensure_ascii):
    usual = _learnt(LEARNT)
    payload = b" " + json.dumps(frame(text), ensure_ascii=ensure_ascii).encode() + b"\r"
    told = usual.text(payload)
    assert told is None or told == _parsed_text(payload) == text
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        assert told == text  # the usual frame: no parse


@pytest.mark.parametrize("payload", [
    b" " + json.dumps(frame("x", usage={"prompt_tokens": 1})).encode() + b"\r",  # more after the text
    b" " + json.dumps(frame("x", created=1700000001)).encode() + b"\r",  # another document around it
    b" " + json.dumps(frame("x")).encode(),  # no CR: not the same bytes
    b" " + json.dumps(frame("x")).encode().replace(b'"finish_reason": null', b'"finish_reason": "stop"') + b"\r",
    LEARNT.replace(b"tok0 ", b"\xff\xfe"),  # not UTF-8: the parse decides (it refuses it)
    LEARNT.replace(b"tok0 ", b"a\x01b"),  # a control character, which JSON refuses raw
    b"[DONE]", b"", b" {}",
], ids=["usage", "created", "no-cr", "finish", "bad-utf8", "control", "done", "empty", "object"])
def test_a_frame_that_is_not_the_learnt_one_with_another_text_takes_the_parse(payload):
    assert _learnt(LEARNT).text(payload) is None


@pytest.mark.parametrize("chunk", [
    frame("has\nescape"),  # the text's bytes hold an escape: its end is not plain to find
    {**frame("x"), "model": "m\u00e9"},  # an escape around the text (the key could be spelled so)
    {**frame("x"), "choices": [{"index": 0, "delta": {"content": "x"},
                                "logprobs": {"content": None}, "finish_reason": None}]},  # two "content" keys
], ids=["escaped-text", "escape-around", "two-content-keys"])
def test_no_template_is_learnt_from_a_frame_whose_bytes_do_not_show_the_text_plainly(chunk):
    payload = json.dumps(chunk).encode()
    usual = _learnt(payload)
    assert usual.text(payload) is None
    assert usual.text(json.dumps(frame("plain")).encode()) is None


def test_a_stream_whose_frames_keep_changing_stops_learning():
    usual = UsualFrames()
    for n in range(20):  # each frame another document (llama.cpp's timings, OpenAI's obfuscation)
        payload = json.dumps(frame(f"t{n}", timings={"n": n})).encode()
        assert usual.text(payload) is None
        usual.learn(payload, f"t{n}")
    # learnt from the first frames only: a later one is still told from its first template's bytes
    assert usual.text(json.dumps(frame("again", timings={"n": 7})).encode()) == "again"
    assert usual.text(json.dumps(frame("again", timings={"n": 8})).encode()) is None


def test_frames_that_change_now_and_then_are_learnt_afresh_each_time():
    usual = UsualFrames()
    for second in range(20):  # a server whose `created` is the second each frame was sent in
        first = json.dumps(frame("a", created=second)).encode()
        assert usual.text(first) is None
        usual.learn(first, "a")
        assert usual.text(json.dumps(frame("b", created=second)).encode()) == "b"


async def test_a_long_stream_of_usual_frames_reaches_the_client_unchanged(client, upstream):
    words = "".join(f"w{n} " for n in range(300)) + "é \\ \" q\n" + "tail"
    upstream.queue(Reply(text=words, chunk_size=4))
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                           "stream": True})
    assert streamed_text(chat_chunks(await resp.text())) == words
