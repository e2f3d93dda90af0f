"""Every option of the gateway, in one table: env name, config.yaml key, default, parser, help.

The table drives loading (gateway/config/settings.py), validation, `config set/get/list/check` and
the `.env.example` check; each parser turns a raw value (from the environment, `.env` or YAML) into
the typed value or a `SettingsError` saying what is wrong.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gateway.config.routes import ModelRoutes, parse_models
from gateway.errors import AgentGatewayError

PROFILE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
DEFAULT_MODEL_NAME = "agent-gateway"


class SettingsError(AgentGatewayError, ValueError):
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


def _parse_optional_int(raw: Any) -> int | None:
    """A whole number, or nothing (empty: the default worked out at run time)."""
    return None if str(raw).strip() == "" else _parse_int(raw)


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


# Labels of letters, digits, hyphens and (as container names have them) underscores.
_HOST_NAME_RE = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$")


def _parse_host(raw: Any) -> str:
    """A bind address: an IP (IPv6 with or without brackets) or a host name, a trailing dot dropped."""
    text = _parse_str(raw)
    host = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if host.endswith(".") and ":" not in host:
        host = host[:-1]  # the fully qualified spelling of the same name ("localhost.")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        host = host.lower()  # names are case-insensitive; an IPv6 zone id (after %) is not
    if not _HOST_NAME_RE.match(host):
        raise ValueError(f"{text!r} is not an IP address or host name; write it like 127.0.0.1, ::1 or localhost")
    return host


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


def _parse_database_url(raw: Any) -> str:
    """A postgresql:// URL with a host and a database (the message never repeats the URL)."""
    url = _parse_str(raw)
    if not url:
        return url
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        raise ValueError("not a valid URL") from None
    if parts.scheme not in ("postgresql", "postgres") or not parts.hostname or len(parts.path) < 2:
        raise ValueError("write it like postgresql://user:password@host:5432/database")
    return url


def _parse_models(raw: Any) -> ModelRoutes | None:
    return parse_models(raw, url=_parse_http_url)


#: The fallback value that means "the other available providers, in automatic order".
AUTO_FALLBACK = ("auto",)
MAX_RESULTS_CAP = 50


def _parse_fallback(raw: Any) -> tuple[str, ...]:
    """Provider names, `auto` (the default chain) or `none` / empty / `[]` (no fallback)."""
    names = _parse_list(raw)
    if len(names) == 1 and names[0].lower() in ("none", "off", "[]"):
        return ()
    if any(name.lower() == "auto" for name in names):
        if len(names) > 1:
            raise ValueError("auto stands alone: list provider names, or auto, or none")
        return AUTO_FALLBACK
    return names


