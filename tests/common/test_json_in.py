"""json_in.loads reads every JSON text exactly as the stdlib does (plus the surrogate scrub),
whether or not orjson takes the fast path, and fails where the stdlib fails."""

from __future__ import annotations

import json
import math

import pytest

from gateway.common import json_in

SAME_AS_STDLIB = [
    b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.7}',
    b'{"max_tokens": 123456789012345678901234567890}',  # past 64 bits: stays an exact int
    b'{"seed": -9223372036854775809}',
    b'{"n": 18446744073709551615, "f": 1.0000000000000002, "e": 1e-7}',
    b'{"a": 1, "a": 2}',  # the last duplicate wins either way
    b'\xef\xbb\xbf{"bom": true}',
    '{"text": "caf\u00e9 \u2603 \\ud83d\\ude00"}'.encode(),
    b'{"nul": "\\u0000"}',
    b'[1, 2.5, null, true, "x"]',
    b'{"content": "' + b"long text 12 " * 2000 + b'", "seed": 99999999999999999999}',  # big int after text
    b'{"id": "12345678901234567890", "n": 1}',  # 20 digits inside a string: read the same either way
]


def stdlib(text: bytes) -> object:
    return json_in.scrub_surrogates(json.loads(text))


@pytest.mark.parametrize("text", SAME_AS_STDLIB)
def test_values_equal_the_stdlib_reading(text):
    got = json_in.loads(text)
    assert got == stdlib(text)
    assert json.dumps(got, sort_keys=True) == json.dumps(stdlib(text), sort_keys=True)  # int stays int


def test_nan_and_infinity_read_as_the_stdlib_reads_them():
    got = json_in.loads(b'{"a": NaN, "b": 1e400, "c": -Infinity}')
    assert math.isnan(got["a"]) and got["b"] == math.inf and got["c"] == -math.inf


def test_lone_surrogates_are_replaced_and_pairs_kept():
    assert json_in.loads(b'{"a": "x\\ud800y", "b": "\\ud83d\\ude00"}') == {"a": "x\ufffdy", "b": "\U0001f600"}


@pytest.mark.parametrize("text", [b"[1, 2", b'{"a": "\xff"}', b"", b"{'a': 1}"])
def test_what_the_stdlib_refuses_is_refused_with_its_error(text):
    with pytest.raises(ValueError) as expected:
        json.loads(text)
    with pytest.raises(type(expected.value)):
        json_in.loads(text)


@pytest.mark.parametrize(("text", "long"), [
    (b"1234567890123456789", True),  # 19 digits
    (b'{"n": -12345678901234567890}', True),
    (b"123456789012345678", False),  # 18
    (b"123456789.0123456789", False),  # 9 + 10 digits, split by a point
    (b"1" * 18 + b"x" + b"2" * 18, False),
    (b"", False),
])
def test_long_integer_runs_are_found_exactly(text, long):
    assert json_in.has_long_integer(text) is long
