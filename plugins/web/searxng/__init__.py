"""SearXNG: a self-hosted metasearch engine, queried through its JSON API."""

from __future__ import annotations

from typing import Any

from .provider import SearxngProvider


def register(ctx: Any) -> None:
    ctx.register_web_search_provider(SearxngProvider(ctx.env))
