"""Sources as url_citation annotations, end to end: the fake model searches (fake SearXNG) or reads
a page (loopback page server), then cites; both APIs, streamed and whole."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from gateway.config.settings import Settings
from gateway.http.app import create_app
from tests.fakes.pages import PageServer, page_server  # noqa: F401
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.support.helpers import chat_chunks, sse_frames, streamed_text

USER = [{"role": "user", "content": "What do otters eat?"}]
ANSWER = ("Otters eat fish 🐟 [Result 1](https://example.org/1), see also https://Example.org/2/. "
          "Not a hit: [x](https://example.org/99).")


@pytest.fixture
async def web_client(aiohttp_client: Any, make_settings: Callable[..., Settings],
                     searxng_server: FakeSearxng) -> Any:  # noqa: F811
    settings = make_settings(env={"SEARXNG_URL": searxng_server.base_url}, allow_private_urls=True)
    return await aiohttp_client(create_app(settings))


def search_then_answer(upstream: FakeUpstream, answer: str = ANSWER) -> None:
    upstream.queue(tool_call(("web_search", {"query": "otter diet", "limit": 2})), text(answer))


def expected_spans(content: str) -> list[tuple[str, str, str]]:
    return [("[Result 1](https://example.org/1)", "https://example.org/1", "Result 1 for otter diet"),
            ("https://Example.org/2/", "https://Example.org/2/", "Result 2 for otter diet")]


def spans(content: str, annotations: list[dict[str, Any]], nested: bool) -> list[tuple[str, str, str]]:
    out = []
    for annotation in annotations:
        assert annotation["type"] == "url_citation"
        body = annotation["url_citation"] if nested else annotation
        out.append((content[body["start_index"]:body["end_index"]], body["url"], body["title"]))
    return out


async def test_chat_whole_reply_has_message_annotations_for_links_the_search_returned(web_client, upstream):
    search_then_answer(upstream)
    body = await (await web_client.post("/v1/chat/completions", json={"messages": USER})).json()
    message = body["choices"][0]["message"]
    assert message["content"] == ANSWER
    assert spans(message["content"], message["annotations"], nested=True) == expected_spans(ANSWER)


async def test_chat_stream_puts_annotations_on_the_finish_chunk_with_spans_in_the_streamed_text(
        web_client, upstream):
    search_then_answer(upstream)
    chunks = chat_chunks(await (await web_client.post(
        "/v1/chat/completions", json={"messages": USER, "stream": True})).text())
    content = streamed_text(chunks)
    assert content.startswith("`🔍 otter diet`\n\n")  # the inline marker counts in the offsets
    [finish] = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert spans(content, finish["choices"][0]["delta"]["annotations"], nested=True) == expected_spans(content)
    assert not any("annotations" in c["choices"][0]["delta"] for c in chunks if c["choices"] and c is not finish)


async def test_chat_stream_spans_hold_with_text_before_the_tool_round_and_progress_off(make_client, upstream,
                                                                                       searxng_server):  # noqa: F811
    client = await make_client(env={"SEARXNG_URL": searxng_server.base_url}, tool_progress="off")
    upstream.queue(tool_call(("web_search", {"query": "otter diet"}), text="Let me look. "), text(ANSWER))
    chunks = chat_chunks(await (await client.post(
        "/v1/chat/completions", json={"messages": USER, "stream": True})).text())
    content = streamed_text(chunks)
    assert content == "Let me look. " + ANSWER
    assert spans(content, chunks[-1]["choices"][0]["delta"]["annotations"], nested=True) == expected_spans(content)


async def test_responses_whole_reply_has_flat_annotations_on_the_output_text(web_client, upstream):
    search_then_answer(upstream)
    body = await (await web_client.post("/v1/responses", json={"input": "What do otters eat?"})).json()
    [part] = body["output"][-1]["content"]
    assert spans(part["text"], part["annotations"], nested=False) == expected_spans(ANSWER)
    stored = await (await web_client.get(f"/v1/responses/{body['id']}")).json()
    assert stored["output"][-1]["content"][0]["annotations"] == part["annotations"]


async def test_responses_stream_announces_each_annotation_before_output_text_done(web_client, upstream):
    search_then_answer(upstream)
    body = await (await web_client.post("/v1/responses", json={"input": "otters?", "stream": True})).text()
    events = [json.loads(data) for _, data in sse_frames(body)]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    added = [e for e in events if e["type"] == "response.output_text.annotation.added"]
    assert [e["annotation_index"] for e in added] == [0, 1]
    done = kinds.index("response.output_text.done")
    assert all(kinds.index("response.output_text.annotation.added") + i < done for i in range(2))
    message_index = events[done]["output_index"]
    assert all((e["output_index"], e["content_index"], e["item_id"]) == (message_index, 0, events[done]["item_id"])
               for e in added)
    final_part = events[-1]["response"]["output"][-1]["content"][0]
    assert final_part["annotations"] == [e["annotation"] for e in added]
    assert spans(final_part["text"], final_part["annotations"], nested=False) == expected_spans(ANSWER)


async def test_a_page_read_with_web_extract_is_cited_with_its_title(web_client, upstream,
                                                                   page_server: PageServer):  # noqa: F811
    url = page_server.url + "/article"
    upstream.queue(tool_call(("web_extract", {"urls": [url]})), text(f"River otters eat crayfish ({url})."))
    body = await (await web_client.post("/v1/chat/completions", json={"messages": USER})).json()
    message = body["choices"][0]["message"]
    [annotation] = message["annotations"]
    citation = annotation["url_citation"]
    assert message["content"][citation["start_index"]:citation["end_index"]] == url
    assert "otters" in citation["title"].lower()


@pytest.mark.parametrize("stream", [False, True])
async def test_no_tool_or_no_matching_link_gives_no_annotations(web_client, upstream, stream):
    upstream.queue(text("See [x](https://example.org/1)."),
                   tool_call(("web_search", {"query": "otters"})), text("No links at all."))
    for _ in range(2):
        resp = await web_client.post("/v1/chat/completions", json={"messages": USER, "stream": stream})
        if stream:
            chunks = chat_chunks(await resp.text())
            assert not any("annotations" in c["choices"][0]["delta"] for c in chunks if c["choices"])
        else:
            assert (await resp.json())["choices"][0]["message"]["annotations"] == []
    upstream.queue(tool_call(("web_search", {"query": "otters"})), text("No links at all."))
    body = await (await web_client.post("/v1/responses", json={"input": "otters?"})).json()
    assert body["output"][-1]["content"][0]["annotations"] == []


@pytest.mark.parametrize("stream", [False, True])
async def test_numbered_citations_are_url_citations_over_their_brackets_in_responses(web_client, upstream, stream):
    search_then_answer(upstream, "Fish [1] and crabs [2][9].")
    resp = await web_client.post("/v1/responses", json={"input": "What do otters eat?", "stream": stream})
    if stream:
        events = [json.loads(data) for _, data in sse_frames(await resp.text())]
        body = next(e for e in events if e["type"] == "response.completed")["response"]
        assert sum(e["type"] == "response.output_text.annotation.added" for e in events) == 2
    else:
        body = await resp.json()
    part = body["output"][-1]["content"][0]
    found = [(part["text"][a["start_index"]:a["end_index"]], a["url"]) for a in part["annotations"]]
    assert found == [("[1]", "https://example.org/1"), ("[2]", "https://example.org/2")]
