"""Regression tests for what the schemathesis fuzzing found, each as a plain request."""

from __future__ import annotations

import pytest

from tests.support.helpers import assert_error_envelope


@pytest.mark.parametrize("bad_type", [{}, [], None, 7])
async def test_a_content_part_whose_type_is_not_a_string_is_a_400_not_a_500(client, bad_type):
    body = {"messages": [{"role": "tool", "content": [{"type": bad_type}], "tool_call_id": ""}]}
    resp = await client.post("/v1/chat/completions", json=body)
    assert resp.status == 400
    assert_error_envelope(await resp.json(), param="messages[0].content[0]")


@pytest.mark.parametrize("bad_role", [{}, ["user"], 1])
async def test_a_role_that_is_not_a_string_is_a_400_not_a_500(client, bad_role):
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": bad_role, "content": "hi"}]})
    assert resp.status == 400
    assert_error_envelope(await resp.json(), param="messages[0].role")
