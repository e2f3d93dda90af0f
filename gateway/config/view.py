"""What a profile's configuration says, where each value comes from, and what `serve` would do with it.

Read-only: the `config list`, `get` and `check` commands print what these functions return. The
precedence mirrors `load_settings` (process environment > `.env` > `config.yaml` > default); values
shown as effective come from `load_settings` itself wherever the files load.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.common.redact import redact_url
from gateway.config.envvars import (
    is_secret_name,
    known_names,
    mask,
    nearest,
    plugin_variables,
)
from gateway.config.settings import (
    OPTIONS,
    OPTIONS_BY_ENV,
    OPTIONS_BY_KEY,
    Option,
    Settings,
    load_settings,
    lookup_dotted,
    read_config_yaml,
    read_dotenv,
)


@dataclass(frozen=True)
class Entry:
    name: str
    value: str
    source: str  # environment | .env | config.yaml | default


@dataclass(frozen=True)
class ProfileFiles:
    directory: Path
    environ: Mapping[str, str]
    dotenv: dict[str, str]
    config: dict[str, Any]

    @classmethod
    def read(cls, directory: Path, environ: Mapping[str, str]) -> ProfileFiles:
        return cls(directory, environ, read_dotenv(directory / ".env"), read_config_yaml(directory / "config.yaml"))


def display_name(option: Option) -> str:
    return option.env or option.key or option.attr


def find_option(name: str) -> Option | None:
    return OPTIONS_BY_ENV.get(name) or OPTIONS_BY_KEY.get(name)


def format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def shown(name: str, value: str, secret: bool, reveal: bool = False) -> str:
    if not value or reveal:
        return value
    if not (secret or is_secret_name(name)):
        # http://user:PASSWORD@host/v1, postgresql://host/db?password=PASSWORD, ...
        return redact_url(value) if "@" in value or "://" in value else value
    return mask(value)


def option_raw(option: Option, files: ProfileFiles) -> tuple[Any, str]:
    """(raw value, source) for one option, in load_settings' order."""
    if option.env and option.env in files.environ:
        return files.environ[option.env], "environment"
    if option.env and option.env in files.dotenv:
        return files.dotenv[option.env], ".env"
    from_yaml = lookup_dotted(files.config, option.key) if option.key else None
    if from_yaml is None and option.env:
        from_yaml = files.config.get(option.env)
    if from_yaml is not None:
        return from_yaml, "config.yaml"
    return option.default, "default"


