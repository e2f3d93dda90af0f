"""Settings: one table of every option, loaded with the documented precedence.

flag > process environment > the profile's `.env` > the profile's `config.yaml` > default.

Each option has an environment name (UPPER_CASE, also accepted as a top-level key in
config.yaml) and, where it belongs in config.yaml, a dotted key (`web.search_backend`). The
table drives loading, validation, `config set/get/list` and the `.env.example` check.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gateway.config.mcp_servers import McpServerSpec, parse_mcp_servers
from gateway.config.options import (
    AUTO_FALLBACK,
    DEFAULT_MODEL_NAME,
    MAX_RESULTS_CAP,
    OPTIONS,
    OPTIONS_BY_ENV,
    OPTIONS_BY_KEY,
    PROFILE_NAME_RE,
    Option,
    SettingsError,
)
from gateway.config.routes import ModelRoutes
from providers.plugin_settings import PluginSettings

#: The options table lives in gateway/config/options.py; its names are re-exported here.
__all__ = [
    "AUTO_FALLBACK",
    "DEFAULT_MODEL_NAME",
    "MAX_RESULTS_CAP",
    "OPTIONS",
    "OPTIONS_BY_ENV",
    "OPTIONS_BY_KEY",
    "PROFILE_NAME_RE",
    "Option",
    "SettingsError",
    "Settings",
    "default_home",
    "load_settings",
    "lookup_dotted",
    "parse_option",
    "profile_dir",
    "read_config_yaml",
    "read_dotenv",
    "validate_profile_name",
]


@dataclass(frozen=True)
class Settings:
    home: Path
    profile: str | None
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 8642
    api_key: str | None = None
    metrics_key: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()
    model_name: str = DEFAULT_MODEL_NAME
    reasoning: str = "show"
    max_stored_responses: int = 100
    max_store_mb: int = 1024
    database_url: str | None = None
    seal_key: str | None = None
    max_concurrent_runs: int = 32
    max_queued_runs: int = 64
    max_run_events_mb: float = 16.0
    max_followers_per_run: int = 8
    max_followers_per_key: int = 32
    usage_days: int = 90
    follower_stall_seconds: float = 30.0
    max_body_bytes: int = 10_000_000
    max_file_mb: float = 32.0
    body_timeout: float = 30.0
    header_timeout: float = 10.0
    max_connections: int = 1000
    shutdown_grace: float = 10.0
    idempotency_ttl: float = 300.0
    keepalive_interval: float = 10.0
    llm_base_url: str = "http://127.0.0.1:11434/v1"
    llm_api_key: str | None = None
    llm_model: str | None = None
    llm_context_window: int | None = None
    llm_models: ModelRoutes | None = None
    llm_connect_timeout: float = 10.0
    llm_timeout: float = 120.0
    llm_http_client: str = "auto"
    max_rounds: int = 6
    tool_timeout: float = 30.0
    mcp_allowed_hosts: tuple[str, ...] = ()
    run_timeout: float = 600.0
    research: bool = True
    research_concurrency: int = 4
    research_max_calls: int = 40
    research_timeout: float = 300.0
    research_max_tokens: int = 200_000
    research_max_rounds: int = 2
    tool_progress: str = "auto"
    system_prompt: str | None = None
    web_tools: str = "always"
    client_web_tools: str = "drop"
    web_backend: str | None = None
    web_search_backend: str | None = None
    web_extract_backend: str | None = None
    allow_private_urls: bool = False
    max_extract_chars: int = 20_000
    web_search_fallback: tuple[str, ...] = AUTO_FALLBACK
    web_extract_fallback: tuple[str, ...] = AUTO_FALLBACK
    web_cooldown: float = 60.0
    web_cache_ttl: float = 300.0
    web_max_results: int = 10
    plugins_enabled: tuple[str, ...] = ()
    metrics_enabled: bool = True
    log_format: str = "text"
    #: The profile's environment (process environment over `.env`), handed to plugins.
    env: Mapping[str, str] = field(default_factory=dict)
    #: The profile's config.yaml as loaded, for plugin-specific keys.
    config: Mapping[str, Any] = field(default_factory=dict)
    #: `mcp_servers:` in config.yaml (gateway/config/mcp_servers.py); empty: no MCP code is loaded.
    mcp_servers: tuple[McpServerSpec, ...] = ()

    @property
    def profile_dir(self) -> Path:
        return profile_dir(self.home, self.profile)

    @property
    def db_path(self) -> Path:
        return self.profile_dir / "responses.db"

    @property
    def plugins_dir(self) -> Path:
        return self.profile_dir / "plugins"

    def plugin_settings(self) -> PluginSettings:
        """The part plugins and the plugin loader see (`ctx.settings`), never the whole of this."""
        return PluginSettings(
            home=self.home,
            profile_dir=self.profile_dir,
            profile=self.profile,
            env=self.env,
            config=self.config,
            tool_timeout=self.tool_timeout,
            allow_private_urls=self.allow_private_urls,
            max_extract_chars=self.max_extract_chars,
            plugins_enabled=self.plugins_enabled,
            web_backend=self.web_backend,
            web_search_backend=self.web_search_backend,
            web_extract_backend=self.web_extract_backend,
        )


def default_home(environ: Mapping[str, str]) -> Path:
    raw = environ.get("AGENT_GATEWAY_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".agent-gateway"


def validate_profile_name(name: str) -> str:
    if not PROFILE_NAME_RE.match(name):
        raise SettingsError(
            f"invalid profile name {name!r}: use 1-63 lowercase letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )
    return name


def profile_dir(home: Path, profile: str | None) -> Path:
    if profile is None:
        return home
    return home / "profiles" / validate_profile_name(profile)


def read_dotenv(path: Path) -> dict[str, str]:
    """Parse KEY=VALUE lines (optional `export`, quotes, comments); missing file -> {}."""
    if not path.exists():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise SettingsError(f"cannot read {path}: it is not UTF-8 text (byte {exc.start})") from exc
    values: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("export "):
            stripped = stripped[len("export "):].lstrip()
        name, sep, value = stripped.partition("=")
        name = name.strip()
        if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise SettingsError(f"{path}:{lineno}: expected KEY=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[name] = value
    return values


def read_config_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise SettingsError(f"cannot read {path}: it is not UTF-8 text (byte {exc.start})") from exc
    except yaml.YAMLError as exc:
        raise SettingsError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise SettingsError(f"{path} must hold a mapping of settings at the top level")
    return loaded


def lookup_dotted(config: Mapping[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def parse_option(option: Option, raw: Any, source: str) -> Any:
    name = option.env or option.key
    try:
        value = option.parse(raw)
    except (TypeError, ValueError) as exc:
        if isinstance(raw, Mapping | list):  # a section of config.yaml: the message names the part that is wrong
            raise SettingsError(f"{option.key or name} in {source}: {exc}") from exc
        shown = "(not shown: it may hold a password)" if option.attr == "database_url" else repr(raw)
        raise SettingsError(f"{name} has an invalid value {shown} (from {source}): {exc}") from exc
    if isinstance(value, str) and value == "" and option.default is None:
        return None
    if option.minimum is not None and isinstance(value, int | float) and value < option.minimum:
        raise SettingsError(f"{name} must be at least {option.minimum:g}, got {raw!r} (from {source})")
    if option.choices and value not in option.choices:
        raise SettingsError(f"{name} must be one of {', '.join(option.choices)}, got {raw!r} (from {source})")
    if option.attr == "port" and not 0 <= value <= 65535:
        raise SettingsError(f"{name} must be a port number 0-65535, got {raw!r} (from {source})")
    return value


def load_settings(
    home: Path | None = None,
    profile: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Load settings for a profile. `overrides` maps option attrs (e.g. "port") to flag values."""
    process_env = dict(os.environ if environ is None else environ)
    home = home if home is not None else default_home(process_env)
    directory = profile_dir(home, profile)
    config = read_config_yaml(directory / "config.yaml")
    dotenv = read_dotenv(directory / ".env")
    merged_env = {**dotenv, **process_env}
    overrides = dict(overrides or {})

    values: dict[str, Any] = {}
    for option in OPTIONS:
        raw: Any = None
        source = "default"
        if option.attr in overrides and overrides[option.attr] is not None:
            raw, source = overrides[option.attr], "command line"
        elif option.env and option.env in process_env:
            raw, source = process_env[option.env], "environment"
        elif option.env and option.env in dotenv:
            raw, source = dotenv[option.env], str(directory / ".env")
        else:
            from_yaml = lookup_dotted(config, option.key) if option.key else None
            if from_yaml is None and option.env:
                from_yaml = config.get(option.env)
            if from_yaml is not None:
                raw, source = from_yaml, str(directory / "config.yaml")
        values[option.attr] = option.default if raw is None else parse_option(option, raw, source)

    if not values["model_name"]:
        values["model_name"] = profile or DEFAULT_MODEL_NAME
    try:  # not in OPTIONS: a section with ${NAME} references to the profile's environment
        mcp_servers = parse_mcp_servers(config.get("mcp_servers"), merged_env)
    except ValueError as exc:
        raise SettingsError(f"{exc} (in {directory / 'config.yaml'})") from exc
    return Settings(home=home, profile=profile, env=merged_env, config=config, mcp_servers=mcp_servers, **values)
