"""A configured MCP server is a research data source: its search-like tools are asked each
sub-question beside the web, shown as `mcp_call` items, noted and citable like a page."""

from __future__ import annotations

import sys
from pathlib import Path

from gateway.config.mcp_servers import McpServerSpec
from tests.agent.research.archive_mcp import ARCHIVE_FACT
from tests.agent.research.site import SUB_QUESTIONS, StageModel, facts
from tests.support.faults import free_port
from tests.support.mcp_servers import _serving

REPO = Path(__file__).resolve().parents[3]
RESEARCH_ID = "agent-gateway-deep-research"


async def test_a_configured_mcp_search_tool_is_asked_each_sub_question_and_cited(research_client,
                                                                                model: StageModel, monkeypatch):
    archive = McpServerSpec("archive", command=sys.executable, args=("-m", "tests.agent.research.archive_mcp"),
                            cwd=str(REPO), timeout=30)
    monkeypatch.setattr("tests.agent.research.site.facts", lambda: [*facts(), ARCHIVE_FACT])
    client = await research_client(mcp_servers=(archive,))
    resp = await client.post("/v1/responses", json={"model": RESEARCH_ID, "input": "Who drew the lighthouse?"})
    assert resp.status == 200, await resp.text()
    body = await resp.json()
    [listed] = [item for item in body["output"] if item["type"] == "mcp_list_tools"]
    assert {tool["name"] for tool in listed["tools"]} == {"search_archive", "shelve"}
    calls = [item for item in body["output"] if item["type"] == "mcp_call"]
    assert {call["name"] for call in calls} == {"search_archive"}  # shelve is no data source
    assert len(calls) >= len(SUB_QUESTIONS) and all('"text"' in call["arguments"] for call in calls)
    [message] = [item for item in body["output"] if item["type"] == "message"]
    part = message["content"][0]
    assert ARCHIVE_FACT in part["text"]
    assert any(a["url"].startswith("mcp://archive/search_archive?query=") for a in part["annotations"])


async def test_an_mcp_server_the_request_names_is_a_data_source_too(research_client, model: StageModel,
                                                                   monkeypatch):
    monkeypatch.setattr("tests.agent.research.site.facts", lambda: [*facts(), ARCHIVE_FACT])
    port = free_port()
    with _serving([sys.executable, "-m", "tests.agent.research.archive_mcp", str(port)], port):
        client = await research_client(mcp_allowed_hosts=("127.0.0.1",))
        tool = {"type": "mcp", "server_label": "harbour", "server_url": f"http://127.0.0.1:{port}/mcp",
                "require_approval": "never", "allowed_tools": ["search_archive"]}
        resp = await client.post("/v1/responses", json={"model": RESEARCH_ID, "input": "Who drew the lighthouse?",
                                                        "tools": [tool]})
        assert resp.status == 200, await resp.text()
        body = await resp.json()
    calls = [item for item in body["output"] if item["type"] == "mcp_call"]
    assert calls and {(call["server_label"], call["name"]) for call in calls} == {("harbour", "search_archive")}
    [message] = [item for item in body["output"] if item["type"] == "message"]
    assert ARCHIVE_FACT in message["content"][0]["text"]
