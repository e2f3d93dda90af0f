"""The provider registry: every loaded web provider by name, and which one serves each capability.

Selection for a capability ("search", "extract" or "crawl"; crawl follows the extract settings):

1. the capability's own backend (`web.search_backend`, `web.extract_backend`);
2. else `web.backend`, but only for capabilities that provider supports;
3. else the first *available* provider supporting the capability, in AUTO_ORDER (keyed services
   first because they answer best, keyless ones last), then unknown third-party providers in load order.

A provider named in configuration is never silently replaced: if it is unavailable, the selection
carries the reason ("tavily: set TAVILY_API_KEY") and the tool reports it to the model.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from providers.web import WebSearchProvider

if TYPE_CHECKING:
    from gateway.config.settings import Settings

log = logging.getLogger(__name__)

Capability = Literal["search", "extract", "crawl"]
Origin = Literal["bundled", "entry point", "user"]
CAPABILITIES: tuple[str, ...] = ("search", "extract", "crawl")

#: Automatic choice order when nothing is configured. Keyed services first, keyless last.
AUTO_ORDER: tuple[str, ...] = (
    "tavily", "exa", "firecrawl", "parallel", "perplexity", "xai",
    "brave-free", "searxng", "keenable", "ddgs", "fetch",
)

#: Providers that read pages only from their own index (others answer "not indexed"): chosen
#: automatically for extract/crawl only after every general fetcher. Keenable is also keyless,
#: so without this it would take extract from `fetch` in a zero-configuration setup.
INDEX_ONLY_EXTRACT: frozenset[str] = frozenset({"keenable"})


class DuplicateProviderError(ValueError):
    """A provider name is already taken by another plugin."""


@dataclass(frozen=True)
class Selection:
    """The provider chosen for a capability, or the reason there is none (worded for the model)."""

    capability: str
    provider: WebSearchProvider | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.provider is not None


@dataclass(frozen=True)
class LoadError:
    plugin: str
    reason: str


@dataclass
class PluginInfo:
    """What `plugins list` shows about one plugin, loaded or not."""

    name: str
    origin: Origin
    location: str
    description: str = ""
    enabled: bool = True
    providers: list[str] = field(default_factory=list)
    error: str | None = None


def supports(provider: WebSearchProvider, capability: str) -> bool:
    """Ask a provider about a capability; a plugin whose answer raises supports nothing."""
    method = {
        "search": provider.supports_search,
        "extract": provider.supports_extract,
        "crawl": provider.supports_crawl,
    }[capability]
    try:
        return bool(method())
    except Exception:  # noqa: BLE001 - third-party code; a broken answer means "no"
        log.exception("provider %s failed to answer supports_%s()", provider.name, capability)
        return False


def availability(provider: WebSearchProvider) -> tuple[bool, str | None]:
    """(available, what is missing) without ever letting a plugin's exception escape."""
    try:
        if provider.is_available():
            return True, None
        return False, provider.unavailable_reason() or "not available"
    except Exception as exc:  # noqa: BLE001 - third-party code
        return False, f"is_available() failed: {exc or type(exc).__name__}"


