"""The live look at the profile's MCP servers behind `agent-gateway mcp list|check` and `config check`:
each server connected as `serve` would connect it (the same registry: stdio children get only their
configured env), its tools listed, optionally one tool called, then every connection closed (stdio
children ended). Lines name servers, hosts and tools, never a header's or env value."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.config.mcp_servers import McpServerSpec


@dataclass
class Probe:
    label: str
    where: str
    ok: bool = False
    seconds: float = 0.0
    tools: list[str] = field(default_factory=list)
    era: str | None = None
    error: str = ""
    #: (ok, seconds, output or error) of the `--call`, when asked for.
    called: tuple[bool, float, str] | None = None

    def lines(self, *, with_tools: bool = True) -> list[str]:
        if not self.ok:
            return [f"  {self.label:<16} FAILED  {self.seconds:6.2f} s  {self.error}  ({self.where})"]
        era = f", protocol {self.era}" if self.era else ""
        lines = [f"  {self.label:<16} ok      {self.seconds:6.2f} s  {len(self.tools)} tool"
                 f"{'s' if len(self.tools) != 1 else ''}{era}  ({self.where})"]
        if with_tools and self.tools:
            lines.append(f"  {'':<16} tools: {', '.join(self.tools)}")
        if self.called is not None:
            ok, seconds, text = self.called
            shown = text if len(text) <= 200 else text[:200] + "..."
            lines.append(f"  {'':<16} call {'ok' if ok else 'FAILED'} {seconds:6.2f} s: {shown}")
        return lines


def where(spec: McpServerSpec) -> str:
    """Where a server is, without secrets: the URL without its query, or the command."""
    if spec.url is not None:
        return spec.url.split("?", 1)[0]
    return " ".join([spec.command or "", *spec.args])


async def probe(specs: Sequence[McpServerSpec], call: tuple[str, Mapping[str, Any]] | None = None) -> list[Probe]:
    """List each server's tools (in parallel, each within its `timeout`); with `call`, also call
    that tool with those arguments on each server that has it."""
    from gateway.agent.mcp.registry import McpRegistry
    from gateway.agent.mcp.results import McpError
    from gateway.agent.mcp.tools import registry_configs

    registry = McpRegistry(registry_configs(specs))

    async def one(spec: McpServerSpec) -> Probe:
        found = Probe(spec.label, where(spec))
        server = registry.server(spec.label)
        started = time.monotonic()
        try:
            listed = await server.list_tools()
        except McpError as exc:
            found.seconds, found.error = time.monotonic() - started, exc.message
            return found
        except Exception as exc:  # noqa: BLE001 - a server's fault is its line, not the command's traceback
            found.seconds, found.error = time.monotonic() - started, f"{type(exc).__name__}: {exc}"
            return found
        found.seconds, found.ok, found.era = time.monotonic() - started, True, server.era
        found.tools = [tool.name for tool in listed.tools]
        if call is not None and call[0] in found.tools:
            begun = time.monotonic()
            try:
                result = await server.call_tool(call[0], call[1])
                found.called = (not result.is_error, time.monotonic() - begun, result.output)
            except McpError as exc:
                found.called = (False, time.monotonic() - begun, exc.message)
        return found

    try:
        return list(await asyncio.gather(*(one(spec) for spec in specs)))
    finally:
        await registry.close()


def parse_call(tool: str, arguments: str) -> tuple[str, dict[str, Any]]:
    """`--call TOOL ARGS`: ARGS a JSON object (ValueError otherwise)."""
    value = json.loads(arguments or "{}")
    if not isinstance(value, dict):
        raise ValueError("the call's arguments must be a JSON object")
    return tool, value
