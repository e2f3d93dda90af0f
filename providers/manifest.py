"""plugin.yaml: what a plugin declares about itself, read without running any of its code.

    name: mysearch                   # default: the folder's name
    kind: backend                    # the only kind so far
    description: One line for `agent-gateway plugins list`.
    provides_web_providers: [mysearch]
    requires_env: [MYSEARCH_KEY]     # the variables it cannot work without (is_available() decides)
    env:                             # every variable it reads: `config set/list/check` know them
      - name: MYSEARCH_KEY
        secret: true                 # masked by `config list`, never echoed by `config set`
        help: MySearch API key
      - {name: MYSEARCH_URL, help: "base URL (default https://api.mysearch.example)"}
    auto_order: 50                   # rank in the automatic choice: lower first; none = after all ranked
    extract_role: index-only         # general (default) | index-only: reads only pages of its own index,
                                     # so it is chosen for extract/crawl after every general fetcher

An `env` item may also be a bare name (`- MYSEARCH_REGION`). Names in `requires_env` (and the older
`optional_env`) count as declared too. The rank and role apply to every provider the plugin registers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from providers.errors import PluginLoadError

ExtractRole = Literal["general", "index-only"]
EXTRACT_ROLES: tuple[str, ...] = ("general", "index-only")
MANIFEST_NAME = "plugin.yaml"
_VARIABLE = re.compile(r"^[A-Z][A-Z0-9_]*$")


@dataclass(frozen=True)
class EnvVar:
    """One variable a plugin reads from the profile's environment."""

    name: str
    secret: bool = False
    help: str = ""


@dataclass(frozen=True)
class Manifest:
    name: str
    description: str = ""
    provides: tuple[str, ...] = ()
    requires_env: tuple[str, ...] = ()
    env: tuple[EnvVar, ...] = ()
    #: None: not ranked, chosen after every ranked provider (in load order).
    auto_order: int | None = None
    #: None: not declared (a user plugin replacing a bundled provider keeps the bundled role).
    extract_role: ExtractRole | None = None

    @property
    def variables(self) -> tuple[EnvVar, ...]:
        """`env` plus any `requires_env` name it does not list."""
        listed = {var.name for var in self.env}
        extra = tuple(EnvVar(name) for name in self.requires_env if name not in listed)
        return self.env + extra


def read_manifest(path: Path, default_name: str) -> Manifest:
    """Parse one plugin.yaml; every problem is a PluginLoadError naming the file."""
    if not path.is_file():
        raise PluginLoadError(f"missing {path.name} in {path.parent}")
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise PluginLoadError(f"cannot read {path}: {str(exc).splitlines()[0]}") from exc
    return parse_manifest(loaded, path, default_name)


def parse_manifest(data: Any, path: Path, default_name: str) -> Manifest:
    if not isinstance(data, dict):
        raise PluginLoadError(f"{path} must hold a mapping")
    kind = data.get("kind", "backend")
    if kind != "backend":
        raise PluginLoadError(f"{path}: kind {kind!r} is not supported (expected 'backend')")
    auto_order = data.get("auto_order")
    if auto_order is not None and (isinstance(auto_order, bool) or not isinstance(auto_order, int)):
        raise PluginLoadError(f"{path}: auto_order must be a whole number, got {auto_order!r}")
    role = data.get("extract_role")
    if role is not None and role not in EXTRACT_ROLES:
        raise PluginLoadError(f"{path}: extract_role must be one of {', '.join(EXTRACT_ROLES)}, got {role!r}")
    requires = _legacy_list(data.get("requires_env"))
    optional = _legacy_list(data.get("optional_env"))
    env = data.get("env")
    if env is not None and not isinstance(env, list):
        raise PluginLoadError(f"{path}: env must be a list of variables")
    return Manifest(
        name=str(data.get("name") or default_name),
        description=str(data.get("description") or ""),
        provides=_legacy_list(data.get("provides_web_providers")),
        requires_env=requires + tuple(name for name in optional if name not in requires),
        env=tuple(_variable(item, path) for item in env or []),
        auto_order=auto_order,
        extract_role=role,
    )


def _legacy_list(value: Any) -> tuple[str, ...]:
    """The fields older than `env` were never checked: keep reading what plugins wrote in them."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(str(item) for item in value)
    return ()


def _check_name(name: str, path: Path) -> None:
    if not _VARIABLE.match(name):
        raise PluginLoadError(f"{path}: env names {name!r}, which is not an UPPER_CASE variable name")


def _variable(item: Any, path: Path) -> EnvVar:
    if isinstance(item, str):
        _check_name(item, path)
        return EnvVar(item)
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise PluginLoadError(f"{path}: each env item is a variable name or a mapping with a name")
    unknown = set(item) - {"name", "secret", "help"}
    if unknown:
        raise PluginLoadError(f"{path}: env item {item['name']!r} has unknown keys {sorted(unknown)}")
    _check_name(item["name"], path)
    secret = item.get("secret", False)
    if not isinstance(secret, bool):
        raise PluginLoadError(f"{path}: env item {item['name']!r}: secret must be true or false")
    return EnvVar(item["name"], secret, str(item.get("help") or ""))
