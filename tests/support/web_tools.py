"""The agent's real web tools, built from the real provider registry as `serve` builds them, for
tests that drive the tools against fake provider APIs on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from gateway.agent.web.tools import WebExtractTool, WebSearchTool, build_web_tools
from gateway.config.settings import Settings
from providers.loader import load_registry

Make = Callable[..., tuple[WebSearchTool, WebExtractTool]]


@contextlib.asynccontextmanager
async def web_tools_maker(home: Path, env: dict[str, str], **defaults: Any) -> AsyncIterator[Make]:
    """`make(**settings)` builds a (web_search, web_extract) pair with `defaults` overridden by
    `settings`; every registry made is closed at the end."""
    registries = []

    def make(**overrides: Any) -> tuple[WebSearchTool, WebExtractTool]:
        settings = Settings(home=home, profile=None, env=env, **{**defaults, **overrides})
        registry = load_registry(settings)
        registries.append(registry)
        search, extract = build_web_tools(registry, settings)
        assert isinstance(search, WebSearchTool) and isinstance(extract, WebExtractTool)
        return search, extract

    try:
        yield make
    finally:
        for registry in registries:
            await registry.aclose()


async def run_tool(tool: Any, **arguments: Any) -> dict[str, Any]:
    """One tool call as the agent makes it: the arguments in, the JSON envelope out."""
    return json.loads(await tool.run(arguments))
