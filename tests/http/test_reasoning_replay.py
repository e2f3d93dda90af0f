"""Reasoning a `store: false` client replays reaches the upstream within the open turn (issue 48,
item 7), as the gateway's own tool loop gives it back; `include: ["reasoning.encrypted_content"]`
hands out a sealed copy the gateway reads back, which a client can neither read nor forge, and
which another deployment's key does not open (a value that does not open is ignored)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.upstream import text, tool_call
from tests.support.helpers import sse_frames

SHELL = {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {
    "command": {"type": "string"}}}}
ASK = {"role": "user", "content": [{"type": "input_text", "text": "List the files."}]}
THOUGHT = "I should run ls."
ENCRYPTED = "reasoning.encrypted_content"


def replay(reasoning: dict[str, Any], output: str = "a.txt") -> list[dict[str, Any]]:
    return [ASK, {"type": "reasoning", **reasoning},
            {"type": "function_call", "name": "shell", "arguments": '{"command": "ls"}', "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": output}]


def upstream_assistant(upstream: Any) -> dict[str, Any]:
    [assistant] = [m for m in upstream.requests[-1]["messages"] if m["role"] == "assistant"]
    return assistant


async def first_turn(client: Any, upstream: Any, *, field: str = "reasoning_content",
                     stream: bool = False) -> dict[str, Any]:
    """A store: false turn asking for encrypted reasoning, ended by the client's call; its reasoning item."""
    upstream.queue(tool_call(("shell", {"command": "ls"}), reasoning=THOUGHT, reasoning_field=field))
    resp = await client.post("/v1/responses", json={"input": [ASK], "tools": [SHELL], "store": False,
                                                    "include": [ENCRYPTED], "stream": stream,
                                                    "reasoning": {"summary": "auto"}})
    assert resp.status == 200
    if stream:
        events = [json.loads(data) for _, data in sse_frames(await resp.text())]
        [done] = [e["item"] for e in events if e["type"] == "response.output_item.done"
                  and e["item"]["type"] == "reasoning"]
        assert events[-1]["response"]["output"][0] == done
        return done
    return (await resp.json())["output"][0]


@pytest.mark.parametrize("reasoning", [
    {"summary": [], "content": [{"type": "reasoning_text", "text": THOUGHT}]},
    {"summary": [{"type": "summary_text", "text": THOUGHT}]},  # Codex keeps the summary, not the content
])
async def test_a_replayed_reasoning_item_reaches_the_upstream_on_the_open_turns_call(client, upstream, reasoning):
    upstream.queue(text("a.txt is there."))
    resp = await client.post("/v1/responses", json={"input": replay(reasoning), "tools": [SHELL], "store": False})
    assert resp.status == 200
    assistant = upstream_assistant(upstream)
    assert assistant["tool_calls"][0]["id"] == "c1"
    assert assistant["reasoning_content"] == THOUGHT


async def test_reasoning_of_an_earlier_turn_still_does_not_go_upstream(client, upstream):
    upstream.queue(text("Done."))
    items = [*replay({"summary": [{"type": "summary_text", "text": THOUGHT}]}),
             {"role": "assistant", "content": "a.txt is there."}, {"role": "user", "content": "Thanks."}]
    resp = await client.post("/v1/responses", json={"input": items, "tools": [SHELL], "store": False})
    assert resp.status == 200
    assert THOUGHT not in json.dumps(upstream.requests[-1]["messages"])


@pytest.mark.parametrize("stream", [False, True])
async def test_encrypted_content_is_opaque_and_read_back_under_the_upstreams_own_field(client, upstream, stream):
    item = await first_turn(client, upstream, field="reasoning", stream=stream)
    sealed = item["encrypted_content"]
    assert isinstance(sealed, str) and sealed.startswith("agw1.")
    assert THOUGHT not in sealed and "ls" not in sealed
    # replayed as Codex CLI replays it: summary and encrypted_content, no id, no content
    upstream.queue(text("a.txt is there."))
    resp = await client.post("/v1/responses", json={"input": replay(
        {"summary": [], "encrypted_content": sealed}), "tools": [SHELL], "store": False})
    assert resp.status == 200
    assistant = upstream_assistant(upstream)
    assert assistant["reasoning"] == THOUGHT and "reasoning_content" not in assistant


async def test_encrypted_content_comes_only_when_included(client, upstream):
    upstream.queue(text("42.", reasoning=THOUGHT))
    body = await (await client.post("/v1/responses", json={"input": "6*7?", "store": False})).json()
    assert "encrypted_content" not in body["output"][0]


@pytest.mark.parametrize("tamper", [
    lambda sealed: sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB"),  # changed
    lambda sealed: "agw1.bm90IG91cnM",  # forged
    lambda sealed: "gAAAAABpZ2FyYmFnZQ==",  # another service's
])
async def test_a_replayed_value_that_does_not_open_is_ignored_and_the_turn_goes_on(client, upstream, tamper):
    item = await first_turn(client, upstream)
    upstream.queue(text("a.txt is there."))
    resp = await client.post("/v1/responses", json={"input": replay(
        {"summary": [], "encrypted_content": tamper(item["encrypted_content"])}), "tools": [SHELL], "store": False})
    assert resp.status == 200
    assert (await resp.json())["output"][0]["content"][0]["text"] == "a.txt is there."
    assistant = upstream_assistant(upstream)
    assert not any(key.startswith("reasoning") for key in assistant)


async def test_another_deployments_value_does_not_open(make_client, upstream, tmp_path: Path):
    ours = await make_client()
    theirs = await make_client(home=tmp_path / "elsewhere")
    item = await first_turn(theirs, upstream)
    upstream.queue(text("a.txt is there."))
    resp = await ours.post("/v1/responses", json={"input": replay(
        {"summary": [], "encrypted_content": item["encrypted_content"]}), "tools": [SHELL], "store": False})
    assert resp.status == 200
    assert not any(key.startswith("reasoning") for key in upstream_assistant(upstream))


async def test_replicas_given_one_seal_key_open_each_others_values(make_client, upstream, tmp_path: Path):
    secret = "a shared secret of this deployment's replicas"
    one = await make_client(seal_key=secret, home=tmp_path / "one")
    two = await make_client(seal_key=secret, home=tmp_path / "two")
    item = await first_turn(one, upstream)
    upstream.queue(text("a.txt is there."))
    resp = await two.post("/v1/responses", json={"input": replay(
        {"summary": [], "encrypted_content": item["encrypted_content"]}), "tools": [SHELL], "store": False})
    assert resp.status == 200
    assert upstream_assistant(upstream)["reasoning_content"] == THOUGHT
    assert not (tmp_path / "one" / "seal.key").exists()  # the setting's key, no file


async def test_without_a_seal_key_setting_the_key_is_a_0600_file_in_the_profile_home_kept_over_restarts(
        make_client, upstream, settings):
    first = await make_client()
    item = await first_turn(first, upstream)
    key_file = settings.profile_dir / "seal.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_bytes()
    again = await make_client()  # a restart: the same file, so the values handed out still open
    assert key_file.read_bytes() == key
    upstream.queue(text("a.txt is there."))
    await again.post("/v1/responses", json={"input": replay(
        {"summary": [], "encrypted_content": item["encrypted_content"]}), "tools": [SHELL], "store": False})
    assert upstream_assistant(upstream)["reasoning_content"] == THOUGHT