def _leaves(node: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and dotted not in OPTIONS_BY_KEY:  # `models:` is one value
            yield from _leaves(value, dotted + ".")
        else:
            yield dotted, value


def entries(files: ProfileFiles, settings: Settings | None, reveal: bool = False) -> list[Entry]:
    """Every option (effective value and source), then the other variables and keys the profile sets."""
    rows: list[Entry] = []
    for option in OPTIONS:
        raw, source = option_raw(option, files)
        value = getattr(settings, option.attr) if settings is not None else raw
        if option.attr == "model_name" and source == "default" and settings is None:
            value = "(profile name or agent-gateway)"
        name = display_name(option)
        rows.append(Entry(name, shown(name, format_value(value), option.secret, reveal), source))
    # Variables beyond the settings table: what the plugins declare (provider keys and URLs), and
    # whatever else the profile's .env sets.
    declared = plugin_variables(files.directory)
    extra = {name for name in files.dotenv if name not in OPTIONS_BY_ENV}
    extra |= {name for name in declared if name in files.environ}
    for name in sorted(extra):
        source = "environment" if name in files.environ else ".env"
        value = files.environ.get(name, files.dotenv.get(name, ""))
        secret = name in declared and declared[name].secret
        rows.append(Entry(name, shown(name, value, secret, reveal), source))
    option_env_names = set(OPTIONS_BY_ENV)
    for dotted, value in _leaves(files.config):
        if dotted in OPTIONS_BY_KEY or dotted in option_env_names:
            continue
        rows.append(Entry(dotted, shown(dotted, format_value(value), False, reveal), "config.yaml"))
    return rows


def unknown_names(files: ProfileFiles) -> list[str]:
    """Warnings for names in the profile's files that look like typos of known ones."""
    warnings = []
    known = known_names(plugin_variables(files.directory))
    for name in files.dotenv:
        if name not in known:
            hint = nearest(name, known)
            suffix = f"; did you mean {hint}?" if hint else ""
            warnings.append(f"{name} in .env is not a variable agent-gateway knows{suffix}")
    for dotted, _ in _leaves(files.config):
        if dotted in OPTIONS_BY_KEY or dotted in OPTIONS_BY_ENV:
            continue
        # Plugins may read their own config keys: only a near miss of a known key is worth a word.
        hint = nearest(dotted, OPTIONS_BY_KEY)
        if hint:
            warnings.append(f"{dotted} in config.yaml is not a setting agent-gateway knows; did you mean {hint}?")
    return warnings


# -- check -------------------------------------------------------------------------------------
@dataclass
class CheckReport:
    lines: list[str]
    warnings: list[str]
    errors: list[str]

    @property
    def ok(self) -> bool:
        return not self.errors


def web_provider_lines(settings: Settings) -> tuple[list[str], list[str]]:
    """Which provider serves search and extract; skipped quietly in a build without the registry."""
    try:
        from providers.loader import load_registry
        from providers.registry import availability
    except ImportError:
        return ["web providers: (provider registry not installed)"], []
    registry = load_registry(settings.plugin_settings())
    lines, warnings = [], []
    try:
        for capability in ("search", "extract"):
            selection = registry.select(capability)
            if selection.provider is not None:
                lines.append(f"web {capability}: {selection.provider.name}")
            else:
                lines.append(f"web {capability}: none")
                warnings.append(f"no web {capability}: {selection.reason}")
        from gateway.agent.web.fallback import chain_report

        chain_lines, chain_warnings = chain_report(registry, settings)
        lines.extend(chain_lines)
        warnings.extend(chain_warnings)
        warnings.extend(f"web plugin {error.plugin} failed to load: {error.reason}" for error in registry.load_errors)
        # A key that passes these checks can still be wrong (or out of credit) at the service.
        lines.append("web check: after adding a key, run `agent-gateway tools --check` (one real search "
                     "per configured provider)")
        builtin = registry.get("fetch")  # needs no settings: unavailable means the install is broken
        if builtin is not None:
            available, missing = availability(builtin)
            if not available:
                warnings.append(f"the built-in page reader fetch cannot run: {missing}")
    finally:
        asyncio.run(registry.aclose())
    return lines, warnings


def check(settings: Settings, files: ProfileFiles) -> CheckReport:
    from gateway.cli.serve import is_loopback, probe_bind  # the same guard and bind serve applies

    report = CheckReport([], unknown_names(files), [])
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    profile = settings.profile or "default"
    report.lines.append(f"profile: {profile} ({settings.profile_dir})")
    report.lines.append(f"data: {settings.db_path}")
    report.lines.append(f"listen: http://{host}:{settings.port}/v1")
    report.lines.append(f"model id: {settings.model_name}")
    report.lines.append("auth: " + ("on (API_SERVER_KEY is set)" if settings.api_key else "off (no API_SERVER_KEY)"))
    report.lines.append("cors: " + (", ".join(settings.cors_origins) if settings.cors_origins else "off"))
    report.lines.append(f"upstream: {redact_url(settings.llm_base_url)} (model "
                        f"{settings.llm_model or 'the first one the upstream lists'}"
                        f"{', with a key' if settings.llm_api_key else ''})")
    if settings.llm_models is not None:
        from gateway.upstream.route_report import probe_report  # the routes' upstreams, asked as serve asks them

        lines, warnings = asyncio.run(probe_report(settings))
        report.lines.extend(lines)
        report.warnings.extend(warnings)
    try:
        lines, warnings = web_provider_lines(settings)
    except Exception as exc:  # noqa: BLE001 - check reports, it does not crash on a broken plugin
        lines, warnings = ["web providers: unknown"], [f"web providers could not be loaded: {exc}"]
    report.lines.extend(lines)
    report.warnings.extend(warnings)
    if settings.mcp_servers:
        from gateway.cli.mcp_check import probe  # connects as serve would: the MCP code loads only here

        report.lines.append("mcp servers (tools listed live):")
        for found in asyncio.run(probe(settings.mcp_servers)):
            report.lines.extend(line.removeprefix("  ") for line in found.lines(with_tools=False))
            if not found.ok:  # serve still starts: the server is left out of turns until it answers
                report.warnings.append(f"the MCP server {found.label} did not answer: {found.error}")

    if not settings.enabled:
        report.warnings.append("API_SERVER_ENABLED is false: serve would exit without starting")
    if not is_loopback(settings.host) and not settings.api_key:
        report.errors.append(f"serve would refuse to listen on {settings.host} without API_SERVER_KEY")
    elif not settings.api_key:
        report.warnings.append("no API_SERVER_KEY: anyone on this machine can use the gateway")
    if "*" in settings.cors_origins:
        report.warnings.append("API_SERVER_CORS_ORIGINS allows every web page ('*')")
    if settings.allow_private_urls:
        report.warnings.append("WEB_ALLOW_PRIVATE_URLS is true: the model can make the gateway fetch "
                               "internal addresses")
    problem = probe_bind(settings.host, settings.port)
    if problem:
        report.errors.append(problem)
    return report


def load_for_check(home: Path, profile: str | None, environ: Mapping[str, str]) -> tuple[Settings, ProfileFiles]:
    """Settings and the raw files; SettingsError names the first bad value."""
    settings = load_settings(home, profile, environ=environ)
    return settings, ProfileFiles.read(settings.profile_dir, environ)

