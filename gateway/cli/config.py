"""`agent-gateway [-p NAME] config set KEY VALUE | get KEY | list | unset KEY | check`.

UPPER_CASE keys live in the profile's `.env`, dotted lowercase keys (`web.search_backend`) in its
`config.yaml`; the rest of each file is kept. Values of known settings are validated with the
settings table's own parser before anything is written.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gateway.cli.commands import help_line
from gateway.config import view as config_view
from gateway.config.envvars import PROCESS_ONLY, is_secret_name, known_names, nearest, plugin_variables
from gateway.config.files import set_config_value, set_env_value, unset_config_value, unset_env_value
from gateway.config.profiles import ProfileError, require_profile
from gateway.config.settings import (
    OPTIONS_BY_KEY,
    Option,
    SettingsError,
    default_home,
    load_settings,
    lookup_dotted,
    parse_option,
    read_config_yaml,
    read_dotenv,
)
from gateway.errors import AgentGatewayError

ENV_KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")
CONFIG_KEY = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")


class UsageError(AgentGatewayError):
    """A bad key or value: exit 2 with this one line."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("config", help=help_line("config"))
    actions = parser.add_subparsers(dest="config_action", metavar="ACTION", required=True)

    set_ = actions.add_parser("set", help="UPPER_CASE keys go to .env, dotted keys to config.yaml")
    set_.add_argument("key", metavar="KEY")
    set_.add_argument("value", metavar="VALUE")
    set_.set_defaults(func=run_set)

    get = actions.add_parser("get", help="print a setting's effective value")
    get.add_argument("key", metavar="KEY")
    get.add_argument("--reveal", action="store_true", help="print secrets in full")
    get.set_defaults(func=run_get)

    listing = actions.add_parser("list", help="every setting with its value and source (secrets masked)")
    listing.add_argument("--reveal", action="store_true", help="print secrets in full")
    listing.set_defaults(func=run_list)

    unset = actions.add_parser("unset", help="remove KEY from .env (UPPER_CASE) or config.yaml (dotted)")
    unset.add_argument("key", metavar="KEY")
    unset.set_defaults(func=run_unset)

    check = actions.add_parser("check", help="validate everything and say what serve would do")
    check.set_defaults(func=run_check)


def _directory(args: argparse.Namespace) -> Path:
    return require_profile(default_home(os.environ), args.profile)


def _kind(key: str) -> str:
    if ENV_KEY.match(key):
        return "env"
    if CONFIG_KEY.match(key):
        return "config"
    raise UsageError(f"{key!r} is not a key: use an UPPER_CASE variable (stored in .env) or a dotted "
                     "lowercase key such as web.search_backend (stored in config.yaml)")


def _validated(option: Option, value: str) -> Any:
    try:
        return parse_option(option, value, "command line")
    except SettingsError as exc:
        raise UsageError(str(exc).replace(" (from command line)", "")) from exc


def _yaml_value(option: Option | None, value: str) -> Any:
    """What goes into config.yaml: the setting's parsed value, or a YAML scalar for unknown keys."""
    if option is not None:
        parsed = _validated(option, value)
        if option.default is None or isinstance(option.default, str):
            return value.strip()  # text settings stay text: a model named "3.5" must not become a float
        return list(parsed) if isinstance(parsed, tuple) else parsed
    try:
        loaded = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    return loaded if isinstance(loaded, str | int | float | bool) else value


def _warn(message: str) -> None:
    print(f"agent-gateway: warning: {message}", file=sys.stderr)


def _fail(message: str, code: int) -> int:
    print(f"agent-gateway: {message}", file=sys.stderr)
    return code