def _parse_result_count(raw: Any) -> int:
    value = _parse_int(raw)
    if value > MAX_RESULTS_CAP:
        raise ValueError(f"at most {MAX_RESULTS_CAP}")
    return value


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
    Option("host", "API_SERVER_HOST", "api_server.host", _parse_host, "127.0.0.1",
           "bind address; a non-loopback address requires API_SERVER_KEY"),
    Option("port", "API_SERVER_PORT", "api_server.port", _parse_int, 8642, "TCP port", minimum=0),
    Option("api_key", "API_SERVER_KEY", "api_server.key", _parse_str, None,
           "bearer key required on every route except /health, /v1/health, /health/ready, /openapi.json "
           "and the admin page's files (/admin, /admin/admin.css, /admin/admin.js, /admin/chart.js)",
           secret=True),
    Option("allowed_hosts", "API_SERVER_ALLOWED_HOSTS", "api_server.allowed_hosts", _parse_list, (),
           "without a key, Host names accepted besides localhost and the bind address (403 otherwise)"),
    Option("cors_origins", "API_SERVER_CORS_ORIGINS", "api_server.cors_origins", _parse_origins, (),
           "comma-separated browser origins allowed (none = no CORS; `*` = any, unsafe with a key)"),
    Option("reasoning", "API_SERVER_REASONING", "api_server.reasoning", _parse_str, "show",
           "the model's reasoning in replies (chat reasoning_content, Responses reasoning items): show or hide",
           choices=("show", "hide")),
    Option("model_name", "API_SERVER_MODEL_NAME", "api_server.model_name", _parse_str, None,
           "model id advertised on /v1/models (default: profile name or agent-gateway)"),
    Option("seal_key", "API_SERVER_SEAL_KEY", "api_server.seal_key", _parse_str, None,
           "secret the values clients hand back unread are sealed with (reasoning encrypted_content); "
           "replicas sharing a database must share it (unset: a key file made in the profile home)",
           secret=True),
    Option("max_stored_responses", "API_SERVER_MAX_STORED_RESPONSES", "api_server.max_stored_responses",
           _parse_int, 100, "LRU bound of the Responses store, per key", minimum=1),
    Option("max_store_mb", "API_SERVER_MAX_STORE_MB", "api_server.max_store_mb", _parse_int, 1024,
           "byte bound of the profile's store in MB, responses, conversations, background events and files "
           "(the largest key's oldest evicted first)", minimum=1),
    Option("database_url", "API_SERVER_DATABASE_URL", "api_server.database_url", _parse_database_url, None,
           "postgresql://user:password@host:port/db: a store shared by replicas (unset: SQLite in the profile)"),
    Option("max_concurrent_runs", "API_SERVER_MAX_CONCURRENT_RUNS", "api_server.max_concurrent_runs",
           _parse_int, 32, "agent runs at once, background ones included; beyond it 429 with Retry-After, "
           "before the body is read (a background request waits queued)", minimum=1),
    Option("max_queued_runs", "API_SERVER_MAX_QUEUED_RUNS", "api_server.max_queued_runs", _parse_int, 64,
           "background responses waiting for a run slot, across replicas; beyond it 429", minimum=0),
    Option("max_run_events_mb", "API_SERVER_MAX_RUN_EVENTS_MB", "api_server.max_run_events_mb", _parse_float,
           16.0, "megabytes of stream events a background response keeps for resumed streams; past it the "
           "response ends failed", minimum=0.001),
    Option("max_followers_per_run", "API_SERVER_MAX_FOLLOWERS_PER_RUN", "api_server.max_followers_per_run",
           _parse_int, 8, "streams following one background response at once, on each replica; beyond it 429",
           minimum=1),
    Option("usage_days", "API_SERVER_USAGE_DAYS", "api_server.usage_days", _parse_int, 90,
           "UTC days of per-key usage kept (`keys usage --days`, /v1/admin/usage); older days are deleted",
           minimum=1),
    Option("max_followers_per_key", "API_SERVER_MAX_FOLLOWERS_PER_KEY", "api_server.max_followers_per_key",
           _parse_int, 32, "streams of background responses one API key follows at once, on each replica; "
           "beyond it 429", minimum=1),
    Option("follower_stall_seconds", "API_SERVER_FOLLOWER_STALL_SECONDS", "api_server.follower_stall_seconds",
           _parse_float, 30.0, "seconds a background response's stream may stay unread (a write the client "
           "does not take) before the gateway drops it; the run goes on", minimum=0.01),
    Option("max_body_bytes", "API_SERVER_MAX_BODY_BYTES", "api_server.max_body_bytes", _parse_int,
           10_000_000, "request body limit in bytes (413 beyond it)", minimum=1),
    Option("max_file_mb", "API_SERVER_MAX_FILE_MB", "api_server.max_file_mb", _parse_float, 32.0,
           "largest file POST /v1/files takes, in megabytes (413 beyond it, before the body is read; "
           "uploads are bounded by this, not by API_SERVER_MAX_BODY_BYTES)", minimum=0.001),
    Option("body_timeout", "API_SERVER_BODY_TIMEOUT", "api_server.body_timeout", _parse_float, 30.0,
           "seconds a client may take to send its whole request body (408 beyond it)", minimum=0.01),
    Option("header_timeout", "API_SERVER_HEADER_TIMEOUT", "api_server.header_timeout", _parse_float, 10.0,
           "seconds a connection may take to send a whole request head (closed beyond it)", minimum=0.01),
    Option("max_connections", "API_SERVER_MAX_CONNECTIONS", "api_server.max_connections", _parse_int, 1000,
           "open connections at most; beyond it new ones wait to be accepted", minimum=1),
    Option("shutdown_grace", "API_SERVER_SHUTDOWN_GRACE", "api_server.shutdown_grace", _parse_float, 10.0,
           "seconds in-flight requests and background runs get to finish on SIGTERM", minimum=0),
    Option("idempotency_ttl", "API_SERVER_IDEMPOTENCY_TTL", "api_server.idempotency_ttl", _parse_float, 300.0,
           "seconds a non-streaming reply stays replayable for its Idempotency-Key (0 = not kept)", minimum=0),
    Option("keepalive_interval", "API_SERVER_KEEPALIVE_SECONDS", "api_server.keepalive_seconds", _parse_float,
           10.0, "seconds of stream silence before a `: keepalive` comment", minimum=0.01),
    Option("llm_base_url", "LLM_BASE_URL", "llm.base_url", _parse_http_url, "http://127.0.0.1:11434/v1",
           "upstream OpenAI-compatible endpoint (with /v1)"),
    Option("llm_api_key", "LLM_API_KEY", "llm.api_key", _parse_str, None, "upstream API key", secret=True),
    Option("llm_model", "LLM_MODEL", "model", _parse_str, None,
           "upstream model name (default: the first model the upstream lists)"),
    Option("llm_context_window", "LLM_CONTEXT_WINDOW", "llm.context_window", _parse_optional_int, None,
           "the model's context in tokens (default: what the upstream says, else 32768)", minimum=256),
    Option("llm_models", "LLM_MODELS", "models", _parse_models, None,
           "the model ids served: auto (every model the upstream lists), a,b,c (those), or in "
           "config.yaml a mapping of routes (id: model, base_url, api_key_env, reasoning, web_tools, "
           "context_window, fallbacks); unset: one model, the id clients send is cosmetic"),
    Option("llm_connect_timeout", "LLM_CONNECT_TIMEOUT", "llm.connect_timeout", _parse_float, 10.0,
           "seconds to connect to the upstream", minimum=0.01),
    Option("llm_timeout", "LLM_TIMEOUT", "llm.timeout", _parse_float, 120.0,
           "seconds to wait for the upstream's next byte", minimum=0.01),
    Option("llm_http_client", "LLM_HTTP_CLIENT", "llm.http_client", _parse_str, "auto",
           "the upstream's HTTP client: auto (a lean asyncio+httptools one for a plain http:// upstream "
           "without a proxy, aiohttp's for https:// and proxies), or aiohttp (aiohttp's for every upstream)",
           choices=("auto", "aiohttp")),
    Option("max_rounds", "AGENT_MAX_ROUNDS", "agent.max_rounds", _parse_int, 6,
           "tool rounds per turn before the model must answer", minimum=1),
    Option("tool_timeout", "AGENT_TOOL_TIMEOUT", "agent.tool_timeout", _parse_float, 30.0,
           "seconds one tool call may take", minimum=0.01),
    Option("mcp_allowed_hosts", "AGENT_MCP_ALLOWED_HOSTS", "agent.mcp_allowed_hosts", _parse_list, (),
           "hosts a request's mcp tool may name although they are not public (server_url)"),
    Option("run_timeout", "AGENT_RUN_TIMEOUT", "agent.run_timeout", _parse_float, 600.0,
           "seconds a whole agent run may take", minimum=0.01),
    Option("research", "AGENT_RESEARCH", "agent.research", _parse_bool, True,
           "offer the deep-research model ids (`<model>-deep-research` for the default model and each "
           "route); off removes them (a route's own `research: false` removes its one)"),
    Option("research_concurrency", "AGENT_RESEARCH_CONCURRENCY", "agent.research_concurrency", _parse_int, 4,
           "searches and page reads one deep-research run makes at once", minimum=1),
    Option("research_max_calls", "AGENT_RESEARCH_MAX_CALLS", "agent.research_max_calls", _parse_int, 40,
           "web searches and page reads one deep-research run may make (a request's max_tool_calls "
           "lowers it); then the report is written from what was read", minimum=1),
    Option("research_timeout", "AGENT_RESEARCH_TIMEOUT", "agent.research_timeout", _parse_float, 300.0,
           "seconds a deep-research run searches and reads (within AGENT_RUN_TIMEOUT, which keeps a "
           "quarter of itself for the report); then the report is written from what was read", minimum=1),
    Option("research_max_tokens", "AGENT_RESEARCH_MAX_TOKENS", "agent.research_max_tokens", _parse_int, 200_000,
           "model tokens (prompt and completion) one deep-research run may spend, its report included",
           minimum=1000),
    Option("research_max_rounds", "AGENT_RESEARCH_MAX_ROUNDS", "agent.research_max_rounds", _parse_int, 2,
           "rounds of reflection (gaps found, more searches) a deep-research run makes after its first "
           "searches", minimum=0),
    Option("tool_progress", "AGENT_TOOL_PROGRESS", "agent.tool_progress", _parse_str, "auto",
           "tool progress in chat streams: auto (openwebui for Open WebUI, recognised by its requests; "
           "inline for every other client), inline (marker lines in the text), openwebui (Open WebUI's "
           "status, source and reasoning events; Open WebUI only) or off",
           choices=("auto", "inline", "openwebui", "off")),
    Option("system_prompt", "AGENT_SYSTEM_PROMPT", "agent.system_prompt", _parse_str, None,
           "replaces the agent's built-in system prompt"),
    Option("web_tools", "API_SERVER_WEB_TOOLS", "api_server.web_tools", _parse_str, "always",
           "when the agent offers its web tools: always, on_request (only to requests that ask "
           "for web search: a hosted web_search tool or web_search_options), or off (a plain relay)",
           choices=("always", "on_request", "off")),
    Option("client_web_tools", "AGENT_CLIENT_WEB_TOOLS", "agent.client_web_tools", _parse_str, "drop",
           "a client's own web tools (Open WebUI's search_web and fetch_url, and the like) while the "
           "gateway's web search is on offer: drop (left out of what the model is offered) or keep",
           choices=("drop", "keep")),
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
    # -- web tool resilience (issue 20): fallback chains, cool-down, result cache, result cap ---
    Option("web_search_fallback", "WEB_SEARCH_FALLBACK", "web.search_fallback", _parse_fallback, AUTO_FALLBACK,
           "providers tried in order when the search provider fails (auto = the other available "
           "ones in automatic order; none = no fallback)"),
    Option("web_extract_fallback", "WEB_EXTRACT_FALLBACK", "web.extract_fallback", _parse_fallback, AUTO_FALLBACK,
           "providers tried in order when the extract provider fails (auto or none, as above)"),
    Option("web_cooldown", "WEB_COOLDOWN", "web.cooldown", _parse_float, 60.0,
           "seconds a provider is skipped after 3 failures in a row (a 429's Retry-After is always "
           "honoured; 0 = Retry-After only)", minimum=0),
    Option("web_cache_ttl", "WEB_CACHE_TTL", "web.cache_ttl", _parse_float, 300.0,
           "seconds a search or extract result is reused for the same call (0 = no cache)", minimum=0),
    Option("web_max_results", "WEB_MAX_RESULTS", "web.max_results", _parse_result_count, 10,
           "most results one web_search returns, whatever the model asks (1-50)", minimum=1),
    Option("plugins_enabled", "PLUGINS_ENABLED", "plugins.enabled", _parse_list, (),
           "user plugins (in <home>/plugins/web/) to load"),
    # operability (issue 21): metrics route and log line format
    Option("metrics_enabled", "API_SERVER_METRICS", "api_server.metrics", _parse_bool, True,
           "serve Prometheus metrics on GET /metrics (behind API_SERVER_KEY); false = no route (404)"),
    Option("metrics_key", "API_SERVER_METRICS_KEY", "api_server.metrics_key", _parse_str, None,
           "bearer key that scrapes /metrics with the per-key series (key names and their usage); any other "
           "key gets the page without them", secret=True),
    Option("log_format", "API_SERVER_LOG_FORMAT", "api_server.log_format", _parse_str, "text",
           "server log lines: text, or json (one JSON object per line, for log shippers)",
           choices=("text", "json")),
)

OPTIONS_BY_ENV = {o.env: o for o in OPTIONS if o.env}
OPTIONS_BY_KEY = {o.key: o for o in OPTIONS if o.key}
