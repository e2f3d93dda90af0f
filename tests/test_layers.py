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
              "gateway.cli", "gateway.runs", "gateway.observe", "gateway.keys")
    assert sorted(m for m in loaded if m.startswith(layers)) == []


def _gateway_modules() -> dict[str, Path]:
    modules = {}
    for path in _py_files("gateway"):
        parts = path.relative_to(REPO).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


# What each package may not import (its own layer and those below it are fine): the layers as the
# README's "How it is built" draws them, from the front door down.
FORBIDDEN_ABOVE = {
    "gateway.runs": ("gateway.http", "gateway.cli"),
    "gateway.observe": ("gateway.http", "gateway.runs", "gateway.cli"),
    "gateway.keys": ("gateway.http", "gateway.runs", "gateway.observe", "gateway.cli"),
    "gateway.agent": ("gateway.http", "gateway.wire", "gateway.runs", "gateway.observe", "gateway.keys",
                      "gateway.store", "gateway.cli"),
    "gateway.store": ("gateway.http", "gateway.runs", "gateway.observe", "gateway.keys", "gateway.agent",
                      "gateway.upstream", "gateway.cli"),
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN_ABOVE))
def test_a_package_imports_nothing_from_the_layers_above_it(package: str) -> None:
    offenders = []
    for name, path in _gateway_modules().items():
        if name == package or name.startswith(package + "."):
            offenders += [f"{name}: {n}" for n in _imported(path) if n.startswith(FORBIDDEN_ABOVE[package])]
    assert offenders == []


def test_a_store_backend_imports_only_the_store_contract_and_what_is_below_the_layers() -> None:
    """store/sqlite/ and store/postgres/ implement the contract at the top of store/; neither reads
    the other, nor any layer (config, wire ...), only common/ and the error tree."""
    modules = _gateway_modules()
    contract = {name for name in modules if name.count(".") == 2 and name.startswith("gateway.store.")
                and name not in {"gateway.store.sqlite", "gateway.store.postgres"}}
    offenders = []
    for backend in ("gateway.store.sqlite", "gateway.store.postgres"):
        for name, path in modules.items():
            if not name.startswith(backend):
                continue
            for imported in _imported(path):
                allowed = (imported in contract or imported.startswith((backend, "gateway.common"))
                           or imported in {"gateway", "gateway.errors", "gateway.store"})
                if imported.startswith("gateway") and not allowed:
                    offenders.append(f"{name}: {imported}")
    assert offenders == []


def _import_graph() -> dict[str, set[str]]:
    """module -> the gateway modules it imports (at the top, in a function or for types only). A
    submodule's import of its own package's __init__ is not an edge: Python runs it first anyway."""
    modules = _gateway_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name and not name.startswith(t + ".")}
        graph[name] = edges
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return circles


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_among_the_gateway_files() -> None:
    assert _circles(_import_graph()) == []


def test_every_package_says_its_concern_first() -> None:
    """A newcomer reads the design from the folders: each package's __init__ opens with what it holds."""
    silent = [str(p.relative_to(REPO)) for p in (REPO / "gateway").rglob("__init__.py")
              if ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) is None]
    assert silent == []
