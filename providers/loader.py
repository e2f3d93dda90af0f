"""Plugin discovery: bundled folders, pip entry points and opt-in user folders, in that order.

    bundled     plugins/web/<dir>/                 always loaded, imported as plugins.web.<dir>
    entry point group "agent_gateway.plugins"      pip packages; the entry point is a module with
                                                   register(ctx) or the register callable itself
    user        <profile>/plugins/web/<name>/      only when <name> is in plugins.enabled; imported
                                                   by file path under a unique module name

A folder plugin has `plugin.yaml` (see providers/manifest.py: name, variables, automatic-choice
rank) and an `__init__.py` defining `register(ctx)`. An entry-point plugin may ship a plugin.yaml in
the package holding its entry point; without one it declares no variables and is ranked last. A
plugin that fails to load is logged and recorded in `registry.load_errors`; the others keep
working. Called by the app factory and the CLI, never at import time: the loader reads only a
`PluginSettings`, which the gateway builds from its own settings.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import sys
import types
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from providers.entry_points import entry_points
from providers.errors import PluginLoadError as PluginLoadError  # its home before errors.py
from providers.manifest import MANIFEST_NAME, Manifest, read_manifest
from providers.plugin_settings import PluginSettings
from providers.registry import DuplicateProviderError, Origin, PluginContext, PluginInfo, ProviderRegistry

if TYPE_CHECKING:
    import importlib.metadata

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "agent_gateway.plugins"
BUNDLED_PACKAGE = "plugins.web"


def load_registry(settings: PluginSettings) -> ProviderRegistry:
    registry = ProviderRegistry.from_settings(settings)
    _load_bundled(registry, settings)
    _load_entry_points(registry, settings)
    _load_user(registry, settings)
    return registry


def plugin_manifests(plugins_dir: Path | None = None) -> list[Manifest]:
    """What every plugin declares, read without importing any plugin: the bundled ones, each folder
    in `<plugins_dir>/web/` (enabled or not: `config set` may come before `plugins enable`) and each
    installed entry-point plugin that ships a plugin.yaml. An unreadable manifest is skipped here;
    loading the plugin reports it."""
    found: list[tuple[Path, str]] = [(folder / MANIFEST_NAME, folder.name) for folder in _bundled_folders()]
    if plugins_dir is not None and (plugins_dir / "web").is_dir():
        found.extend((folder / MANIFEST_NAME, folder.name)
                     for folder in sorted((plugins_dir / "web").iterdir()) if folder.is_dir())
    try:
        entry_points = _entry_points()
    except Exception:  # noqa: BLE001 - a broken installed distribution is reported by load_registry
        entry_points = []
    for entry_point in entry_points:
        path = entry_point_manifest(entry_point.module)
        if path is not None:
            found.append((path, entry_point.name))
    manifests = []
    for path, name in found:
        try:
            manifests.append(read_manifest(path, name))
        except PluginLoadError:
            continue
    return manifests


def entry_point_manifest(module: str) -> Path | None:
    """The plugin.yaml in the package that holds an entry point's module, found without importing it.

    `pkg.sub` looks in `pkg/sub/` when that is a package, else in `pkg/`; a lone top-level module
    has none (its folder is site-packages, nobody's own)."""
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        folder = Path(root).joinpath(*rest)
        if not folder.is_dir():
            folder = folder.parent
        if (folder / MANIFEST_NAME).is_file():
            return folder / MANIFEST_NAME
    return None


def user_plugin_dir(settings: PluginSettings) -> Path:
    return settings.plugins_dir / "web"


def bundled_plugin_dir() -> Path:
    package = importlib.import_module(BUNDLED_PACKAGE)
    return Path(next(iter(package.__path__)))


def _bundled_folders() -> list[Path]:
    return sorted(p for p in bundled_plugin_dir().iterdir() if (p / "__init__.py").is_file())


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    """Installed entry points of our group, each once; none, without importlib.metadata, when no
    distribution declares the group (providers/entry_points.py)."""
    return entry_points(ENTRY_POINT_GROUP)


# -- the three sources -------------------------------------------------------------------------
def _load_bundled(registry: ProviderRegistry, settings: PluginSettings) -> None:
    for folder in _bundled_folders():
        def importer(folder: Path = folder) -> types.ModuleType:
            return importlib.import_module(f"{BUNDLED_PACKAGE}.{folder.name}")

        _load_folder(registry, settings, folder, "bundled", importer)


def _load_user(registry: ProviderRegistry, settings: PluginSettings) -> None:
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


def _load_entry_points(registry: ProviderRegistry, settings: PluginSettings) -> None:
    try:
        entry_points = _entry_points()
    except Exception as exc:  # noqa: BLE001 - a broken installed distribution must not stop the gateway
        registry.record_error(ENTRY_POINT_GROUP, f"cannot list entry points: {exc}")
        return
    for entry_point in entry_points:
        info = PluginInfo(entry_point.name, "entry point", entry_point.value)
        try:
            path = entry_point_manifest(entry_point.module)
            if path is not None:
                info.manifest = read_manifest(path, entry_point.name)
                info.description = info.manifest.description
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
    settings: PluginSettings,
    folder: Path,
    origin: Origin,
    importer: Callable[[], types.ModuleType],
) -> None:
    info = PluginInfo(folder.name, origin, str(folder))
    try:
        manifest = read_manifest(folder / MANIFEST_NAME, folder.name)
        info.name, info.description, info.manifest = manifest.name, manifest.description, manifest
        module = importer()
        register = getattr(module, "register", None)
        if not callable(register):
            raise PluginLoadError(f"{folder}/__init__.py defines no register(ctx) function")
        _register(registry, settings, info, register)
        if set(manifest.provides) != set(info.providers):
            log.warning(
                "plugin %s declares providers %s but registered %s", info.name, list(manifest.provides),
                info.providers,
            )
    except Exception as exc:  # noqa: BLE001 - any plugin failure is reported, not raised
        _fail(registry, info, exc)
    registry.plugins.append(info)


def _register(
    registry: ProviderRegistry, settings: PluginSettings, info: PluginInfo, register: Callable[..., Any]
) -> None:
    ctx = PluginContext(settings, info.name, info.origin)
    register(ctx)
    manifest = info.manifest
    for provider in ctx.pending:
        try:
            registry.add(
                provider, plugin=info.name, origin=info.origin,
                auto_order=manifest.auto_order if manifest else None,
                index_only_extract=(manifest.extract_role == "index-only"
                                    if manifest and manifest.extract_role else None),
            )
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
