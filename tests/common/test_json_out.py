"""Whole JSON reply bodies: orjson (when installed) and the stdlib write the same JSON value."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.common.json_out import Encoded, dumps
from tests.fakes.upstream import text

orjson = pytest.importorskip("orjson")

TRICKY = ['quote " backslash \\ slash /', 'new\nline\ttab \x00 nul \x1f \x7f', 'é ü 中文 😀 \u2028 \u2029',
          '</script>', '']


@pytest.mark.parametrize("content", TRICKY)
def test_orjson_and_stdlib_bodies_read_back_the_same(content):
    value = {"id": "chatcmpl-x", "created": 1700000000, "choices": [{"message": {"content": content},
             "logprobs": None, "finish_reason": "stop"}], "usage": {"total_tokens": 2**63}, "ok": True}
    fast, slow = dumps(value, fast=orjson.dumps), dumps(value, fast=None)
    assert json.loads(fast) == json.loads(slow) == value


@pytest.mark.parametrize("value", [{"tokens": 2**64}, {"tokens": -(2**70)}, {1: "int key"}],
                         ids=["int-past-64-bits", "negative-int-past-64-bits", "int-key"])
def test_values_orjson_refuses_go_the_stdlib_way(value: dict[Any, Any]):
    assert dumps(value, fast=orjson.dumps) == json.dumps(value, ensure_ascii=False).encode()


def test_ascii_bodies_escape_a_lone_surrogate_instead_of_failing():
    assert dumps({"message": "a\ud800b"}, ensure_ascii=True) == b'{"message": "a\\ud800b"}'


async def test_huge_token_counts_reach_the_client_exactly(client, upstream):
    upstream.queue(text("Counted.", usage=(2**70, 1)))
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert resp.status == 200
    assert (await resp.json())["usage"] == {"prompt_tokens": 2**70, "completion_tokens": 1,
                                            "total_tokens": 2**70 + 1}


ENCODED_VALUE = [{"type": "function", "function": {"name": "lookup", "description": "é \u2028 😀",
                                                   "parameters": {"type": "object", "maximum": 10}}}]


@pytest.mark.parametrize("fast", [orjson.dumps, None], ids=["orjson", "stdlib"])
def test_an_encoded_part_is_written_as_its_value(fast):
    body = {"model": "m", "tools": Encoded(ENCODED_VALUE), "each": [Encoded(ENCODED_VALUE[0])]}
    assert json.loads(dumps(body, fast=fast)) == {"model": "m", "tools": ENCODED_VALUE, "each": ENCODED_VALUE}


def test_a_body_orjson_refuses_writes_its_encoded_part_the_stdlib_way():
    body = {"seed": 2**70, "tools": Encoded(ENCODED_VALUE)}
    assert dumps(body, ensure_ascii=True) == json.dumps({"seed": 2**70, "tools": ENCODED_VALUE}).encode()


def test_an_encoded_value_orjson_refuses_is_written_the_stdlib_way():
    refused = {"maximum": 2**70}
    assert json.loads(dumps({"tools": Encoded(refused)})) == {"tools": refused}


def test_other_objects_are_still_refused():
    with pytest.raises(TypeError):
        dumps({"x": object()})
