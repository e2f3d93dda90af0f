"""Which variables agent-gateway knows, which of them are secrets, and how secrets are shown.

Known = the settings table (gateway/config/settings.py OPTIONS) + what the plugins declare in their
plugin.yaml (`env:` and `requires_env`; providers/manifest.py): the bundled plugins, the profile's
own plugin folders and pip plugins that ship a plugin.yaml. Nothing here names a provider, so a
third-party plugin's variables are as known as a bundled one's. `config set` warns about anything
else, naming the nearest known one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path

from gateway.config.settings import OPTIONS
from providers.loader import plugin_manifests
from providers.manifest import EnvVar

#: Read from the process environment only: AGENT_GATEWAY_HOME decides where `.env` is, so it cannot
#: live in one; OpenTelemetry's SDK reads its OTEL_* variables from the process environment.
PROCESS_ONLY: tuple[str, ...] = ("AGENT_GATEWAY_HOME", "OTEL_TRACES_EXPORTER")

_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def plugin_variables(profile_dir: Path | None = None) -> dict[str, EnvVar]:
    """Every variable the plugins declare, by name, in the order they declare them (bundled first).

    With `profile_dir`, the plugin folders under `<profile_dir>/plugins/web/` count too. A name two
    plugins declare is secret if either says so."""
    found: dict[str, EnvVar] = {}
    for manifest in plugin_manifests(profile_dir / "plugins" if profile_dir is not None else None):
        for var in manifest.variables:
            seen = found.get(var.name)
            if seen is None:
                found[var.name] = var
            elif var.secret and not seen.secret:
                found[var.name] = EnvVar(var.name, True, seen.help or var.help)
    return found


def known_names(declared: Mapping[str, EnvVar]) -> set[str]:
    """The settings table's variables, the process-only ones and the given plugin declarations."""
    return {o.env for o in OPTIONS if o.env} | set(PROCESS_ONLY) | set(declared)


def known_variables(profile_dir: Path | None = None) -> set[str]:
    return known_names(plugin_variables(profile_dir))


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
