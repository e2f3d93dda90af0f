"""The CLI's web commands: `agent-gateway tools [--check [NAME...]]` and `agent-gateway plugins
list|enable|disable NAME`. The live check itself is gateway/cli/web_check.py.

Pure functions returning text (and an exit code); the CLI module wires them into argparse.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gateway.agent.web.fallback import chain_report
from gateway.cli.commands import help_line
from gateway.cli.web_check import CHECK_PAGE, run_check
from gateway.config.files import get_config_value, set_config_value
from gateway.config.profiles import ProfileError, require_profile
from gateway.config.settings import Settings, default_home, load_settings
from providers.loader import bundled_plugin_dir, load_registry, user_plugin_dir
from providers.registry import CAPABILITIES, availability, supports

ENABLED_KEY = "plugins.enabled"
#: How long `tools` waits for a running gateway's status before saying none answers.
STATUS_TIMEOUT = 1.0


def tools_report(settings: Settings) -> str:
    registry = load_registry(settings.plugin_settings())
    rows: list[tuple[str, ...]] = [("PROVIDER", "SEARCH", "EXTRACT", "CRAWL", "STATUS")]
    for provider in registry.providers():
        available, missing = availability(provider)
        flags = tuple("yes" if supports(provider, c) else "-" for c in CAPABILITIES)
        origin = registry.origin(provider.name)
        source = f" [{origin[1]} plugin {origin[0]}]" if origin and origin[1] != "bundled" else ""
        status = ("available" if available else f"unavailable: {missing}") + source
        rows.append((provider.name, *flags, status))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["Web providers:"]
    for row in rows:
        cells = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4]))
        lines.append(f"  {cells}  {row[4]}")
    lines.append("")
    lines.append("Active:")
    for capability in ("search", "extract"):
        selection = registry.select(capability)
        if selection.provider is not None:
            lines.append(f"  {capability}: {selection.provider.name}")
        else:
            lines.append(f"  {capability}: none ({selection.reason})")
    chain_lines, chain_warnings = chain_report(registry, settings)
    lines.extend(f"  {line.removeprefix('web ')}" for line in chain_lines)
    lines.extend(f"  warning: {warning}" for warning in chain_warnings)
    lines.append("")
    lines.extend(running_status_lines(settings))
    if registry.load_errors:
        lines.append("")
        lines.append("Plugin load errors:")
        lines.extend(f"  {error.plugin}: {error.reason}" for error in registry.load_errors)
    return "\n".join(lines) + "\n"


def running_status_lines(settings: Settings) -> list[str]:
    """Cool-downs and cache fill live in the server process: ask the profile's running gateway."""
    import httpx  # a dependency anyway; imported here so the other commands do not pay for it

    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(settings.host, settings.host)
    base = f"http://{f'[{host}]' if ':' in host else host}:{settings.port}"
    headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    try:
        response = httpx.get(f"{base}/v1/web/status", headers=headers, timeout=STATUS_TIMEOUT)
        status = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return [f"Cool-downs: no gateway answering at {base} (they live in the running server)"]
    if not isinstance(status, dict):
        return [f"Cool-downs: the gateway at {base} answered HTTP {response.status_code} to /v1/web/status"]
    lines = [f"Cool-downs (gateway at {base}):"]
    providers = [p for p in status.get("providers", []) if isinstance(p, dict)]
    for entry in providers:
        left = entry.get("cooling_for") or 0
        state = f"skipped for {left:g} s more" if left else "tried again on the next call"
        lines.append(f"  {entry.get('provider')}: {state} ({entry.get('failures')} failure(s) in a row: "
                     f"{entry.get('reason')})")
    if not providers:
        lines.append("  none")
    cache = status.get("cache") or {}
    if cache:
        lines.append(f"  cache: {cache.get('entries')} entries, {cache.get('bytes')} bytes, "
                     f"{cache.get('hits')} hits, {cache.get('misses')} misses")
    return lines