def _cli_errors(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A bad key is a usage error (exit 2); a missing profile exits 1."""
    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except UsageError as exc:
            return _fail(str(exc), 2)
        except ProfileError as exc:
            return _fail(str(exc), 1)

    return run


@_cli_errors
def run_set(args: argparse.Namespace) -> int:
    key, value = args.key, args.value
    kind = _kind(key)
    directory = _directory(args)
    option = config_view.find_option(key)
    declared = plugin_variables(directory)
    if kind == "env":
        if key in PROCESS_ONLY:
            raise UsageError(f"{key} is read from the process environment only; export it in your shell instead")
        if option is not None:
            _validated(option, value)
        elif key not in known_names(declared):
            hint = nearest(key, known_names(declared))
            _warn(f"{key} is not a variable agent-gateway knows" + (f"; did you mean {hint}?" if hint else "")
                  + " (written anyway: plugins may read it)")
    else:
        stored = _yaml_value(option, value)
        if option is None and key.split(".")[0] == "models":
            stored = _route_part(directory, key, value)
        elif option is None:
            hint = nearest(key, OPTIONS_BY_KEY)
            _warn(f"{key} is not a setting agent-gateway knows" + (f"; did you mean {hint}?" if hint else "")
                  + " (written anyway: plugins may read it)")
    path = directory / (".env" if kind == "env" else "config.yaml")
    try:
        if kind == "env":
            set_env_value(path, key, value.strip())
        else:
            set_config_value(path, key, stored)
    except (ValueError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot set {key} in {path}: {str(exc).splitlines()[0]}") from exc
    secret = (option is not None and option.secret) or is_secret_name(key) or (key in declared and declared[key].secret)
    print(f"set {key} in {path}" + ("" if secret else f" = {value.strip()}"))
    _note_shadowing(key, kind, option, directory)
    return 0


def _route_part(directory: Path, key: str, value: str) -> Any:
    """`models.ID.FIELD`: what to store (text stays text: `off` is not YAML's false), once the routes
    as they would be after the write are valid."""
    parts = key.split(".")
    if len(parts) != 3:
        raise UsageError(f"{key!r}: a route's field is set as models.ID.FIELD (e.g. models.qwen3.base_url)")
    stored: Any = value.strip()
    if parts[2] in ("context_window", "vision"):
        stored = _yaml_value(None, value)
    elif parts[2] in ("fallbacks", "drop_params"):
        stored = [item.strip() for item in value.split(",") if item.strip()]
    config = read_config_yaml(directory / "config.yaml")
    routes = config.get("models")
    routes = dict(routes) if isinstance(routes, dict) else {}
    route = routes.get(parts[1])
    routes[parts[1]] = {**(route if isinstance(route, dict) else {}), parts[2]: stored}
    try:
        parse_option(OPTIONS_BY_KEY["models"], routes, "config.yaml")
    except SettingsError as exc:
        raise UsageError(f"not set: {exc}") from exc
    return stored


def _note_shadowing(key: str, kind: str, option: Option | None, directory: Path) -> None:
    """Say so when a higher-precedence source hides what was just written."""
    env_name = key if kind == "env" else (option.env if option else None)
    if env_name and env_name in os.environ:
        _warn(f"{env_name} is also set in this shell's environment, which takes precedence")
    elif kind == "config" and env_name:
        dotenv = read_dotenv(directory / ".env")
        if env_name in dotenv:
            _warn(f"{env_name} in {directory / '.env'} takes precedence over {key} in config.yaml")


@_cli_errors
def run_get(args: argparse.Namespace) -> int:
    kind = _kind(args.key)
    directory = _directory(args)
    files = config_view.ProfileFiles.read(directory, os.environ)
    option = config_view.find_option(args.key)
    if option is not None:
        settings = load_settings(default_home(os.environ), args.profile)  # SettingsError -> exit 2 in main
        value = config_view.format_value(getattr(settings, option.attr))
        secret = option.secret
    elif kind == "env":
        value = files.environ.get(args.key, files.dotenv.get(args.key, ""))
        declared = plugin_variables(directory).get(args.key)
        secret = declared is not None and declared.secret
    else:
        value = config_view.format_value(lookup_dotted(files.config, args.key))
        secret = False
    if not value:
        return _fail(f"{args.key} is not set", 1)
    print(config_view.shown(args.key, value, secret, args.reveal))
    return 0


@_cli_errors
def run_list(args: argparse.Namespace) -> int:
    directory = _directory(args)
    files = config_view.ProfileFiles.read(directory, os.environ)
    settings = None
    try:
        settings = load_settings(default_home(os.environ), args.profile)
    except SettingsError as exc:
        _warn(f"{exc} (raw values shown)")
    rows = config_view.entries(files, settings, reveal=args.reveal)
    print(f"# profile {args.profile or 'default'}: {directory}")
    width = max(len(row.name) for row in rows)
    value_width = min(max(len(row.value) for row in rows), 48)
    for row in rows:
        print(f"{row.name.ljust(width)}  {row.value.ljust(value_width)}  {row.source}")
    return 0


@_cli_errors
def run_unset(args: argparse.Namespace) -> int:
    kind = _kind(args.key)
    directory = _directory(args)
    path = directory / (".env" if kind == "env" else "config.yaml")
    try:
        removed = (unset_env_value(path, args.key) if kind == "env" else unset_config_value(path, args.key))
    except (ValueError, yaml.YAMLError) as exc:
        return _fail(f"cannot unset {args.key} in {path}: {str(exc).splitlines()[0]}", 2)
    print(f"removed {args.key} from {path}" if removed else f"{args.key} was not set in {path}")
    option = config_view.find_option(args.key)
    if kind == "env" and args.key in os.environ:
        _warn(f"{args.key} is still set in this shell's environment")
    elif option is not None and kind == "env" and option.key:
        if lookup_dotted(read_config_yaml(directory / "config.yaml"), option.key) is not None:
            _warn(f"{option.key} in config.yaml still sets it")
    return 0


def run_check(args: argparse.Namespace) -> int:
    try:
        directory = _directory(args)
    except ProfileError as exc:
        return _fail(str(exc), 1)
    try:
        settings, files = config_view.load_for_check(default_home(os.environ), args.profile, os.environ)
    except SettingsError as exc:
        print(f"error: {exc}")
        print(f"serve would refuse to start ({directory})")
        return 2
    report = config_view.check(settings, files)
    for line in report.lines:
        print(line)
    for warning in report.warnings:
        print(f"warning: {warning}")
    for error in report.errors:
        print(f"error: {error}")
    print("serve would start" if report.ok and settings.enabled else
          "serve would not start" if report.ok else "serve would refuse to start")
    return 0 if report.ok else 2
