"""Tavily web provider: search, extract and crawl."""

from __future__ import annotations

from typing import Any

from plugins.web.tavily.provider import TavilyProvider

__all__ = ["TavilyProvider", "register"]


def register(ctx: Any) -> None:
    ctx.register_web_search_provider(TavilyProvider(ctx.env))
