"""One exception root for the distribution, and a plugin contract that needs nothing from the server."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
import types

import gateway.errors
from providers.errors import AgentGatewayError
from tests.support.gateway_process import REPO

PACKAGES = ("gateway", "providers", "plugins")


def modules() -> list[types.ModuleType]:
    found = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        found.append(root)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if not info.name.endswith(".__main__"):  # running it starts the CLI
                found.append(importlib.import_module(info.name))
    return found


def exception_classes() -> dict[str, type[BaseException]]:
    return {
        f"{module.__name__}.{name}": cls
        for module in modules()
        for name, cls in inspect.getmembers(module, inspect.isclass)
        if cls.__module__ == module.__name__ and issubclass(cls, BaseException)
    }


def test_every_exception_class_of_the_distribution_derives_from_the_one_root():
    classes = exception_classes()
    assert len(classes) >= 20, "the walk found too few exception classes to be looking everywhere"
    strays = sorted(name for name, cls in classes.items()
                    if not issubclass(cls, AgentGatewayError))
    assert strays == [], f"derive these from AgentGatewayError (providers/errors.py): {strays}"


def test_the_error_module_draws_every_class_of_the_tree():
    doc = gateway.errors.__doc__ or ""
    missing = sorted(name for name, cls in exception_classes().items()
                     if issubclass(cls, AgentGatewayError) and f" {cls.__name__} " not in doc)
    assert missing == [], f"add these to the tree in gateway/errors.py's docstring: {missing}"


def test_the_plugin_contract_and_every_bundled_plugin_import_nothing_from_gateway():
    script = """
import importlib, pkgutil, sys
import plugins, providers
for root in (providers, plugins):
    for info in pkgutil.walk_packages(root.__path__, root.__name__ + "."):
        importlib.import_module(info.name)
print(sorted(name for name in sys.modules if name == "gateway" or name.startswith("gateway.")))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
