"""Perplexity web provider: search (the raw Search API, not the chat models)."""

from __future__ import annotations

from typing import Any

from plugins.web.perplexity.provider import PerplexityProvider

__all__ = ["PerplexityProvider", "register"]


def register(ctx: Any) -> None:
    ctx.register_web_search_provider(PerplexityProvider(ctx.env))
