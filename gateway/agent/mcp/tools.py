"""MCP servers' tools as agent tools: the second tool family beside the web tools.

Each tool of a configured server reaches the model as `<label>__<tool>` (a label has no `__`,
gateway/config/mcp_servers.py), so it can collide neither with `web_search`/`web_extract` nor with
another server's tool; the call goes to the server under the tool's own name. `McpFamily` lists the
offered servers' tools once per turn (the handle keeps the list, so only the first turn, or a
server that failed, asks the server) and builds the turn's Toolbox: the same Toolbox object while
the listings are unchanged, so its schemas stay encoded once.

A server that cannot list its tools (down, hanging, garbage) is left out of the turn and reported
as a failed listing; it is not asked again for COOL_DOWN seconds, so a dead server costs one wait,
not one per request. A call that fails is a `ToolFailed` with OpenAI's `mcp_call.error` object: the
model reads what went wrong and the turn goes on.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gateway.agent.mcp.http import McpBlockedUrlError
from gateway.agent.mcp.registry import HttpServerConfig, McpRegistry, ServerConfig, StdioServerConfig
from gateway.agent.mcp.results import McpError, ToolList, ToolSpec
from gateway.agent.mcp.server import McpServer
from gateway.agent.observer import report_provider
from gateway.agent.tool_servers import ALWAYS, NEVER, ApprovalPolicy, McpServerRequest
from gateway.agent.toolbox import AgentTool, Toolbox, ToolContext, ToolFailed, ToolOutput
from gateway.config.mcp_servers import McpServerSpec
from gateway.errors import InvalidRequestError

SEPARATOR = "__"
#: Seconds a server whose listing failed is left out before it is asked again.
COOL_DOWN = 30.0
#: OpenAI's limit on a function name's length.
MAX_NAME = 64


def registry_configs(specs: Sequence[McpServerSpec]) -> list[ServerConfig]:
    """The registry's configs for the configured servers."""
    configs: list[ServerConfig] = []
    for spec in specs:
        if spec.url is not None:
            configs.append(HttpServerConfig(spec.label, spec.url, dict(spec.headers), spec.timeout))
        else:
            configs.append(StdioServerConfig(spec.label, spec.command or "", tuple(spec.args), dict(spec.env),
                                             spec.cwd, spec.timeout))
    return configs


