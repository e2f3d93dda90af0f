"""What an MCP tool's result gives besides text, through the gateway against
`@modelcontextprotocol/server-everything` (npm): resource links become sources numbered like web
pages (the model reads the numbers; a cited number is a `url_citation`), and images go to a model that
reads them (a vision route), a note of each to one that does not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gateway.config.settings import OPTIONS_BY_KEY, parse_option
from gateway.http.app import create_app
from tests.fakes.upstream import text, tool_call
from tests.support.mcp_servers import everything_http


@pytest.fixture(scope="module")
def everything_url() -> Iterator[str]:
    with everything_http() as url:
        yield url


def everything(url: str) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "ev", "server_url": url, "require_approval": "never"}


async def gateway(aiohttp_client: Any, make_settings: Any, upstream: Any, *, vision: bool) -> Any:
    models = parse_option(OPTIONS_BY_KEY["models"], {"eyes": {"model": "fake-model", "base_url": upstream.base_url,
                                                              "vision": vision}}, "config.yaml")
    app = create_app(make_settings(llm_models=models, mcp_allowed_hosts=("127.0.0.1",)), tools=[])
    return await aiohttp_client(app)


async def test_resource_links_are_numbered_sources_the_model_cites(aiohttp_client, make_settings, upstream,
                                                                   everything_url):
    client = await gateway(aiohttp_client, make_settings, upstream, vision=False)
    upstream.queue(tool_call(("ev__get-resource-links", {"count": 2})), text("See [1] and [2]."))
    resp = await client.post("/v1/responses", json={"model": "eyes", "input": "links?",
                                                     "tools": [everything(everything_url)]})
    body = await resp.json()
    assert resp.status == 200, body
    told = [m for m in upstream.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "Cite the resources by number: [1] demo://" in told and ", [2] demo://" in told
    message = body["output"][-1]
    cited = [a["url"] for a in message["content"][0]["annotations"] if a["type"] == "url_citation"]
    assert len(cited) == 2 and all(url.startswith("demo://") for url in cited)


@pytest.mark.parametrize("vision", [True, False])
async def test_a_result_image_goes_to_a_vision_model_and_is_a_note_otherwise(aiohttp_client, make_settings, upstream,
                                                                             everything_url, vision):
    client = await gateway(aiohttp_client, make_settings, upstream, vision=vision)
    upstream.queue(tool_call(("ev__get-tiny-image", {})), text("A tiny image."))
    resp = await client.post("/v1/responses", json={"model": "eyes", "input": "image?",
                                                     "tools": [everything(everything_url)]})
    assert resp.status == 200, await resp.text()
    sent = upstream.requests[1]["messages"]
    tool_text = [m for m in sent if m["role"] == "tool"][-1]["content"]
    assert "[image: image/png" in tool_text  # what the text says of it, either way
    if vision:
        assert sent[-1]["role"] == "user"
        (image,) = [part for part in sent[-1]["content"] if part["type"] == "image_url"]
        assert image["image_url"]["url"].startswith("data:image/png;base64,")
    else:
        assert sent[-1]["role"] == "tool"
