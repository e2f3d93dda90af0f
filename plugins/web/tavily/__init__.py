"""Tavily web provider: search, extract and crawl."""

from __future__ import annotations

from typing import Any

from plugins.web.tavily.provider import TavilyProvider
from providers.payload import tool_budget

__all__ = ["TavilyProvider", "register"]


def register(ctx: Any) -> None:
    # Crawls stop themselves before the gateway's tool timeout would cut them off.
    ctx.register_web_search_provider(TavilyProvider(ctx.env, crawl_timeout=tool_budget(ctx)))
