"""Firecrawl web provider: search, extract (scrape) and crawl (jobs with polling)."""

from __future__ import annotations

from typing import Any

from plugins.web.firecrawl.provider import FirecrawlProvider
from providers.payload import tool_budget

__all__ = ["FirecrawlProvider", "register"]


def register(ctx: Any) -> None:
    # Crawls stop themselves before the gateway's tool timeout would cut them off.
    ctx.register_web_search_provider(FirecrawlProvider(ctx.env, crawl_timeout=tool_budget(ctx)))
