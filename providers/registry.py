"""The provider registry: every loaded web provider by name, and which one serves each capability.

Selection for a capability ("search", "extract" or "crawl"; crawl follows the extract settings):

1. the capability's own backend (`web.search_backend`, `web.extract_backend`);
2. else `web.backend`, but only for capabilities that provider supports;
3. else the first *available* provider supporting the capability, in automatic order: by the
   `auto_order` rank its plugin.yaml declares (lower first; the bundled keyed services come first
   because they answer best, keyless ones last), then the unranked providers in load order. For
   extract and crawl, providers whose plugin declares `extract_role: index-only` (they read only pages
   of their own index) come after every general fetcher.

A provider named in configuration is never silently replaced: if it is unavailable, the selection
carries the reason ("tavily: set TAVILY_API_KEY") and the tool reports it to the model.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from providers.errors import AgentGatewayError
from providers.plugin_settings import PluginSettings
from providers.web import WebSearchProvider

if TYPE_CHECKING:
    from providers.manifest import Manifest

log = logging.getLogger(__name__)

Capability = Literal["search", "extract", "crawl"]
Origin = Literal["bundled", "entry point", "user"]
CAPABILITIES: tuple[str, ...] = ("search", "extract", "crawl")



class DuplicateProviderError(AgentGatewayError, ValueError):
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
    #: What its plugin.yaml declares (variables, rank); None without one (entry points may lack it).
    manifest: Manifest | None = None


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
        self._ranks: dict[str, int | None] = {}
        self._index_only: set[str] = set()
        self.load_errors: list[LoadError] = []
        self.plugins: list[PluginInfo] = []

    @classmethod
    def from_settings(cls, settings: PluginSettings) -> ProviderRegistry:
        return cls(
            backend=settings.web_backend,
            search_backend=settings.web_search_backend,
            extract_backend=settings.web_extract_backend,
        )

    # -- filling ---------------------------------------------------------------------------
    def add(
        self,
        provider: WebSearchProvider,
        *,
        plugin: str = "",
        origin: Origin = "bundled",
        auto_order: int | None = None,
        index_only_extract: bool | None = None,
    ) -> None:
        """Register a provider. A user plugin may replace a bundled provider (taking its place in the
        automatic order unless it declares its own); any other clash raises.

        `auto_order` and `index_only_extract` come from the plugin's plugin.yaml (`auto_order`,
        `extract_role: index-only`); None means "not declared"."""
        name = provider.name
        taken = self._origins.get(name)
        if taken is not None:
            owner, owner_origin = taken
            if not (owner_origin == "bundled" and origin == "user"):
                raise DuplicateProviderError(
                    f"web provider {name!r} is already registered by {owner_origin} plugin {owner!r}"
                )
            log.info("user plugin %r overrides bundled web provider %r", plugin, name)
            auto_order = self._ranks.get(name) if auto_order is None else auto_order
            if index_only_extract is None:
                index_only_extract = name in self._index_only
        self._providers[name] = provider
        self._origins[name] = (plugin, origin)
        self._ranks[name] = auto_order
        if index_only_extract:
            self._index_only.add(name)
        else:
            self._index_only.discard(name)

    def record_error(self, plugin: str, reason: str) -> None:
        log.error("web plugin %s failed to load: %s", plugin, reason)
        self.load_errors.append(LoadError(plugin, reason))

    # -- looking up ------------------------------------------------------------------------
    def providers(self) -> list[WebSearchProvider]:
        """Every provider, in automatic selection order: ranked ones by rank, then the rest, each
        group in load order (sorting is stable)."""
        def key(name: str) -> tuple[bool, int]:
            rank = self._ranks.get(name)
            return (rank is None, rank or 0)

        return [self._providers[name] for name in sorted(self._providers, key=key)]

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

    def automatic_order(self, capability: str) -> list[WebSearchProvider]:
        """The providers supporting `capability`, available or not, in automatic selection order
        (the order the default fallback chain follows too)."""
        ordered = self.providers()
        if capability != "search":
            ordered = [p for p in ordered if p.name not in self._index_only] + [
                p for p in ordered if p.name in self._index_only
            ]
        return [p for p in ordered if supports(p, capability)]

    def _automatic(self, capability: str) -> Selection:
        hints: list[str] = []
        for provider in self.automatic_order(capability):
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

    `ctx.env` is the profile's environment, `ctx.config` its config.yaml, `ctx.settings` the
    `PluginSettings` (tool timeout, private-URL policy, home, ...). Providers registered here are
    held back until `register` returns, so a plugin that fails half-way leaves nothing behind.
    """

    def __init__(self, settings: PluginSettings, plugin: str, origin: Origin) -> None:
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
