"""xAI web provider: search through Grok's server-side web_search tool (model-written results)."""

from __future__ import annotations

from typing import Any

from plugins.web.xai.provider import XaiProvider

__all__ = ["XaiProvider", "register"]


def register(ctx: Any) -> None:
    ctx.register_web_search_provider(XaiProvider(ctx.env))