class McpTool:
    """One tool of one server, as the agent offers it. `mcp` is (server label, tool name)."""

    def __init__(self, server: McpServer, spec: ToolSpec, *, configured: bool = True, needs_approval: bool = False,
                 server_description: str | None = None) -> None:
        self._server = server
        self._spec = spec
        #: A call must be approved by the client first (gateway/wire/mcp_approvals.py).
        self.needs_approval = needs_approval
        self._server_description = server_description
        # metric labels stay a bounded set: a request's own server (its label the client's) counts as "request"
        self.metric_server = server.label if configured else "request"
        self.name = f"{server.label}{SEPARATOR}{spec.name}"[:MAX_NAME]
        self.mcp = (server.label, spec.name)

    def schema(self) -> dict[str, Any]:
        parameters = self._spec.input_schema or {"type": "object", "properties": {}}
        # untrusted text from the server: it goes to the model as a tool description, never as
        # system instructions
        description = self._spec.description or f"The {self._spec.name} tool of the {self._server.label} MCP server."
        if self._server_description:  # the client's `server_description`: context for the model, as OpenAI uses it
            description = f"{description}\n\n(MCP server {self._server.label}: {self._server_description})"
        return {"type": "function", "function": {"name": self.name, "description": description,
                                                 "parameters": parameters}}

    def marker(self, arguments: Mapping[str, Any]) -> str | None:
        return f"🔧 {self._server.label}: {self._spec.name}"

    async def run(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> str | ToolOutput:
        # the server is the call's "provider" in agent_gateway_tool_calls{tool, provider, outcome}
        try:
            result = await self._server.call_tool(self._spec.name, arguments)
        except McpError as exc:
            report_provider(self.metric_server, "timeout" if exc.code == 504 else "error")
            message = json.dumps({"success": False, "error": f"{self.mcp[0]} {self.mcp[1]}: {exc.message}"},
                                 ensure_ascii=False)
            raise ToolFailed(message, exc.error_object()) from None
        if result.is_error:
            report_provider(self.metric_server, "failed")
            raise ToolFailed(result.output, result.error_object())
        report_provider(self.metric_server, "ok")
        if not result.resource_links and not result.images:
            return result.output
        links = tuple((link.uri, link.title or link.name or link.uri, link.description or "")
                      for link in result.resource_links)
        return ToolOutput(result.output, links, tuple((image.mime_type, image.data) for image in result.images))


@dataclass(frozen=True)
class Listing:
    """One server's tools for a turn: the agent tools and their `mcp_list_tools` bodies, or the error."""

    label: str
    tools: tuple[McpTool, ...] = ()
    item_tools: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    #: Taken from an `mcp_list_tools` item already in the context: no new item for it.
    reused: bool = False


class McpFamily:
    """The configured servers the agent offers on every request (`offer: all`)."""

    def __init__(self, registry: McpRegistry, specs: Sequence[McpServerSpec]) -> None:
        self.registry = registry
        self._specs = {spec.label: spec for spec in specs}
        self._offered = [spec.label for spec in specs if spec.offer == "all"]
        self._listings: dict[str, Listing] = {}  # label -> the last good listing
        self._failed_at: dict[str, float] = {}
        self._toolboxes: dict[tuple[bool | int, ...], Toolbox] = {}

    async def list_offered(self) -> list[Listing]:
        """The offered servers' tools, listed in parallel (each bounded by its server's timeout)."""
        return list(await asyncio.gather(*(self._list(label) for label in self._offered)))

    async def _list(self, label: str) -> Listing:
        known = self._listings.get(label)
        if known is not None:
            return known
        failed = self._failed_at.get(label)
        if failed is not None and time.monotonic() - failed < COOL_DOWN:
            return Listing(label, error=f"the MCP server {label} failed recently; not retried yet")
        server = self.registry.server(label)
        try:
            listed = await server.list_tools()
        except McpError as exc:
            self._failed_at[label] = time.monotonic()
            return Listing(label, error=exc.message)
        spec = self._specs[label]
        listing = _listing(server, listed, spec.allowed_tools, read_only=False, configured=True,
                           approval=_configured_policy(spec))
        self._listings[label] = listing
        self._failed_at.pop(label, None)
        return listing

    async def open_request(self, named: Sequence[McpServerRequest]) -> tuple[list[Listing], list[McpServer]]:
        """The servers a request names, listed in parallel: their listings, and the handles the
        request must close (`close_request`). A URL the gateway may not connect to, or a label
        without URL that is no configured server, is a 400 (InvalidRequestError)."""
        opened: list[McpServer] = []
        wanted: list[tuple[McpServerRequest, McpServer]] = []
        for request in named:
            if request.url is None:
                spec = self._specs.get(request.label)
                if spec is None:
                    raise InvalidRequestError(f"no MCP server is configured as {request.label!r}; give a "
                                              "'server_url'.", param=f"{request.param}.server_url")
                if spec.offer == "all":
                    continue  # offered on every request already
                wanted.append((request, self.registry.server(request.label)))
                continue
            try:
                server = self.registry.open_url(request.label, request.url, request.headers)
            except McpBlockedUrlError as exc:
                raise _blocked(request, exc) from None
            opened.append(server)
            wanted.append((request, server))
        try:
            listings = list(await asyncio.gather(*(self._list_named(r, s) for r, s in wanted)))
        except BaseException:
            await self.close_request(opened)
            raise
        return listings, opened

    def _policy(self, request: McpServerRequest) -> ApprovalPolicy | tuple[ApprovalPolicy, ...]:
        """A URL's: the request's (absent: OpenAI's "always"). A configured server's named by label:
        its own, and the request's too when given (a client may ask for more approvals, not fewer)."""
        if request.url is not None:
            return request.approval or ALWAYS
        own = _configured_policy(self._specs[request.label])
        return own if request.approval is None else (own, request.approval)

    async def _list_named(self, request: McpServerRequest, server: McpServer) -> Listing:
        policy = self._policy(request)
        if request.known_tools is not None:
            known = ToolList(tuple(_known_spec(tool) for tool in request.known_tools))
            return replace(_listing(server, known, request.allowed_tools, read_only=request.read_only,
                                    configured=request.url is None, approval=policy,
                                    description=request.description), reused=True)
        try:
            listed = await server.list_tools()
        except McpBlockedUrlError as exc:  # a host name that resolved to a private address
            raise _blocked(request, exc) from None
        except McpError as exc:
            return Listing(request.label, error=exc.message)
        return _listing(server, listed, request.allowed_tools, read_only=request.read_only,
                        configured=request.url is None, approval=policy, description=request.description)

    @staticmethod
    async def close_request(opened: Sequence[McpServer]) -> None:
        await asyncio.gather(*(server.close() for server in opened), return_exceptions=True)

    def toolbox(self, base: Toolbox, listings: Sequence[Listing], *, cache: bool = True,
                approvals: bool = True) -> Toolbox:
        """`base`'s tools and the listed servers' tools; one Toolbox per set of configured
        servers' listings (`cache`), a new one for a request's own servers. Without `approvals`
        (an API with no approval items), the tools that need approval are left out."""
        key = (id(base), approvals, *(id(listing) for listing in listings if listing.error is None))
        box = self._toolboxes.get(key) if cache else None
        if box is None:
            tools: list[AgentTool] = [tool for name in base.names() if (tool := base.get(name)) is not None]
            names = set(base.names())
            ours: list[str] = []
            for listing in listings:
                for tool in listing.tools:
                    if tool.needs_approval and not approvals:
                        continue
                    if tool.name not in names:  # a name cut at 64 characters may repeat: first one wins
                        names.add(tool.name)
                        ours.append(tool.name)
                        tools.append(tool)
            box = Toolbox(tools, always=(*base.always, *ours))
            if cache:
                if len(self._toolboxes) > 16:  # listings change only when a server comes back
                    self._toolboxes.clear()
                self._toolboxes[key] = box
        return box

    async def close(self) -> None:
        await self.registry.close()


def _configured_policy(spec: McpServerSpec) -> ApprovalPolicy:
    return ALWAYS if spec.require_approval == "always" else NEVER


def _listing(server: McpServer, listed: ToolList, allowed: tuple[str, ...] | None, *, read_only: bool,
             configured: bool, approval: ApprovalPolicy | tuple[ApprovalPolicy, ...] = NEVER,
             description: str | None = None) -> Listing:
    """The tools of `listed` that `allowed` names (all when None), only read-only ones if `read_only`;
    each needing approval when any of the `approval` policies says so."""
    specs = [spec for spec in listed.tools
             if (allowed is None or spec.name in allowed) and (not read_only or spec.read_only)]
    policies = approval if isinstance(approval, tuple) else (approval,)
    tools = tuple(McpTool(server, spec, configured=configured, server_description=description,
                          needs_approval=any(policy.needed(spec.name, spec.read_only) for policy in policies))
                  for spec in specs)
    return Listing(server.label, tools, tuple(spec.as_item_tool() for spec in specs))


def _blocked(request: McpServerRequest, exc: McpBlockedUrlError) -> InvalidRequestError:
    return InvalidRequestError(f"the mcp tool {request.label!r} names a server the gateway may not connect to: "
                               f"{exc.message} (AGENT_MCP_ALLOWED_HOSTS lists hosts that may be private)",
                               param=f"{request.param}.server_url")


def _known_spec(tool: dict[str, Any]) -> ToolSpec:
    """A tool as an `mcp_list_tools` item lists it (checked by the wire: a dict with a `name`)."""
    schema = tool.get("input_schema")
    description, annotations = tool.get("description"), tool.get("annotations")
    return ToolSpec(str(tool["name"]), schema if isinstance(schema, dict) else {"type": "object"},
                    description if isinstance(description, str) else None,
                    annotations if isinstance(annotations, dict) else None)
