"""The chat route's first look at an input's size (gateway/wire/context_budget.py): the one-encoding
bound must never say less than the per-message estimate it stands in for, or a turn over the
window would pass unchecked."""

from __future__ import annotations

import pytest

from gateway.wire import context_budget

INPUTS = [
    [{"role": "user", "content": "hi"}],
    [{"role": "system", "content": "Tu es concis. Réponds en français, s'il te plaît. ✨" * 40},
     {"role": "user", "content": "Quelle heure est-il à Zürich ?"}],
    [{"role": "user", "content": [{"type": "text", "text": "x" * 5000}]},
     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                            "function": {"name": "f", "arguments": "{}"}}]},
     {"role": "tool", "tool_call_id": "c1", "content": "12345678901234567890123 is past 64 bits"}],
    [{"role": "user", "content": "n"}, {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"id": {"type": "integer", "maximum": 123456789012345678901234}}}}}],
    [{"role": "user", "content": "\u00e9" * 3001}] * 3,
]


@pytest.mark.parametrize("fixed", INPUTS)
@pytest.mark.parametrize("max_output", [None, 0, 4096])
def test_the_one_encoding_bound_is_never_below_the_per_message_estimate(fixed, max_output):
    assert context_budget.fixed_tokens_at_most(fixed, max_output) >= context_budget.fixed_tokens(fixed, max_output)
