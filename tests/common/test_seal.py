"""Sealed values (gateway/common/seal.py): they open only intact, under the key, purpose and
profile they were sealed for; anything else opens to None, never an exception."""

from __future__ import annotations

import os

import pytest

from gateway.common.seal import Sealer

KEY = os.urandom(32)


def test_a_sealed_value_opens_to_what_was_sealed_and_does_not_show_it():
    sealer = Sealer(KEY, "reasoning", "work")
    sealed = sealer.seal({"text": "secret thought", "field": "reasoning"})
    assert "secret" not in sealed and sealed.startswith("agw1.")
    assert sealer.open(sealed) == {"text": "secret thought", "field": "reasoning"}
    assert sealer.seal({"text": "x"}) != sealer.seal({"text": "x"})  # a fresh nonce each time


@pytest.mark.parametrize("other", [
    Sealer(os.urandom(32), "reasoning", "work"),  # another key
    Sealer(KEY, "reasoning", "home"),  # another profile
    Sealer(KEY, "other purpose", "work"),
])
def test_a_value_sealed_for_another_key_profile_or_purpose_does_not_open(other):
    assert other.open(Sealer(KEY, "reasoning", "work").seal({"text": "t"})) is None


@pytest.mark.parametrize("token", [None, 7, "", "agw1.", "agw1.!!!", "agw1.AAAA", "plain text", "agw1." + "A" * 80])
def test_anything_else_opens_to_none(token):
    assert Sealer(KEY, "reasoning", "work").open(token) is None


def test_a_changed_value_does_not_open():
    sealer = Sealer(KEY, "reasoning", "work")
    sealed = sealer.seal({"text": "t"})
    flipped = sealed[:10] + ("B" if sealed[10] != "B" else "C") + sealed[11:]
    assert sealer.open(flipped) is None
