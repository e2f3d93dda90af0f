"""How many tokens a model's context holds: the budget a turn's input must fit (wire/context_budget.py).

`ContextWindows.tokens(model)` answers per model id, so a gateway with several models (routes,
each with its own `context_window`) asks one object. The answer is, in order: the configured value
(`LLM_CONTEXT_WINDOW`), what the upstream reports for that model, else `DEFAULT_CONTEXT_WINDOW`.
What upstreams report: vLLM's `/v1/models` entries carry `max_model_len`; OpenRouter's
`context_length`; llama.cpp's server the context it was started with in `/props`
(`default_generation_settings.n_ctx`; its `/v1/models` entry's `meta.n_ctx_train` is what the model
was trained on, an upper bound, used only without `/props`). Ollama reports nothing usable through
its OpenAI API (it serves with its own `num_ctx`): the default applies there, or the setting.
Looked up once per model, when a turn first needs it (one that fits any model's context needs no
lookup, context_budget.SMALLEST_WINDOW), and kept; an upstream that fails to answer the lookup
gets the default for that turn and is asked again on the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.errors import GatewayError

log = logging.getLogger("agent_gateway.upstream")

#: The budget when neither the settings nor the upstream say: a common size for today's models.
DEFAULT_CONTEXT_WINDOW = 32768

#: GET a JSON object from the upstream: (path, at the server's root) -> the object.
GetJson = Callable[..., Awaitable[dict[str, Any]]]


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def from_model_entry(entry: dict[str, Any]) -> int | None:
    """The context a `/v1/models` entry states, if it states one."""
    for key in ("max_model_len", "context_length", "context_window"):
        if _positive(entry.get(key)) is not None:
            return int(entry[key])
    meta = entry.get("meta")  # llama.cpp's: the context it serves (n_ctx), else what it was trained on
    if not isinstance(meta, dict):
        return None
    return _positive(meta.get("n_ctx")) or _positive(meta.get("n_ctx_train"))


def from_props(props: dict[str, Any]) -> int | None:
    """llama.cpp's `/props`: the context its server was started with."""
    settings = props.get("default_generation_settings")
    found = settings.get("n_ctx") if isinstance(settings, dict) else None
    return _positive(found) or _positive(props.get("n_ctx"))


class ContextWindows:
    """model id -> its context window in tokens (see the module docstring)."""

    def __init__(self, get_json: GetJson, configured: int | None) -> None:
        self._get_json = get_json
        self._configured = configured
        self._known: dict[str, int] = {}
        self._lock = asyncio.Lock()

    async def tokens(self, model: str) -> int:
        if self._configured is not None:
            return self._configured
        if model in self._known:
            return self._known[model]
        async with self._lock:
            if model not in self._known:
                found = await self._look_up(model)
                if found is None:  # the upstream failed to answer: the default, and ask again next time
                    return DEFAULT_CONTEXT_WINDOW
                self._known[model] = found
        return self._known[model]

    async def _look_up(self, model: str) -> int | None:
        stated: int | None = None
        try:
            listing = await self._get_json("models")
            data = listing.get("data")
            entries = data if isinstance(data, list) else []
            for entry in entries:
                if isinstance(entry, dict) and entry.get("id") == model:
                    stated = from_model_entry(entry)
            llama_cpp = any(isinstance(e, dict) and isinstance(e.get("meta"), dict) and "n_ctx_train" in e["meta"]
                            for e in entries)
            if stated is None or llama_cpp:  # llama.cpp's /props says the context it serves
                with contextlib.suppress(GatewayError):
                    stated = from_props(await self._get_json("props", at_root=True)) or stated
        except GatewayError as exc:
            log.info("the upstream did not say how large model %s's context is (%s); assuming %d tokens "
                     "for now", model, exc.message, DEFAULT_CONTEXT_WINDOW)
            return None
        if stated is None:
            log.info("the upstream does not say how large model %s's context is; assuming %d tokens "
                     "(LLM_CONTEXT_WINDOW sets it)", model, DEFAULT_CONTEXT_WINDOW)
            return DEFAULT_CONTEXT_WINDOW
        log.info("model %s: a context of %d tokens, as the upstream says", model, stated)
        return stated
