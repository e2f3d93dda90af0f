"""Keenable web provider: search and extract (fetch as markdown); keyless by default."""

from __future__ import annotations

from typing import Any

from plugins.web.keenable.provider import KeenableProvider

__all__ = ["KeenableProvider", "register"]


def register(ctx: Any) -> None:
    ctx.register_web_search_provider(KeenableProvider(ctx.env))
