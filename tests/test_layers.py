"""The layout is the design: what each layer may import, and how big a module may grow.

Each check runs in a fresh interpreter, so what one test imported cannot hide what another loads.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 400


def _modules_loaded_by(module: str) -> set[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def _py_files(*folders: str) -> list[Path]:
    return [p for folder in folders for p in sorted((REPO / folder).rglob("*.py"))]


@pytest.mark.parametrize(
    "module",
    ["gateway.wire.chat", "gateway.wire.chat_stream", "gateway.wire.chat_output", "gateway.wire.responses_request",
     "gateway.wire.responses_output", "gateway.wire.markers", "gateway.wire.context_budget",
     "gateway.wire.file_inputs"],
)
def test_a_wire_module_loads_no_server_store_or_upstream_code(module: str) -> None:
    loaded = _modules_loaded_by(module)
    forbidden = sorted(
        m
        for m in loaded
        if m.split(".")[0] in {"aiohttp", "aiosqlite", "sqlite3", "httpx", "asyncpg", "psycopg"}
        or m.startswith(("gateway.http", "gateway.store", "gateway.upstream", "gateway.cli"))
    )
    assert forbidden == [], f"{module} pulls in {forbidden[:8]}"


def _imported(path: Path) -> list[str]:
    """The absolute module names a file imports (`import a.b`, `from a.b import c`)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def test_providers_import_nothing_from_gateway() -> None:
    offenders = []
    for path in _py_files("providers", "plugins"):
        offenders += [f"{path.relative_to(REPO)}: {n}" for n in _imported(path) if n.split(".")[0] == "gateway"]
    assert offenders == []


def test_the_agent_imports_no_wire_format_nor_the_server() -> None:
    """The agent is wire-agnostic: what a wire format wrote into a client's history (markers,
    reasoning tags) is the wire's to take out (gateway/wire/frontends.py)."""
    offenders = []
    for path in _py_files("gateway/agent"):
        offenders += [f"{path.relative_to(REPO)}: {n}" for n in _imported(path)
                      if n.startswith(("gateway.wire", "gateway.http"))]
    assert offenders == []


def test_no_module_is_over_the_size_limit() -> None:
    too_long = {
        str(p.relative_to(REPO)): n
        for p in _py_files("gateway", "providers", "plugins")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert too_long == {}


def test_the_gateway_package_root_holds_only_the_layers() -> None:
    loose = sorted(p.name for p in (REPO / "gateway").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "errors.py"]


@pytest.mark.parametrize("module", ["gateway.common.json_in", "gateway.common.json_out", "gateway.common.redact"])
def test_a_common_module_loads_no_layer_of_the_gateway(module: str) -> None:
    """gateway/common/ sits below every layer, so every layer may import it."""
    loaded = _modules_loaded_by(module)
    layers = ("gateway.http", "gateway.wire", "gateway.agent", "gateway.upstream", "gateway.store", "gateway.config",
              "gateway.cli")
    assert sorted(m for m in loaded if m.startswith(layers)) == []
