"""`tool_choice: {"type": "mcp", "server_label", "name"?}` on the Responses API (openai-python's
ToolChoiceMcpParam): the first round must call that tool, or one of that server's tools; a choice
naming no mcp tool of the request, or of the wrong shape, is a 400 naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.conftest import API_KEY
from tests.fakes.upstream import text, tool_call
from tests.support.mcp_servers import sdk_server


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with sdk_server() as url:
        yield url


def mcp_tool(url: str, **kw: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "sdk", "server_url": url, "require_approval": "never", **kw}


@pytest.fixture
async def sdk(make_client: Any, lookup_tool: Any) -> Any:
    client = await make_client(tools=[lookup_tool], mcp_allowed_hosts=("127.0.0.1",))
    made = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key=API_KEY, max_retries=0)
    yield made
    await made.close()


def names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


async def test_a_named_mcp_tool_choice_forces_that_tool_in_the_first_round_only(sdk, upstream, sdk_url):
    upstream.queue(tool_call(("sdk__echo", {"text": "forced"})), text("Forced."))
    created = await sdk.responses.create(model="m", input="hi", tools=[mcp_tool(sdk_url)],
                                         tool_choice={"type": "mcp", "server_label": "sdk", "name": "echo"})
    assert created.tool_choice.type == "mcp" and created.tool_choice.name == "echo"
    first, second = upstream.requests
    assert first["tool_choice"] == {"type": "function", "function": {"name": "sdk__echo"}}
    assert "lookup" in names(first)  # every tool stays on offer; the choice picks one
    assert second["tool_choice"] == "auto"


async def test_a_server_only_choice_offers_that_servers_tools_and_requires_a_call(sdk, upstream, sdk_url):
    upstream.queue(tool_call(("sdk__add", {"a": 2, "b": 3})), text("5."))
    await sdk.responses.create(model="m", input="add", tools=[mcp_tool(sdk_url)],
                               tool_choice={"type": "mcp", "server_label": "sdk"})
    first, second = upstream.requests
    assert first["tool_choice"] == "required" and names(first) and all(n.startswith("sdk__") for n in names(first))
    assert "lookup" in names(second) and second["tool_choice"] == "auto"


@pytest.mark.parametrize(("choice", "param"), [
    ({"type": "mcp", "server_label": "other"}, "tool_choice.server_label"),
    ({"type": "mcp", "server_label": 5}, "tool_choice.server_label"),
    ({"type": "mcp", "server_label": "sdk", "name": 7}, "tool_choice.name"),
    ({"type": "mcp", "server_label": "sdk", "tool": "echo"}, "tool_choice.tool"),
])
async def test_a_malformed_mcp_tool_choice_is_a_400_naming_the_field(sdk, upstream, sdk_url, choice, param):
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="m", input="hi", tools=[mcp_tool(sdk_url)], tool_choice=choice)
    assert caught.value.body["param"] == param and upstream.requests == []


async def test_the_server_description_reaches_the_model_with_each_tool(sdk, upstream, sdk_url):
    upstream.queue(text("Ok."))
    await sdk.responses.create(model="m", input="hi",
                               tools=[mcp_tool(sdk_url, server_description="The team's echo service.")])
    described = {t["function"]["name"]: t["function"]["description"] for t in upstream.requests[0]["tools"]}
    assert "The team's echo service." in described["sdk__echo"]
    assert "The team's echo service." not in described["lookup"]