class ProviderRegistry:
    def __init__(
        self,
        *,
        backend: str | None = None,
        search_backend: str | None = None,
        extract_backend: str | None = None,
    ) -> None:
        self.backend = backend
        self.search_backend = search_backend
        self.extract_backend = extract_backend
        self._providers: dict[str, WebSearchProvider] = {}
        self._origins: dict[str, tuple[str, Origin]] = {}
        self.load_errors: list[LoadError] = []
        self.plugins: list[PluginInfo] = []

    @classmethod
    def from_settings(cls, settings: Settings) -> ProviderRegistry:
        return cls(
            backend=settings.web_backend,
            search_backend=settings.web_search_backend,
            extract_backend=settings.web_extract_backend,
        )

    # -- filling ---------------------------------------------------------------------------
    def add(self, provider: WebSearchProvider, *, plugin: str = "", origin: Origin = "bundled") -> None:
        """Register a provider. A user plugin may replace a bundled provider; any other clash raises."""
        name = provider.name
        taken = self._origins.get(name)
        if taken is not None:
            owner, owner_origin = taken
            if not (owner_origin == "bundled" and origin == "user"):
                raise DuplicateProviderError(
                    f"web provider {name!r} is already registered by {owner_origin} plugin {owner!r}"
                )
            log.info("user plugin %r overrides bundled web provider %r", plugin, name)
        self._providers[name] = provider
        self._origins[name] = (plugin, origin)

    def record_error(self, plugin: str, reason: str) -> None:
        log.error("web plugin %s failed to load: %s", plugin, reason)
        self.load_errors.append(LoadError(plugin, reason))

    # -- looking up ------------------------------------------------------------------------
    def providers(self) -> list[WebSearchProvider]:
        """Every provider, in automatic selection order."""
        known = [self._providers[name] for name in AUTO_ORDER if name in self._providers]
        others = [p for name, p in self._providers.items() if name not in AUTO_ORDER]
        return known + others

    def get(self, name: str) -> WebSearchProvider | None:
        return self._providers.get(name)

    def origin(self, name: str) -> tuple[str, Origin] | None:
        """(plugin name, origin) of a registered provider."""
        return self._origins.get(name)

    def __len__(self) -> int:
        return len(self._providers)

    def configured_backend(self, capability: str) -> str | None:
        return self.search_backend if capability == "search" else self.extract_backend

    def select(self, capability: str) -> Selection:
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown capability {capability!r}")
        specific = self.configured_backend(capability)
        if specific:
            return self._explicit(capability, specific, self._setting_name(capability))
        if self.backend:
            provider = self._providers.get(self.backend)
            if provider is None:
                return self._explicit(capability, self.backend, "web.backend")
            if supports(provider, capability):
                return self._explicit(capability, self.backend, "web.backend")
        return self._automatic(capability)

    @staticmethod
    def _setting_name(capability: str) -> str:
        return "web.search_backend" if capability == "search" else "web.extract_backend"

    def _explicit(self, capability: str, name: str, setting: str) -> Selection:
        provider = self._providers.get(name)
        if provider is None:
            known = ", ".join(p.name for p in self.providers()) or "none"
            reason = f"{setting} names {name!r}, which is not a known web provider (known: {known})"
            return Selection(capability, reason=reason)
        if not supports(provider, capability):
            return Selection(capability, reason=f"{name} does not support {capability} (chosen by {setting})")
        available, missing = availability(provider)
        if not available:
            return Selection(capability, reason=f"{name}: {missing}")
        return Selection(capability, provider=provider)

    def _automatic(self, capability: str) -> Selection:
        hints: list[str] = []
        ordered = self.providers()
        if capability != "search":
            ordered = [p for p in ordered if p.name not in INDEX_ONLY_EXTRACT] + [
                p for p in ordered if p.name in INDEX_ONLY_EXTRACT
            ]
        for provider in ordered:
            if not supports(provider, capability):
                continue
            available, missing = availability(provider)
            if available:
                return Selection(capability, provider=provider)
            hints.append(f"{provider.name}: {missing}")
        setting = self._setting_name(capability)
        if hints:
            return Selection(
                capability,
                reason=f"no web provider for {capability} is available ({'; '.join(hints)})",
            )
        return Selection(
            capability, reason=f"no web provider supports {capability}; configure one with {setting}"
        )

    # -- shutting down ---------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close every provider; one failing to close does not keep the others open."""
        for provider in list(self._providers.values()):
            try:
                result = provider.aclose()
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001 - shutdown must go on
                log.exception("web provider %s failed to close", provider.name)


class PluginContext:
    """What a plugin's `register(ctx)` receives.

    Providers registered here are held back until `register` returns, so a plugin that fails
    half-way leaves nothing behind.
    """

    def __init__(self, settings: Settings, plugin: str, origin: Origin) -> None:
        self.settings = settings
        self.env: Mapping[str, str] = settings.env
        self.plugin = plugin
        self.origin: Origin = origin
        self.pending: list[WebSearchProvider] = []

    @property
    def config(self) -> Mapping[str, Any]:
        return self.settings.config

    def register_web_search_provider(self, provider: WebSearchProvider) -> None:
        if not isinstance(provider, WebSearchProvider):
            raise TypeError(
                f"register_web_search_provider expects a providers.web.WebSearchProvider, "
                f"got {type(provider).__name__}"
            )
        if not isinstance(provider.name, str) or not provider.name.strip():
            raise ValueError(f"{type(provider).__name__} has no name")
        self.pending.append(provider)