def plugins_command(settings: Settings, action: str, name: str | None = None) -> tuple[int, str]:
    if action == "list":
        return 0, _list(settings)
    if action not in ("enable", "disable"):
        return 2, f"unknown plugins action {action!r}: use list, enable NAME or disable NAME\n"
    if not name:
        return 2, f"plugins {action} needs a plugin NAME\n"
    config_path = settings.profile_dir / "config.yaml"
    try:
        current = _enabled_in_file(config_path)
    except ValueError as exc:
        return 1, f"cannot read {config_path}: {exc}\n"
    env_note = (
        "\nnote: PLUGINS_ENABLED is set in the environment or .env and takes precedence over config.yaml\n"
        if "PLUGINS_ENABLED" in settings.env else ""
    )
    if action == "enable":
        if (bundled_plugin_dir() / name / "plugin.yaml").is_file():
            return 0, f"{name} is a bundled plugin and is always loaded\n"
        folder = user_plugin_dir(settings.plugin_settings()) / name
        if not (folder / "__init__.py").is_file():
            return 1, f"no user plugin named {name!r}: expected {folder}/__init__.py\n"
        if name in current:
            return 0, f"{name} is already enabled\n" + env_note
        set_config_value(config_path, ENABLED_KEY, [*current, name])
        return 0, f"enabled {name} in {config_path}; restart the gateway to load it\n" + env_note
    if name not in current:
        return 0, f"{name} was not enabled\n" + env_note
    set_config_value(config_path, ENABLED_KEY, [item for item in current if item != name])
    return 0, f"disabled {name} in {config_path}; restart the gateway to unload it\n" + env_note


def _enabled_in_file(path: Path) -> list[str]:
    value = get_config_value(path, ENABLED_KEY)
    if value is None:
        return []
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(value, list):
        return [str(item) for item in value]
    raise ValueError(f"{ENABLED_KEY} must be a list of plugin names")


def _list(settings: Settings) -> str:
    registry = load_registry(settings.plugin_settings())
    lines = []
    for info in registry.plugins:
        if info.error:
            state = f"error: {info.error}"
        elif not info.enabled:
            state = f"disabled (enable with: agent-gateway plugins enable {info.name})"
        else:
            state = "loaded: " + (", ".join(info.providers) or "no providers")
        lines.append(f"{info.name:<16} {info.origin:<12} {state}")
        if info.description:
            lines.append(f"{'':<16} {'':<12} {info.description}")
    return ("\n".join(lines) if lines else "no plugins found") + "\n"


def register(subparsers: argparse._SubParsersAction) -> None:
    tools = subparsers.add_parser("tools", help=help_line("tools"))
    tools.add_argument("--check", nargs="*", metavar="NAME", default=None,
                       help="run one small real search (and extract) through each configured provider, "
                            "or the NAMEd ones; exit 1 if any failed")
    tools.add_argument("--page", default=None, metavar="URL",
                       help=f"the page --check extracts (default {CHECK_PAGE})")
    tools.set_defaults(func=_run_tools)
    plugins = subparsers.add_parser("plugins", help=help_line("plugins"))
    plugins.add_argument("action", choices=("list", "enable", "disable"))
    plugins.add_argument("name", nargs="?", help="plugin name (for enable / disable)")
    plugins.set_defaults(func=_run_plugins)


def _existing_profile(args: argparse.Namespace) -> bool:
    """False (and one line on stderr) when -p names a profile that does not exist."""
    try:
        require_profile(default_home(os.environ), args.profile)
    except ProfileError as exc:
        print(f"agent-gateway: {exc}", file=sys.stderr)
        return False
    return True


def _run_tools(args: argparse.Namespace) -> int:
    if not _existing_profile(args):
        return 1
    settings = load_settings(profile=args.profile)
    if args.check is not None:
        code, text = run_check(settings, list(args.check), args.page or CHECK_PAGE)
        (sys.stderr if code == 2 else sys.stdout).write(text)
        return code
    sys.stdout.write(tools_report(settings))
    return 0


def _run_plugins(args: argparse.Namespace) -> int:
    if not _existing_profile(args):
        return 1
    code, text = plugins_command(load_settings(profile=args.profile), args.action, args.name)
    (sys.stdout if code == 0 else sys.stderr).write(text)
    return code
