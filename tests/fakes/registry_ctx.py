"""A stand-in for the loader's plugin context: the two things `register(ctx)` may use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class RecordingContext:
    """Has `env` and `register_web_search_provider`, and keeps what was registered."""

    def __init__(self, env: Mapping[str, str], settings: Any = None) -> None:
        self.env = dict(env)
        self.settings = settings
        self.providers: list[Any] = []

    def register_web_search_provider(self, provider: Any) -> None:
        self.providers.append(provider)
