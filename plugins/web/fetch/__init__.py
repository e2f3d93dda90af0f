"""fetch: the built-in keyless extract provider (safe download + trafilatura)."""

from __future__ import annotations

from typing import Any

from .provider import FetchProvider


def register(ctx: Any) -> None:
    ctx.register_web_search_provider(FetchProvider(allow_private=ctx.settings.allow_private_urls))
