"""The agent's server-side tools: the interface a tool implements and the set the agent offers.

A tool has a `name`, an OpenAI function `schema()`, a short progress `marker(arguments)` shown
inline in chat streams (or None), and `run(arguments)` returning the text handed to the model.
`run` must not raise for expected failures: it returns a JSON failure envelope instead. Anything
it does raise is caught by the agent and reported to the model as a tool error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.agent.web.options import WebSearchOptions
from gateway.common.json_out import Encoded
from gateway.errors import AgentGatewayError


@dataclass(frozen=True)
class ToolContext:
    """What one request hands each of its tool calls besides the model's arguments."""

    #: The request's web search options (domains, context size, location).
    web: WebSearchOptions = field(default_factory=WebSearchOptions)


@dataclass(frozen=True)
class ToolOutput:
    """What a tool may return instead of plain text: the text the model reads, and what else the
    result held. `links`: (url, title, description) of resources the result points to, numbered
    and cited like web pages; `images`: (mime type, base64 data), shown to a model that reads images."""

    text: str
    links: tuple[tuple[str, str, str], ...] = ()
    images: tuple[tuple[str, str], ...] = ()


class ToolFailed(AgentGatewayError):
    """Raised by a tool's `run` for a call that failed in a way a client sees: `output` is what the
    model reads, `error` the typed failure for the wire (an MCP call's `mcp_call.error`)."""

    def __init__(self, output: str, error: dict[str, Any] | None = None) -> None:
        super().__init__(output)
        self.output = output
        self.error = error


