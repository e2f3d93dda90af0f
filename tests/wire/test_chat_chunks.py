"""Chat chunk encoding: text deltas leave as OpenAI's chunk objects, whatever characters they hold."""

from __future__ import annotations

import json

import pytest

from gateway.agent.events import Finished, TextDelta
from gateway.wire.chat_stream import ChatChunkEncoder

TRICKY = ['tok0 ', 'quote " backslash \\ slash /', 'new\nline\ttab \x00 nul', 'é ü 中文 😀 \u2028', '</script>']


@pytest.mark.parametrize("text", TRICKY)
def test_text_delta_chunk_carries_the_text_exactly(text):
    encoder = ChatChunkEncoder("bench-model", include_usage=False, progress="inline")
    [frame] = encoder.encode(TextDelta(text))
    chunk = json.loads(frame)
    assert chunk == {
        "id": encoder.id, "object": "chat.completion.chunk", "created": encoder.created, "model": "bench-model",
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}],
    }
    assert "\n" not in frame  # one SSE data line per chunk


def test_text_chunks_and_finish_chunk_share_one_layout():
    encoder = ChatChunkEncoder('odd "model"', include_usage=False, progress="inline")
    [text] = encoder.encode(TextDelta("hi"))
    [finish] = encoder.encode(Finished("stop"))
    assert list(json.loads(text)) == list(json.loads(finish))
    assert json.loads(text)["model"] == 'odd "model"'


@pytest.mark.parametrize("text", [*TRICKY, "ctl \x01\x1f\x7f \u2029", "lone \ud800 surrogate", ""])
def test_text_delta_chunk_is_byte_identical_to_a_compact_json_dump(text):
    encoder = ChatChunkEncoder("m", include_usage=False, progress="inline")
    [frame] = encoder.encode(TextDelta(text)) or [None]
    if not text:
        assert frame is None  # an empty delta sends nothing
        return
    expected = {"id": encoder.id, "object": "chat.completion.chunk", "created": encoder.created, "model": "m",
                "system_fingerprint": None,
                "choices": [{"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}]}
    assert frame == json.dumps(expected, ensure_ascii=False, separators=(",", ":"))


def test_role_chunk_is_byte_identical_to_a_compact_json_dump():
    encoder = ChatChunkEncoder("m", include_usage=False, progress="inline")
    expected = {"id": encoder.id, "object": "chat.completion.chunk", "created": encoder.created, "model": "m",
                "system_fingerprint": None,
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                             "finish_reason": None}]}
    assert encoder.start() == json.dumps(expected, ensure_ascii=False, separators=(",", ":"))


def test_a_delta_longer_than_the_cut_is_split_into_several_chunks():
    encoder = ChatChunkEncoder("m", include_usage=False, progress="inline")
    text = "x" * 4096 + "y" * 10
    frames = encoder.encode(TextDelta(text))
    assert [json.loads(f)["choices"][0]["delta"]["content"] for f in frames] == ["x" * 4096, "y" * 10]


@pytest.mark.parametrize("reason", ["stop", "length", "tool_calls", "content_filter"])
def test_finish_chunk_is_byte_identical_to_a_compact_json_dump(reason):
    encoder = ChatChunkEncoder("m", include_usage=False, progress="inline")
    [frame] = encoder.encode(Finished(reason))
    expected = {"id": encoder.id, "object": "chat.completion.chunk", "created": encoder.created, "model": "m",
                "system_fingerprint": None,
                "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}]}
    assert frame == json.dumps(expected, ensure_ascii=False, separators=(",", ":"))
