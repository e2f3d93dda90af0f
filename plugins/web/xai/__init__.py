"""xAI web provider: search through Grok's server-side web_search tool (model-written results)."""

from __future__ import annotations

from typing import Any

from plugins.web.xai.provider import XaiProvider
from providers.payload import tool_budget

__all__ = ["XaiProvider", "register"]


def register(ctx: Any) -> None:
    # Grok's agentic search is slow; wait as long as the gateway lets a tool run, no less.
    ctx.register_web_search_provider(XaiProvider(ctx.env, timeout=tool_budget(ctx, margin=0.5)))
