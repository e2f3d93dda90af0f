"""Settings: one table of every option, loaded with the documented precedence.

flag > process environment > the profile's `.env` > the profile's `config.yaml` > default.

Each option has an environment name (UPPER_CASE, also accepted as a top-level key in
config.yaml) and, where it belongs in config.yaml, a dotted key (`web.search_backend`). The
table drives loading, validation, `config set/get/list` and the `.env.example` check.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

PROFILE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
DEFAULT_MODEL_NAME = "agent-gateway"


class SettingsError(ValueError):
    """A setting has an invalid value; the message names the setting."""


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _parse_int(raw: Any) -> int:
    if isinstance(raw, bool):
        raise ValueError("expected a whole number")
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError("expected a whole number") from None


def _parse_float(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError("expected a number")
    try:
        return float(str(raw).strip())
    except ValueError:
        raise ValueError("expected a number") from None


def _parse_str(raw: Any) -> str:
    return str(raw).strip()


def _parse_list(raw: Any) -> tuple[str, ...]:
    if isinstance(raw, list | tuple):
        items = [str(item).strip() for item in raw]
    else:
        items = str(raw).split(",")
    return tuple(item.strip() for item in items if item.strip())


def _parse_http_url(raw: Any) -> str:
    """An http(s) base URL with a host (its path, e.g. `/v1`, is kept)."""
    url = _parse_str(raw)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        raise ValueError(f"{url!r} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL; write it like http://127.0.0.1:11434/v1")
    return url


_ORIGIN_RE = re.compile(r"^[a-z][a-z0-9+.-]*://[^/\s]+$", re.IGNORECASE)


def _parse_origins(raw: Any) -> tuple[str, ...]:
    """Browser origins (`scheme://host[:port]`, a trailing `/` tolerated) or the explicit `*`."""
    origins = _parse_list(raw)
    for origin in origins:
        if origin != "*" and not _ORIGIN_RE.match(origin.rstrip("/")):
            raise ValueError(f"{origin!r} is not an origin; write it as scheme://host[:port], e.g. "
                             "http://localhost:3000")
    return origins


@dataclass(frozen=True)
class Option:
    attr: str
    env: str | None
    key: str | None
    parse: Callable[[Any], Any]
    default: Any
    help: str
    secret: bool = False
    minimum: float | None = None
    choices: tuple[str, ...] | None = None


OPTIONS: tuple[Option, ...] = (
    Option("enabled", "API_SERVER_ENABLED", "api_server.enabled", _parse_bool, True,
           "false makes `serve` exit with a clear message"),
    Option("host", "API_SERVER_HOST", "api_server.host", _parse_str, "127.0.0.1",
           "bind address; a non-loopback address requires API_SERVER_KEY"),
    Option("port", "API_SERVER_PORT", "api_server.port", _parse_int, 8642, "TCP port", minimum=0),
    Option("api_key", "API_SERVER_KEY", "api_server.key", _parse_str, None,
           "bearer key required on every route except /health", secret=True),
    Option("cors_origins", "API_SERVER_CORS_ORIGINS", "api_server.cors_origins", _parse_origins, (),
           "comma-separated browser origins allowed (none = no CORS; `*` = any, unsafe with a key)"),
    Option("model_name", "API_SERVER_MODEL_NAME", "api_server.model_name", _parse_str, None,
           "model id advertised on /v1/models (default: profile name or agent-gateway)"),
    Option("max_stored_responses", "API_SERVER_MAX_STORED_RESPONSES", "api_server.max_stored_responses",
           _parse_int, 100, "LRU bound of the Responses store", minimum=1),
    Option("max_concurrent_runs", "API_SERVER_MAX_CONCURRENT_RUNS", "api_server.max_concurrent_runs",
           _parse_int, 32, "agent runs at once; beyond it 429 with Retry-After", minimum=1),
    Option("max_body_bytes", "API_SERVER_MAX_BODY_BYTES", "api_server.max_body_bytes", _parse_int,
           10_000_000, "request body limit in bytes (413 beyond it)", minimum=1),
    Option("body_timeout", "API_SERVER_BODY_TIMEOUT", "api_server.body_timeout", _parse_float, 30.0,
           "seconds a client may take to send its whole request body (408 beyond it)", minimum=0.01),
    Option("shutdown_grace", "API_SERVER_SHUTDOWN_GRACE", "api_server.shutdown_grace", _parse_float, 10.0,
           "seconds in-flight requests get to finish on SIGTERM", minimum=0),
    Option("idempotency_ttl", "API_SERVER_IDEMPOTENCY_TTL", "api_server.idempotency_ttl", _parse_float, 300.0,
           "seconds a non-streaming reply stays replayable for its Idempotency-Key (0 = not kept)", minimum=0),
    Option("keepalive_interval", "API_SERVER_KEEPALIVE_SECONDS", "api_server.keepalive_seconds", _parse_float,
           10.0, "seconds of stream silence before a `: keepalive` comment", minimum=0.01),
    Option("llm_base_url", "LLM_BASE_URL", "llm.base_url", _parse_http_url, "http://127.0.0.1:11434/v1",
           "upstream OpenAI-compatible endpoint (with /v1)"),
    Option("llm_api_key", "LLM_API_KEY", "llm.api_key", _parse_str, None, "upstream API key", secret=True),
    Option("llm_model", "LLM_MODEL", "model", _parse_str, None,
           "upstream model name (default: the first model the upstream lists)"),
    Option("llm_connect_timeout", "LLM_CONNECT_TIMEOUT", "llm.connect_timeout", _parse_float, 10.0,
           "seconds to connect to the upstream", minimum=0.01),
    Option("llm_timeout", "LLM_TIMEOUT", "llm.timeout", _parse_float, 120.0,
           "seconds to wait for the upstream's next byte", minimum=0.01),
    Option("max_rounds", "AGENT_MAX_ROUNDS", "agent.max_rounds", _parse_int, 6,
           "tool rounds per turn before the model must answer", minimum=1),
    Option("tool_timeout", "AGENT_TOOL_TIMEOUT", "agent.tool_timeout", _parse_float, 30.0,
           "seconds one tool call may take", minimum=0.01),
    Option("run_timeout", "AGENT_RUN_TIMEOUT", "agent.run_timeout", _parse_float, 600.0,
           "seconds a whole agent run may take", minimum=0.01),
    Option("tool_progress", "AGENT_TOOL_PROGRESS", "agent.tool_progress", _parse_str, "inline",
           "inline tool markers in chat streams: inline or off", choices=("inline", "off")),
    Option("system_prompt", "AGENT_SYSTEM_PROMPT", "agent.system_prompt", _parse_str, None,
           "replaces the agent's built-in system prompt"),
    Option("web_backend", "WEB_BACKEND", "web.backend", _parse_str, None,
           "web provider for every capability unless overridden"),
    Option("web_search_backend", "WEB_SEARCH_BACKEND", "web.search_backend", _parse_str, None,
           "web provider for web_search"),
    Option("web_extract_backend", "WEB_EXTRACT_BACKEND", "web.extract_backend", _parse_str, None,
           "web provider for web_extract"),
    Option("allow_private_urls", "WEB_ALLOW_PRIVATE_URLS", "web.allow_private_urls", _parse_bool, False,
           "let web_extract fetch loopback and private addresses"),
    Option("max_extract_chars", "WEB_MAX_EXTRACT_CHARS", "web.max_extract_chars", _parse_int, 20_000,
           "longest page text handed to the model (head and tail kept)", minimum=200),
    Option("plugins_enabled", "PLUGINS_ENABLED", "plugins.enabled", _parse_list, (),
           "user plugins (in <home>/plugins/web/) to load"),
)

OPTIONS_BY_ENV = {o.env: o for o in OPTIONS if o.env}
OPTIONS_BY_KEY = {o.key: o for o in OPTIONS if o.key}


@dataclass(frozen=True)
class Settings:
    home: Path
    profile: str | None
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 8642
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()
    model_name: str = DEFAULT_MODEL_NAME
    max_stored_responses: int = 100
    max_concurrent_runs: int = 32
    max_body_bytes: int = 10_000_000
    body_timeout: float = 30.0
    shutdown_grace: float = 10.0
    idempotency_ttl: float = 300.0
    keepalive_interval: float = 10.0
    llm_base_url: str = "http://127.0.0.1:11434/v1"
    llm_api_key: str | None = None
    llm_model: str | None = None
    llm_connect_timeout: float = 10.0
    llm_timeout: float = 120.0
    max_rounds: int = 6
    tool_timeout: float = 30.0
    run_timeout: float = 600.0
    tool_progress: str = "inline"
    system_prompt: str | None = None
    web_backend: str | None = None
    web_search_backend: str | None = None
    web_extract_backend: str | None = None
    allow_private_urls: bool = False
    max_extract_chars: int = 20_000
    plugins_enabled: tuple[str, ...] = ()
    #: The profile's environment (process environment over `.env`), handed to plugins.
    env: Mapping[str, str] = field(default_factory=dict)
    #: The profile's config.yaml as loaded, for plugin-specific keys.
    config: Mapping[str, Any] = field(default_factory=dict)

    @property
    def profile_dir(self) -> Path:
        return profile_dir(self.home, self.profile)

    @property
    def db_path(self) -> Path:
        return self.profile_dir / "responses.db"

    @property
    def plugins_dir(self) -> Path:
        return self.profile_dir / "plugins"


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
        raise SettingsError(f"{name} has an invalid value {raw!r} (from {source}): {exc}") from exc
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
    return Settings(home=home, profile=profile, env=merged_env, config=config, **values)
