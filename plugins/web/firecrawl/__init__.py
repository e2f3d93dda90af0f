"""Firecrawl web provider: search, extract (scrape) and crawl (jobs with polling)."""

from __future__ import annotations

from typing import Any

from plugins.web.firecrawl.provider import FirecrawlProvider

__all__ = ["FirecrawlProvider", "register"]


def register(ctx: Any) -> None:
    ctx.register_web_search_provider(FirecrawlProvider(ctx.env))
