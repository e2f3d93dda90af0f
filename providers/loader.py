"""Plugin discovery: bundled folders, pip entry points and opt-in user folders, in that order.

    bundled     plugins/web/<dir>/                 always loaded, imported as plugins.web.<dir>
    entry point group "agent_gateway.plugins"      pip packages; the entry point is a module with
                                                   register(ctx) or the register callable itself
    user        <profile>/plugins/web/<name>/      only when <name> is in plugins.enabled; imported
                                                   by file path under a unique module name

A folder plugin has `plugin.yaml` (`name`, `kind: backend`, `provides_web_providers`,
`requires_env`, `description`) and an `__init__.py` defining `register(ctx)`. A plugin that fails to
load is logged and recorded in `registry.load_errors`; the others keep working. Called by the app
factory and the CLI, never at import time.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import logging
import sys
import types
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gateway.config.settings import Settings
from providers.registry import DuplicateProviderError, Origin, PluginContext, PluginInfo, ProviderRegistry

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "agent_gateway.plugins"
BUNDLED_PACKAGE = "plugins.web"


class PluginLoadError(Exception):
    """A plugin could not be loaded; the message is the reason shown to the user."""


def load_registry(settings: Settings) -> ProviderRegistry:
    registry = ProviderRegistry.from_settings(settings)
    _load_bundled(registry, settings)
    _load_entry_points(registry, settings)
    _load_user(registry, settings)
    return registry


def read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / "plugin.yaml"
    if not path.is_file():
        raise PluginLoadError(f"missing {path.name} in {folder}")
    try:
        manifest = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise PluginLoadError(f"cannot read {path}: {str(exc).splitlines()[0]}") from exc
    if not isinstance(manifest, dict):
        raise PluginLoadError(f"{path} must hold a mapping")
    kind = manifest.get("kind", "backend")
    if kind != "backend":
        raise PluginLoadError(f"{path}: kind {kind!r} is not supported (expected 'backend')")
    return manifest


def user_plugin_dir(settings: Settings) -> Path:
    return settings.plugins_dir / "web"


def bundled_plugin_dir() -> Path:
    package = importlib.import_module(BUNDLED_PACKAGE)
    return Path(next(iter(package.__path__)))


# -- the three sources -------------------------------------------------------------------------
def _load_bundled(registry: ProviderRegistry, settings: Settings) -> None:
    for folder in sorted(p for p in bundled_plugin_dir().iterdir() if (p / "__init__.py").is_file()):
        def importer(folder: Path = folder) -> types.ModuleType:
            return importlib.import_module(f"{BUNDLED_PACKAGE}.{folder.name}")

        _load_folder(registry, settings, folder, "bundled", importer)


def _load_user(registry: ProviderRegistry, settings: Settings) -> None:
    root = user_plugin_dir(settings)
    for name in settings.plugins_enabled:
        folder = root / name
        if not (folder / "__init__.py").is_file():
            reason = f"enabled, but {folder}/__init__.py does not exist"
            registry.plugins.append(PluginInfo(name, "user", str(folder), error=reason))
            registry.record_error(name, reason)
            continue
        _load_folder(registry, settings, folder, "user", functools.partial(_import_by_path, folder))
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            if folder.is_dir() and folder.name not in settings.plugins_enabled:
                registry.plugins.append(PluginInfo(folder.name, "user", str(folder), enabled=False))


def _load_entry_points(registry: ProviderRegistry, settings: Settings) -> None:
    try:
        entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception as exc:  # noqa: BLE001 - a broken installed distribution must not stop the gateway
        registry.record_error(ENTRY_POINT_GROUP, f"cannot list entry points: {exc}")
        return
    seen: set[tuple[str, str]] = set()
    for entry_point in entry_points:
        if (entry_point.name, entry_point.value) in seen:
            continue
        seen.add((entry_point.name, entry_point.value))
        info = PluginInfo(entry_point.name, "entry point", entry_point.value)
        try:
            loaded = entry_point.load()
            register = getattr(loaded, "register", None) if isinstance(loaded, types.ModuleType) else loaded
            if not callable(register):
                raise PluginLoadError(f"entry point {entry_point.value} has no register(ctx) function")
            _register(registry, settings, info, register)
        except Exception as exc:  # noqa: BLE001 - any plugin failure is reported, not raised
            _fail(registry, info, exc)
        registry.plugins.append(info)


# -- shared steps ------------------------------------------------------------------------------
def _load_folder(
    registry: ProviderRegistry,
    settings: Settings,
    folder: Path,
    origin: Origin,
    importer: Callable[[], types.ModuleType],
) -> None:
    info = PluginInfo(folder.name, origin, str(folder))
    try:
        manifest = read_manifest(folder)
        info.name = str(manifest.get("name") or folder.name)
        info.description = str(manifest.get("description") or "")
        module = importer()
        register = getattr(module, "register", None)
        if not callable(register):
            raise PluginLoadError(f"{folder}/__init__.py defines no register(ctx) function")
        _register(registry, settings, info, register)
        declared = manifest.get("provides_web_providers") or []
        if set(declared) != set(info.providers):
            log.warning(
                "plugin %s declares providers %s but registered %s", info.name, declared, info.providers
            )
    except Exception as exc:  # noqa: BLE001 - any plugin failure is reported, not raised
        _fail(registry, info, exc)
    registry.plugins.append(info)


def _register(
    registry: ProviderRegistry, settings: Settings, info: PluginInfo, register: Callable[..., Any]
) -> None:
    ctx = PluginContext(settings, info.name, info.origin)
    register(ctx)
    for provider in ctx.pending:
        try:
            registry.add(provider, plugin=info.name, origin=info.origin)
            info.providers.append(provider.name)
        except DuplicateProviderError as exc:
            registry.record_error(info.name, str(exc))
            info.error = str(exc)


def _fail(registry: ProviderRegistry, info: PluginInfo, exc: BaseException) -> None:
    reason = str(exc) if isinstance(exc, PluginLoadError) else f"{type(exc).__name__}: {exc}"
    info.error = reason
    registry.record_error(info.name, reason)


def _import_by_path(folder: Path) -> types.ModuleType:
    """Import a user plugin folder as a package under a fresh name, so it cannot shadow real modules
    and `from .provider import X` works inside it."""
    safe = "".join(ch if ch.isalnum() else "_" for ch in folder.name)
    module_name = f"_agent_gateway_user_plugin_{safe}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(
        module_name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        raise PluginLoadError(f"cannot import {folder}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        for key in [k for k in sys.modules if k == module_name or k.startswith(module_name + ".")]:
            del sys.modules[key]
        raise
    return module
