"""Agent tools for tests: real AgentTool implementations with observable behaviour."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any


class LookupTool:
    """Answers `lookup(term)` with a fixed fact, recording every call."""

    name = "lookup"

    def __init__(self, delay: float = 0.0, fail: bool = False) -> None:
        self.calls: list[dict[str, Any]] = []
        self.contexts: list[Any] = []
        self.delay = delay
        self.fail = fail
        self.running = 0
        self.max_running = 0

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": "Look a term up.",
            "parameters": {"type": "object", "properties": {"term": {"type": "string"}}, "required": ["term"]}}}

    def marker(self, arguments: Mapping[str, Any]) -> str | None:
        return f"🔍 {arguments.get('term', '')}"

    async def run(self, arguments: Mapping[str, Any], context: Any = None) -> str:
        self.calls.append(dict(arguments))
        self.contexts.append(context)
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.fail:
                raise RuntimeError("lookup backend is down")
            return json.dumps({"success": True, "term": arguments.get("term"), "fact": "the sky is green"})
        finally:
            self.running -= 1