class AgentTool(Protocol):
    name: str

    def schema(self) -> dict[str, Any]:
        """`{"type": "function", "function": {"name", "description", "parameters"}}`; fixed for the
        tool's lifetime (the Toolbox reads it once)."""
        ...

    def marker(self, arguments: Mapping[str, Any]) -> str | None:
        """Short progress text for chat streams, e.g. "🔍 weather in Oslo"; None shows nothing."""
        ...

    async def run(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> str | ToolOutput:
        """`context` None: a request without options (`ToolContext()`)."""
        ...


class Toolbox:
    """The agent's own tools by name, in the order they are offered to the model."""

    def __init__(self, tools: Iterable[AgentTool] = (), *, always: Iterable[str] = ()) -> None:
        #: Tools offered whatever the web tools' mode (API_SERVER_WEB_TOOLS=on_request holds back
        #: only the web tools): configured MCP servers' tools.
        self.always = frozenset(always)
        self._tools: dict[str, AgentTool] = {}
        self._schemas: list[dict[str, Any]] | None = None
        self._encoded: list[tuple[str, Encoded]] | None = None
        self._plain_offers: dict[tuple[bool, bool], ToolOffer] = {}
        self._always_only: Toolbox | None = None
        for tool in tools:
            self.add(tool)

    def always_only(self) -> Toolbox:
        """This toolbox without its web tools (only the `always` ones): for a key without web. Made once."""
        if self._always_only is None:
            self._always_only = Toolbox([tool for name, tool in self._tools.items() if name in self.always],
                                        always=self.always)
        return self._always_only

    def add(self, tool: AgentTool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool
        self._schemas = self._encoded = self._always_only = None
        self._plain_offers = {}

    def get(self, name: str) -> AgentTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        # Built once: every agent run offers them, and rebuilding the nested dicts per request was
        # ~5% of the gateway's CPU on a non-streamed chat call.
        if self._schemas is None:
            self._schemas = [tool.schema() for tool in self._tools.values()]
        return list(self._schemas)

    def encoded(self) -> list[tuple[str, Encoded]]:
        """(name, schema) per tool, each schema JSON-encoded once: what goes upstream with every
        request (encoding them per request was ~4% of a chat call's instructions). Read-only."""
        if self._encoded is None:
            self._encoded = [(schema["function"]["name"], Encoded(schema)) for schema in self.schemas()]
        return self._encoded

    def plain_offer(self, agent_tools: bool, only_always: bool = False) -> ToolOffer:
        """The offer for a request with no tools and no web options of its own (nearly every one):
        the same each time, so built once. `only_always`: just the `always` tools."""
        key = (agent_tools, only_always)
        offer = self._plain_offers.get(key)
        if offer is None:
            tools: list[Any] = [schema for name, schema in self.encoded()
                                if not only_always or name in self.always] if agent_tools else []
            offer = self._plain_offers[key] = ToolOffer(agent_tools, tools, _NO_WEB_CONTEXT, None)
        return offer

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


#: A client's own web tools, by name (lower case, `-` as `_`): Open WebUI's `search_web` and
#: `fetch_url`, and the names other frontends and agent kits give theirs. Left out of the upstream
#: offer while the gateway's web tools are on (AGENT_CLIENT_WEB_TOOLS=drop): a model offered two
#: searches calls both, and the user sees two. A client tool named exactly like one of the
#: gateway's is not among them: it replaces the gateway's, as the client asked.
CLIENT_WEB_TOOLS = frozenset({
    "search_web", "fetch_url", "web_fetch", "fetch_web_page", "fetch_webpage", "read_url", "browse", "browse_web",
    "google_search", "bing_search", "brave_search", "tavily_search", "duckduckgo_search", "ddg_search",
    "internet_search", "search_internet", "search_the_web", "websearch", "web_browser",
})


def is_client_web_tool(name: str) -> bool:
    return name.lower().replace("-", "_") in CLIENT_WEB_TOOLS


@dataclass(frozen=True)
class ToolOffer:
    """What one request is offered: the schemas for the model and the context for tool calls."""

    #: Whether the agent's own tools run in this turn.
    agent_tools: bool
    #: The schemas sent upstream: the agent's (unless a client tool has the name; each an
    #: `Encoded`, written once) + the client's. Read-only: an offer may be shared by requests.
    tools: list[Any]
    context: ToolContext
    #: The tool_choice of the first round, when the request forces a web search.
    first_choice: dict[str, Any] | None
    #: The client's tools on offer (a call to one goes back to the client).
    client_names: frozenset[str] = frozenset()


def offer_tools(toolbox: Toolbox, client_tools: list[dict[str, Any]], web: WebSearchOptions | None, *,
                mode: str, background: bool, no_tools: bool = False, client_web_tools: str = "drop") -> ToolOffer:
    """The agent's tools for one request: none for a background task, none when the client said
    `tool_choice: "none"` (`no_tools`: "the model will not call any tool", so no search runs and
    no query leaves for a provider), none under `mode` `off` (a model route that is a plain relay),
    none under `on_request` unless the request asked for web search (`web` not None). With the
    agent's web search on offer and `client_web_tools` `drop`, the client's own web tools are left out."""
    web_wanted = mode != "on_request" or web is not None
    agent_tools = (len(toolbox) > 0 and not background and not no_tools and mode != "off"
                   and (web_wanted or bool(toolbox.always)))
    if not client_tools and web is None:
        return toolbox.plain_offer(agent_tools, only_always=not web_wanted)
    client_names = {t["function"]["name"] for t in client_tools}
    # A client tool with the same name as one of ours wins: the client asked for it explicitly.
    ours = [(name, schema) for name, schema in toolbox.encoded()
            if name not in client_names and (web_wanted or name in toolbox.always)] if agent_tools else []
    searching = any(name == "web_search" for name, _ in ours)
    if client_web_tools == "drop" and searching:
        client_tools = [t for t in client_tools if not is_client_web_tool(t["function"]["name"])]
        client_names = {t["function"]["name"] for t in client_tools}
    forced = web is not None and web.force_search and searching
    first = {"type": "function", "function": {"name": "web_search"}} if forced else None
    return ToolOffer(agent_tools, [schema for _, schema in ours] + client_tools,
                     ToolContext(web) if web is not None else _NO_WEB_CONTEXT, first, frozenset(client_names))


_NO_WEB_CONTEXT = ToolContext()  # frozen: one shared default rather than one built per request
