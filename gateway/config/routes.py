"""Model routes (`models:` in config.yaml, or `LLM_MODELS`): which model ids the gateway serves, and
where each one goes. Parsing and validation only; gateway/upstream/routes.py runs them.

Three spellings:

    models: auto                  # every model the upstream (LLM_BASE_URL) lists, under its own id
    models: [qwen3:8b, llama3.2]  # (or LLM_MODELS=qwen3:8b,llama3.2) those, on LLM_BASE_URL
    models:                       # routes by id, each with its own upstream, key and settings
      qwen3:
        model: qwen3:8b
        base_url: http://127.0.0.1:11434/v1
        api_key_env: OLLAMA_KEY
        fallbacks: [openrouter-qwen]
        vision: true                  # the model reads images (default: what discovery says, else false)
        drop_params: [reasoning_effort, verbosity]   # request fields this upstream refuses
        research: false               # no `qwen3-deep-research` id (default: AGENT_RESEARCH)

A route's fallbacks are tried in order, each followed by its own fallbacks (a chain, never a
cycle); the errors here name the route and the key that is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: The keys a route may have (anything else is a typo worth an error, not a silent default).
ROUTE_KEYS = ("model", "base_url", "api_key_env", "reasoning", "web_tools", "context_window", "fallbacks", "vision",
              "drop_params", "research")
#: What a deep-research model id adds to its model's id: `agent-gateway-deep-research`, `qwen3-deep-research`.
RESEARCH_SUFFIX = "-deep-research"
#: What `drop_params` may not hold back: without them there is no model call at all.
UNDROPPABLE = ("model", "messages", "stream")
REASONING_CHOICES = ("show", "hide")
WEB_TOOLS_CHOICES = ("always", "on_request", "off")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class RouteSpec:
    """One route as configured. None: the global setting (LLM_BASE_URL, API_SERVER_REASONING ...)."""

    id: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    reasoning: str | None = None
    web_tools: str | None = None
    context_window: int | None = None
    fallbacks: tuple[str, ...] = ()
    #: Whether the model reads images; None: what the upstream's model list says, else no.
    vision: bool | None = None
    #: Top-level fields of the upstream request left out for this route (its upstream refuses them).
    drop_params: tuple[str, ...] = ()
    #: Whether the route has a deep-research id (`<id>-deep-research`); None: AGENT_RESEARCH.
    research: bool | None = None

    def describe(self) -> str:
        parts = [self.id if self.model == self.id else f"{self.id} -> {self.model}"]
        if self.base_url:
            parts.append(f"at {self.base_url}")
        if self.api_key_env:
            parts.append(f"key from {self.api_key_env}")
        for name in ("reasoning", "web_tools", "context_window"):
            if getattr(self, name) is not None:
                parts.append(f"{name} {getattr(self, name)}")
        if self.vision is not None:
            parts.append("vision" if self.vision else "no vision")
        if self.research is False:
            parts.append("no research")
        if self.drop_params:
            parts.append("drops " + ", ".join(self.drop_params))
        if self.fallbacks:
            parts.append("fallbacks " + ", ".join(self.fallbacks))
        return " ".join(parts[:1]) + (f" ({'; '.join(parts[1:])})" if parts[1:] else "")


@dataclass(frozen=True)
class ModelRoutes:
    """The parsed `models` setting: routes in the order configured, or discovery (`auto`)."""

    routes: tuple[RouteSpec, ...] = ()
    discover: bool = False

    def __str__(self) -> str:  # what `config list` / `config get` show
        if self.discover:
            return "auto"
        return ", ".join(route.describe() for route in self.routes)

    def chain(self, route_id: str) -> tuple[str, ...]:
        """The route ids a turn on `route_id` tries after it, in order (validated: no cycles)."""
        by_id = {route.id: route for route in self.routes}
        seen: list[str] = []

        def walk(current: str) -> None:
            for fallback in by_id[current].fallbacks:
                if fallback != route_id and fallback not in seen:
                    seen.append(fallback)
                    walk(fallback)

        if route_id in by_id:
            walk(route_id)
        return tuple(seen)


def parse_models(raw: Any, *, url: Callable[[Any], str]) -> ModelRoutes | None:
    """`auto`, a list of model ids (a YAML list or `a,b,c`), or a mapping of routes; empty/`none`:
    no routes (one model, as without the setting). `url` checks a base URL (the options table's)."""
    if isinstance(raw, str):
        text = raw.strip()
        if text.lower() in ("", "none", "off"):
            return None
        if text.lower() == "auto":
            return ModelRoutes(discover=True)
        raw = text.split(",")
    if isinstance(raw, list | tuple):
        ids = [str(item).strip() for item in raw if str(item).strip()]
        if any(item.lower() == "auto" for item in ids):
            raise ValueError("auto stands alone: write auto, or list model ids")
        return ModelRoutes(tuple(RouteSpec(item, item) for item in dict.fromkeys(ids))) if ids else None
    if not isinstance(raw, Mapping):
        raise ValueError("expected auto, a list of model ids, or a mapping of routes (id: {model, base_url, ...})")
    routes = tuple(_route(str(route_id), value, url) for route_id, value in raw.items())
    if not routes:
        return None
    _check_fallbacks(routes)
    return ModelRoutes(routes)


def _route(route_id: str, value: Any, url: Callable[[Any], str]) -> RouteSpec:
    where = f"route {route_id!r}"
    if not route_id.strip() or route_id != route_id.strip():
        raise ValueError(f"{where}: a route id is a non-empty name without surrounding spaces")
    if value is None:
        return RouteSpec(route_id, route_id)
    if isinstance(value, str):  # `qwen3: qwen3:8b`, the short form
        return RouteSpec(route_id, value.strip() or route_id)
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected a mapping of {', '.join(ROUTE_KEYS)}")
    unknown = [str(key) for key in value if key not in ROUTE_KEYS]
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; a route has {', '.join(ROUTE_KEYS)}")
    model = _text(value, "model", where) or route_id
    base_url = _text(value, "base_url", where)
    if base_url is not None:
        try:
            base_url = url(base_url)
        except ValueError as exc:
            raise ValueError(f"{where}: base_url: {exc}") from None
    api_key_env = _text(value, "api_key_env", where)
    if api_key_env is not None and not _ENV_NAME.match(api_key_env):
        raise ValueError(f"{where}: api_key_env names the variable that holds the key (like OLLAMA_KEY), "
                         "never the key itself")
    reasoning = _choice(value, "reasoning", REASONING_CHOICES, where)
    web_tools = _choice(value, "web_tools", WEB_TOOLS_CHOICES, where)
    window = value.get("context_window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"{where}: context_window is a whole number of tokens, at least 1")
    fallbacks = value.get("fallbacks") or ()
    if isinstance(fallbacks, str):
        fallbacks = [item for item in fallbacks.split(",")]
    if not isinstance(fallbacks, list | tuple):
        raise ValueError(f"{where}: fallbacks is a list of route ids")
    names = tuple(dict.fromkeys(str(item).strip() for item in fallbacks if str(item).strip()))
    vision = value.get("vision")
    if vision is not None and not isinstance(vision, bool):
        raise ValueError(f"{where}: vision is true or false")
    research = value.get("research")
    if research is not None and not isinstance(research, bool):
        raise ValueError(f"{where}: research is true or false")
    return RouteSpec(route_id, model, base_url, api_key_env, reasoning, web_tools, window, names, vision,
                     _drop_params(value.get("drop_params"), where), research)


def _drop_params(value: Any, where: str) -> tuple[str, ...]:
    """`drop_params: [reasoning_effort, verbosity]` (or `a,b`): field names of the upstream request."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{where}: drop_params is a list of request field names (like reasoning_effort)")
    names = tuple(dict.fromkeys(item.strip() for item in value if item.strip()))
    for name in names:
        if name in UNDROPPABLE:
            raise ValueError(f"{where}: drop_params cannot drop {name!r}: no model call works without it")
    return names


def _text(value: Mapping[str, Any], key: str, where: str) -> str | None:
    item = value.get(key)
    if item is None:
        return None
    if isinstance(item, bool) or not isinstance(item, str | int | float):
        raise ValueError(f"{where}: {key} is a string")
    return str(item).strip() or None


def _choice(value: Mapping[str, Any], key: str, choices: tuple[str, ...], where: str) -> str | None:
    if value.get(key) is False and "off" in choices:
        return "off"  # YAML reads a bare `off` as false
    item = _text(value, key, where)
    if item is not None and item not in choices:
        raise ValueError(f"{where}: {key} is one of {', '.join(choices)}, not {item!r}")
    return item


def _check_fallbacks(routes: tuple[RouteSpec, ...]) -> None:
    by_id = {route.id: route for route in routes}
    for route in routes:
        for fallback in route.fallbacks:
            if fallback not in by_id:
                raise ValueError(f"route {route.id!r}: fallback {fallback!r} is not a route; "
                                 f"routes: {', '.join(by_id)}")

    def visit(route_id: str, path: list[str]) -> None:
        for fallback in by_id[route_id].fallbacks:
            if fallback in path:
                raise ValueError("fallbacks go round in a circle: " + " -> ".join([*path, fallback]))
            visit(fallback, [*path, fallback])

    for route in routes:
        visit(route.id, [route.id])
