"""DDGS: keyless metasearch through the optional `ddgs` library, run in a child process."""

from __future__ import annotations

from typing import Any

from .provider import DdgsProvider


def register(ctx: Any) -> None:
    ctx.register_web_search_provider(DdgsProvider(ctx.env))
