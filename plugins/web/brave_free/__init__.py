"""Brave Search API: web search with a subscription token (a paid plan with credit, or a legacy free key)."""

from __future__ import annotations

from typing import Any

from .provider import BraveProvider


def register(ctx: Any) -> None:
    ctx.register_web_search_provider(BraveProvider(ctx.env))
