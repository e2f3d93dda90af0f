"""Which variables agent-gateway knows, which of them are secrets, and how secrets are shown.

Known = the settings table (gateway/settings.py OPTIONS) + every `requires_env` in the bundled
plugins' plugin.yaml files + the provider variables below (the ones `.env.example` documents; a
test keeps the two in step). `config set` warns about anything else, naming the nearest known one.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable
from pathlib import Path

import yaml

from gateway.config.settings import OPTIONS

#: Read from the process environment only (it decides where `.env` is, so it cannot live in one).
PROCESS_ONLY: tuple[str, ...] = ("AGENT_GATEWAY_HOME",)

#: Variables web providers read from the profile's environment, beyond their `requires_env`.
PROVIDER_VARIABLES: tuple[str, ...] = (
    "SEARXNG_URL", "SEARXNG_LANGUAGE", "SEARXNG_TIMEOUT",
    "BRAVE_SEARCH_API_KEY", "BRAVE_SEARCH_API_URL", "BRAVE_SEARCH_TIMEOUT",
    "TAVILY_API_KEY", "TAVILY_API_URL",
    "EXA_API_KEY", "EXA_API_URL",
    "FIRECRAWL_API_KEY", "FIRECRAWL_API_URL",
    "PARALLEL_API_KEY", "PARALLEL_API_URL",
    "PERPLEXITY_API_KEY", "PERPLEXITY_API_URL",
    "KEENABLE_API_KEY", "KEENABLE_API_URL",
    "XAI_API_KEY", "XAI_API_URL", "XAI_MODEL",
    "DDGS_REGION", "DDGS_SAFESEARCH", "DDGS_BACKEND", "DDGS_TIMEOUT",
)

_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
_BUNDLED_PACKAGE = "plugins.web"


def bundled_plugin_manifests() -> list[Path]:
    package = importlib.import_module(_BUNDLED_PACKAGE)
    manifests: list[Path] = []
    for root in package.__path__:
        manifests.extend(sorted(Path(root).glob("*/plugin.yaml")))
    return manifests


def bundled_required_env() -> set[str]:
    """Every `requires_env` of the bundled plugins; an unreadable manifest contributes nothing."""
    names: set[str] = set()
    for manifest in bundled_plugin_manifests():
        try:
            loaded = yaml.safe_load(manifest.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue
        required = loaded.get("requires_env") if isinstance(loaded, dict) else None
        if isinstance(required, list):
            names.update(str(item) for item in required)
    return names


def known_variables() -> set[str]:
    return ({o.env for o in OPTIONS if o.env} | set(PROVIDER_VARIABLES) | set(PROCESS_ONLY)
            | bundled_required_env())


def nearest(name: str, candidates: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def is_secret_name(name: str) -> bool:
    """API keys, tokens and passwords, judged by name (`API_SERVER_KEY`, `llm.api_key`, ...)."""
    upper = name.upper().replace(".", "_")
    return any(word in upper.split("_") for word in _SECRET_WORDS)


def mask(value: str) -> str:
    """`sk-...abcd` for long secrets (enough to tell two keys apart), `****` for short ones."""
    if len(value) < 16:
        return "****"
    return f"{value[:3]}...{value[-4:]}"
