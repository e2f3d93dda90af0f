"""What a plugin may read about the gateway it runs in: `ctx.settings` in `register(ctx)`.

The gateway builds one `PluginSettings` from its own settings (`Settings.plugin_settings()`) and hands
it to the loader, so a plugin depends on this small, stable object and never on the server's
configuration class. The attribute names are those of the gateway's settings (`ctx.settings.tool_timeout`
and `ctx.settings.allow_private_urls` read the same as before).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PluginSettings:
    #: `$AGENT_GATEWAY_HOME` (default `~/.agent-gateway`).
    home: Path
    #: The profile's own folder (`home` itself for the default profile): a plugin's files go here.
    profile_dir: Path
    #: The profile's name, None for the default profile.
    profile: str | None = None
    #: The profile's environment (process environment over the profile's `.env`): read keys here.
    env: Mapping[str, str] = field(default_factory=dict)
    #: The profile's config.yaml as loaded, for a plugin's own keys.
    config: Mapping[str, Any] = field(default_factory=dict)
    #: Seconds the gateway gives one tool call (`agent.tool_timeout`) before cutting it.
    tool_timeout: float = 30.0
    #: Whether fetching loopback and private addresses is allowed (`web.allow_private_urls`).
    allow_private_urls: bool = False
    #: Longest page text the gateway hands the model (`web.max_extract_chars`); longer is cut.
    max_extract_chars: int = 20_000
    # What the loader and the registry read: the `plugins.enabled` list and the `web.*backend` choices.
    plugins_enabled: tuple[str, ...] = ()
    web_backend: str | None = None
    web_search_backend: str | None = None
    web_extract_backend: str | None = None

    @property
    def plugins_dir(self) -> Path:
        """`<profile>/plugins`; user web plugins live in its `web/` folder."""
        return self.profile_dir / "plugins"
