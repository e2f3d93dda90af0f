"""AGENT_TOOL_PROGRESS: inline markers, Open WebUI's own status events, or nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes.pages import PageServer, page_server  # noqa: F401
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.upstream import text, tool_call
from tests.support.helpers import sse_frames, streamed_text

USER = [{"role": "user", "content": "What do otters eat?"}]


def stream_frames(body: str) -> list[dict[str, Any]]:
    frames = sse_frames(body)
    assert frames[-1][1] == "[DONE]"
    assert all(name is None for name, _ in frames)  # no `event:` lines on chat streams
    return [json.loads(data) for _, data in frames[:-1]]


@pytest.fixture
async def owui_client(make_client, searxng_server: FakeSearxng) -> Any:  # noqa: F811
    return await make_client(env={"SEARXNG_URL": searxng_server.base_url}, allow_private_urls=True,
                             tool_progress="openwebui")


async def test_openwebui_mode_sends_search_status_events_and_no_markers(owui_client, upstream):
    upstream.queue(tool_call(("web_search", {"query": "otter diet", "limit": 2})), text("Mostly fish."))
    frames = stream_frames(await (await owui_client.post(
        "/v1/chat/completions", json={"messages": USER, "stream": True})).text())
    chunks = [f for f in frames if "choices" in f]
    assert streamed_text(chunks) == "Mostly fish."
    statuses = [f for f in frames if "event" in f and f["event"]["type"] == "status"]
    assert all(set(f) == {"event"} for f in frames if "event" in f)
    running, done = (f["event"]["data"] for f in statuses)
    assert running == {"action": "web_search", "description": 'Searching the web for "otter diet"',
                       "queries": ["otter diet"], "done": False}
    assert done == {
        "action": "web_search", "description": "Searched {{count}} sites", "queries": ["otter diet"],
        "urls": ["https://example.org/1", "https://example.org/2"],
        "items": [{"title": "Result 1 for otter diet", "link": "https://example.org/1", "url": "https://example.org/1"},
                  {"title": "Result 2 for otter diet", "link": "https://example.org/2", "url": "https://example.org/2"}],
        "done": True,
    }
    # the running status comes before the answer, the finished one too
    order = ["status" if "event" in f else "chunk" for f in frames]
    assert order.index("status") < len(order) - 2


async def test_openwebui_mode_says_reading_for_an_extract(owui_client, upstream,
                                                         page_server: PageServer):  # noqa: F811
    url = page_server.url + "/article"
    upstream.queue(tool_call(("web_extract", {"urls": [url]})), text("Crayfish."))
    frames = stream_frames(await (await owui_client.post(
        "/v1/chat/completions", json={"messages": USER, "stream": True})).text())
    running, done = (f["event"]["data"] for f in frames if "event" in f and f["event"]["type"] == "status")
    assert running == {"description": f"Reading {url}", "done": False}
    assert done == {"description": f"Read {url}", "urls": [url], "done": True}


async def test_openwebui_mode_marks_a_failed_search_as_an_error(make_client, upstream, searxng_server):  # noqa: F811
    searxng_server.json_enabled = False  # SearXNG answers 403: the search fails
    client = await make_client(env={"SEARXNG_URL": searxng_server.base_url}, tool_progress="openwebui")
    upstream.queue(tool_call(("web_search", {"query": "otters"})), text("Sorry."))
    frames = stream_frames(await (await client.post(
        "/v1/chat/completions", json={"messages": USER, "stream": True})).text())
    done = [f["event"]["data"] for f in frames if "event" in f][-1]
    assert (done["done"], done.get("error"), done["action"]) == (True, True, "web_search")


async def test_openwebui_mode_keeps_whole_replies_and_responses_plain(owui_client, upstream):
    upstream.queue(tool_call(("web_search", {"query": "otters"})), text("Fish."),
                   tool_call(("web_search", {"query": "otters"})), text("Fish."))
    whole = await (await owui_client.post("/v1/chat/completions", json={"messages": USER})).json()
    assert whole["choices"][0]["message"]["content"] == "Fish."
    body = await (await owui_client.post("/v1/responses", json={"input": "otters?", "stream": True})).text()
    assert all('"event"' not in data[:12] for _, data in sse_frames(body))


@pytest.mark.parametrize(("mode", "content"), [("inline", "`🔍 otters`\n\nFish."), ("off", "Fish.")])
async def test_inline_and_off_modes_send_only_openai_chunks(make_client, upstream, searxng_server,  # noqa: F811
                                                            mode, content):
    client = await make_client(env={"SEARXNG_URL": searxng_server.base_url}, tool_progress=mode)
    upstream.queue(tool_call(("web_search", {"query": "otters"})), text("Fish."))
    frames = stream_frames(await (await client.post(
        "/v1/chat/completions", json={"messages": USER, "stream": True})).text())
    assert all("choices" in f and "event" not in f for f in frames)
    assert streamed_text(frames) == content


def test_the_setting_takes_the_four_modes_and_refuses_others(tmp_path):
    from gateway.config.settings import SettingsError, load_settings

    assert load_settings(home=tmp_path, environ={}).tool_progress == "auto"
    assert load_settings(home=tmp_path, environ={}).client_web_tools == "drop"
    for mode in ("auto", "inline", "openwebui", "off"):
        assert load_settings(home=tmp_path, environ={"AGENT_TOOL_PROGRESS": mode}).tool_progress == mode
    with pytest.raises(SettingsError, match="AGENT_TOOL_PROGRESS"):
        load_settings(home=tmp_path, environ={"AGENT_TOOL_PROGRESS": "status"})
