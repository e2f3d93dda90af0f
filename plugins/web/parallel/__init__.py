"""Parallel web provider: search and extract."""

from __future__ import annotations

from typing import Any

from plugins.web.parallel.provider import ParallelProvider

__all__ = ["ParallelProvider", "register"]


def register(ctx: Any) -> None:
    ctx.register_web_search_provider(ParallelProvider(ctx.env))
