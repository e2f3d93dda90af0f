"""Exa web provider: search and extract (page contents)."""

from __future__ import annotations

from typing import Any

from plugins.web.exa.provider import ExaProvider

__all__ = ["ExaProvider", "register"]


def register(ctx: Any) -> None:
    ctx.register_web_search_provider(ExaProvider(ctx.env))
