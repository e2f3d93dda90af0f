"""The MCP servers of one gateway process: the configured ones by label, and per-request ones by URL.

Configured servers (`mcp_servers:` in config.yaml, parsed by a later step into these configs) are
trusted by the operator: any address, their headers and env as configured. Each has one handle per
process, created on first use, so a stdio server runs as one child of this process whatever the
number of requests. A per-request server (`{"type": "mcp", "server_url": ...}` on the Responses
API) must resolve to public addresses unless its host is in `allowed_hosts` (the
AGENT_MCP_ALLOWED_HOSTS setting), and gets a handle of its own that the request closes; the era
each URL was found to speak is remembered (at most MAX_REMEMBERED URLs), so the next request skips
the probe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from yarl import URL

from gateway.agent.mcp.http import HttpConnection
from gateway.agent.mcp.server import DEFAULT_TIMEOUT, McpServer
from gateway.agent.mcp.stdio import StdioConnection
from providers.urlsafety import AddressPolicy, address_problem, allow_all

MAX_REMEMBERED = 1024


@dataclass(frozen=True)
class HttpServerConfig:
    label: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT


@dataclass(frozen=True)
class StdioServerConfig:
    label: str
    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout: float = DEFAULT_TIMEOUT


ServerConfig = HttpServerConfig | StdioServerConfig


def policy_for(host: str | None, allowed_hosts: Iterable[str]) -> AddressPolicy:
    """Public addresses only, unless the host is allow-listed (names compared without case)."""
    allowed = {name.lower().rstrip(".") for name in allowed_hosts}
    if host is not None and host.lower().rstrip(".").strip("[]") in allowed:
        return allow_all
    return address_problem


class _RememberingConnection(HttpConnection):
    def __init__(self, memory: dict[str, str], key: str, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._memory = memory
        self._key = key

    async def close(self) -> None:
        if self.era is not None:
            self._memory.pop(self._key, None)
            self._memory[self._key] = self.era
            while len(self._memory) > MAX_REMEMBERED:
                self._memory.pop(next(iter(self._memory)))
        await super().close()


class McpRegistry:
    def __init__(self, configs: Iterable[ServerConfig] = (), *, allowed_hosts: Iterable[str] = ()) -> None:
        self.configs: dict[str, ServerConfig] = {}
        for config in configs:
            if config.label in self.configs:
                raise ValueError(f"two MCP servers are labelled {config.label!r}")
            self.configs[config.label] = config
        self.allowed_hosts = frozenset(host.lower() for host in allowed_hosts)
        self._servers: dict[str, McpServer] = {}
        self._eras: dict[str, str] = {}

    def labels(self) -> list[str]:
        return list(self.configs)

    def server(self, label: str) -> McpServer:
        """The one handle of a configured server (KeyError for an unknown label)."""
        handle = self._servers.get(label)
        if handle is None:
            config = self.configs[label]
            if isinstance(config, StdioServerConfig):
                connection: StdioConnection | HttpConnection = StdioConnection(
                    label, config.command, config.args, config.env, cwd=config.cwd)
            else:
                connection = HttpConnection(config.url, config.headers, policy=allow_all)
            handle = self._servers[label] = McpServer(label, connection, timeout=config.timeout)
        return handle

    def open_url(self, label: str, url: str, headers: Mapping[str, str] | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT) -> McpServer:
        """A handle for a server a request named by URL; the caller closes it. Raises
        McpBlockedUrlError (a 400 for the client) for a URL the gateway may not connect to; a
        host name is checked again, address by address, when it is resolved."""
        try:
            host = URL(url).host
        except (ValueError, TypeError):
            host = None
        key = url.split("#", 1)[0]
        connection = _RememberingConnection(self._eras, key, url, headers,
                                            policy=policy_for(host, self.allowed_hosts), era=self._eras.get(key))
        return McpServer(label, connection, timeout=timeout)

    async def close(self) -> None:
        """Close every configured server's handle: stdio children are ended."""
        servers, self._servers = list(self._servers.values()), {}
        results = await asyncio.gather(*(server.close() for server in servers), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
