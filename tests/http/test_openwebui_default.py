"""Open WebUI without configuration: recognised by its requests, shown its own status line, sources
and reasoning blocks; its housekeeping apart from its document chats; its own web tools left out.

The requests are the shapes Open WebUI 0.12.4 sends (recorded in a real browser, issue 30, and read
in its source: backend/open_webui/utils/session_pool.py, utils/headers.py, routers/tasks.py,
config.py's templates); what is asserted on the replies is what its stream handler
(backend/open_webui/utils/middleware.py) and source list (Citations.svelte) read.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.upstream import text, tool_call
from tests.support.helpers import sse_frames, streamed_text

#: What Open WebUI's shared aiohttp session says (no User-Agent of its own).
OWUI_HEADERS = {"User-Agent": "Python/3.11 aiohttp/3.12.15", "Content-Type": "application/json"}
SDK_HEADERS = {"User-Agent": "OpenAI/Python 1.109.1", "X-Stainless-Lang": "python"}


def owui_tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": name,
                                             "parameters": {"type": "object", "properties": {}}}}


#: A few of the ~36 built-in tools a chat from the page offers (backend/open_webui/tools/builtin.py).
OWUI_TOOLS = [owui_tool(n) for n in ("get_current_timestamp", "calculate_timestamp", "search_web", "fetch_url",
                                     "search_memories", "search_notes", "ask_user")]
ASK = {"stream": True, "model": "agent-gateway",
       "messages": [{"role": "user", "content": "What do otters eat?"}], "tools": OWUI_TOOLS}

RAG_PROMPT = (
    "### Task:\nRespond to the user query using the provided context, incorporating inline citations in the "
    "format [id] **only when the <source> tag includes an explicit id attribute** (e.g., <source id=\"1\">).\n\n"
    "### Guidelines:\n- If you don't know the answer, clearly state that.\n\n<context>\n"
    "<source id=\"1\" name=\"otter-notes.txt\">Otters eat fish and crayfish.</source>\n"
    "<source id=\"2\" name=\"otter-notes.txt\">Sea otters eat urchins.</source>\n</context>\n\n"
    "<user_query>What do otters eat? Check the web for newer studies too.</user_query>"
)
TITLE_PROMPT = (
    "### Task:\nGenerate a concise title summarizing the chat history.\n### Guidelines:\n- Keep it short.\n"
    "### Output:\nJSON format: { \"title\": \"your concise title here\" }\n### Chat History:\n<chat_history>\n"
    "USER: What do otters eat?\nASSISTANT: Fish.\n</chat_history>"
)


def frames_of(body: str) -> list[dict[str, Any]]:
    frames = sse_frames(body)
    assert frames[-1][1] == "[DONE]"
    return [json.loads(data) for _, data in frames[:-1]]


def offered(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


@pytest.fixture
async def gateway(make_client, searxng_server: FakeSearxng) -> Any:  # noqa: F811
    """The default setup: no AGENT_TOOL_PROGRESS, no AGENT_CLIENT_WEB_TOOLS."""
    return await make_client(env={"SEARXNG_URL": searxng_server.base_url})


async def test_open_webui_gets_its_status_line_sources_and_a_reasoning_block_per_round(gateway, upstream):
    upstream.queue(tool_call(("web_search", {"query": "otter diet", "limit": 3}), reasoning="I should search."),
                   text("Otters eat fish [1] and crabs [3].", reasoning="The results agree."))
    resp = await gateway.post("/v1/chat/completions", json=ASK, headers=OWUI_HEADERS)
    frames = frames_of(await resp.text())
    chunks = [f for f in frames if "choices" in f]
    events = [f["event"] for f in frames if "event" in f]
    assert all(set(f) == {"event"} for f in frames if "event" in f)  # no `choices`: Open WebUI's own
    # Each round's reasoning is a <think> block of its own, closed before the search's status line:
    # Open WebUI's tag handler times each block, so "Thought for N seconds" leaves the search out.
    content = streamed_text(chunks)
    assert content == ("<think>\nI should search.\n</think>\n\n<think>\nThe results agree.\n</think>\n\n"
                       "Otters eat fish [1] and crabs [3].")
    assert not any("reasoning_content" in c["choices"][0]["delta"] for c in chunks if c["choices"])
    order = ["status" if "event" in f and f["event"]["type"] == "status" else
             "source" if "event" in f else "text" for f in frames]
    first_close = next(i for i, f in enumerate(frames) if "</think>" in json.dumps(f))
    assert first_close < order.index("status")
    # the status line, then every hit as a source with its snippet, in the order of its number
    statuses = [e["data"] for e in events if e["type"] == "status"]
    assert [s["done"] for s in statuses] == [False, True] and statuses[1]["description"] == "Searched {{count}} sites"
    sources = [e["data"] for e in events if e["type"] == "source"]
    assert [s["metadata"][0]["source"] for s in sources] == [f"https://example.org/{n}" for n in (1, 2, 3)]
    assert [s["document"] for s in sources] == [["Snippet 1"], ["Snippet 2"], ["Snippet 3"]]
    assert sources[0]["metadata"][0]["name"] == "Result 1 for otter diet"
    assert sources[0]["metadata"][0]["source_url"] == "https://example.org/1"
    # no annotations: Open WebUI would add each cited source a second time
    assert "annotations" not in chunks[-1]["choices"][0]["delta"]
    # the model read numbered results, and its own web tools were not on offer beside ours
    tool_message = json.loads(upstream.requests[1]["messages"][-1]["content"])
    assert [hit["id"] for hit in tool_message["data"]["web"]] == [1, 2, 3]
    names = offered(upstream.requests[0])
    assert "web_search" in names and "search_web" not in names and "fetch_url" not in names
    assert "get_current_timestamp" in names  # its other tools stay
    assert "[1]" in upstream.requests[0]["messages"][0]["content"]  # the prompt says how to cite


async def test_sdk_clients_get_only_openai_chunks_by_default(gateway, upstream):
    upstream.queue(tool_call(("web_search", {"query": "otters"}), reasoning="Search."), text("Fish [1].",
                                                                                              reasoning="Done."))
    body = {**ASK, "tools": [owui_tool("get_weather")]}
    frames = frames_of(await (await gateway.post("/v1/chat/completions", json=body, headers=SDK_HEADERS)).text())
    assert all("choices" in f and "event" not in f for f in frames)
    assert streamed_text(frames) == "`🔍 otters`\n\nFish [1]."
    reasoning = "".join(f["choices"][0]["delta"].get("reasoning_content", "") for f in frames if f["choices"])
    assert reasoning == "Search.\n\nDone."
    # the numbered citation is a url_citation over its `[1]`
    annotations = frames[-1]["choices"][0]["delta"]["annotations"]
    content = streamed_text(frames)
    span = annotations[0]["url_citation"]
    assert content[span["start_index"]:span["end_index"]] == "[1]" and span["url"] == "https://example.org/1"


async def test_an_aiohttp_script_that_is_not_open_webui_gets_openai_chunks(gateway, upstream):
    upstream.queue(tool_call(("web_search", {"query": "otters"})), text("Fish."))
    body = {**ASK, "tools": [owui_tool("get_weather")]}
    frames = frames_of(await (await gateway.post("/v1/chat/completions", json=body, headers=OWUI_HEADERS)).text())
    assert all("choices" in f for f in frames)


async def test_the_setting_overrides_the_recognition(make_client, upstream, searxng_server):  # noqa: F811
    client = await make_client(env={"SEARXNG_URL": searxng_server.base_url}, tool_progress="inline")
    upstream.queue(tool_call(("web_search", {"query": "otters"})), text("Fish."))
    frames = frames_of(await (await client.post("/v1/chat/completions", json=ASK, headers=OWUI_HEADERS)).text())
    assert all("choices" in f for f in frames)
    assert streamed_text(frames) == "`🔍 otters`\n\nFish."


async def test_a_chat_with_a_document_searches_the_web_and_numbers_after_the_documents(gateway, upstream):
    upstream.queue(tool_call(("web_search", {"query": "otter diet study 2026", "limit": 2})),
                   text("Fish [1], urchins [2], and crabs [3]."))
    body = {**ASK, "messages": [{"role": "user", "content": RAG_PROMPT}]}
    frames = frames_of(await (await gateway.post("/v1/chat/completions", json=body, headers=OWUI_HEADERS)).text())
    assert "web_search" in offered(upstream.requests[0])  # the user asked to check the web
    tool_message = json.loads(upstream.requests[1]["messages"][-1]["content"])
    assert [hit["id"] for hit in tool_message["data"]["web"]] == [3, 4]  # [1] and [2] are its documents
    sources = [f["event"]["data"] for f in frames if "event" in f and f["event"]["type"] == "source"]
    assert [s["metadata"][0]["source"] for s in sources] == ["https://example.org/1", "https://example.org/2"]


async def test_a_title_task_gets_no_web_tools(gateway, upstream):
    upstream.queue(text('{"title": "Otter Diet"}'))
    body = {"model": "agent-gateway", "stream": False, "messages": [{"role": "user", "content": TITLE_PROMPT}]}
    resp = await gateway.post("/v1/chat/completions", json=body, headers=OWUI_HEADERS)
    assert (await resp.json())["choices"][0]["message"]["content"] == '{"title": "Otter Diet"}'
    assert "tools" not in upstream.requests[-1]


async def test_keep_offers_the_clients_web_tools_too(make_client, upstream, searxng_server):  # noqa: F811
    client = await make_client(env={"SEARXNG_URL": searxng_server.base_url}, client_web_tools="keep")
    upstream.queue(text("Fish."))
    await (await client.post("/v1/chat/completions", json=ASK, headers=OWUI_HEADERS)).text()
    names = offered(upstream.requests[0])
    assert {"web_search", "search_web", "fetch_url"} <= set(names)


async def test_the_clients_web_tools_stay_when_the_gateway_offers_no_search(make_client, upstream):
    client = await make_client(web_tools="on_request")
    upstream.queue(text("Fish."))
    await (await client.post("/v1/chat/completions", json=ASK, headers=OWUI_HEADERS)).text()
    assert {"search_web", "fetch_url"} <= set(offered(upstream.requests[0]))


async def test_saved_reasoning_blocks_do_not_go_back_upstream(gateway, upstream):
    upstream.queue(text("Crabs too."))
    saved = ('<details type="reasoning" done="true" duration="1">\n<summary>Thought for 1 seconds</summary>\n'
             '> I should search.\n</details>\n<think>\nold\n</think>\n\nOtters eat fish [1].')
    body = {**ASK, "messages": [{"role": "user", "content": "What do otters eat?"},
                                {"role": "assistant", "content": saved},
                                {"role": "user", "content": "And?"}]}
    await (await gateway.post("/v1/chat/completions", json=body, headers=OWUI_HEADERS)).text()
    assert upstream.requests[0]["messages"][2] == {"role": "assistant", "content": "Otters eat fish [1]."}
