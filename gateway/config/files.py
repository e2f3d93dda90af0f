"""Edit a profile's `.env` and `config.yaml` in place, keeping everything else in them.

`.env` edits keep other lines (comments included) untouched and leave the file readable by its
owner only (it holds keys). `config.yaml` edits keep other keys; YAML comments are not preserved
(PyYAML drops them). Writes go through a temporary file and a rename, so a crash never leaves half a file.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml

from gateway.common.private import private_dir

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_line_key(line: str) -> str | None:
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    if stripped.startswith("export "):
        stripped = stripped[len("export "):].lstrip()
    name, sep, _ = stripped.partition("=")
    return name.strip() if sep else None


def _quote_env(value: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError("a .env value cannot span lines")
    if value and not re.search(r"[\s#'\"]", value):
        return value
    if '"' not in value:
        return f'"{value}"'
    if "'" not in value:
        return f"'{value}'"
    raise ValueError("a .env value cannot contain both single and double quotes")


def _write(path: Path, text: str, mode: int | None) -> None:
    private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        elif path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def set_env_value(path: Path, key: str, value: str) -> None:
    """Set KEY=value in a .env file: replace the first KEY line, drop later duplicates, or append."""
    if not _ENV_KEY.match(key):
        raise ValueError(f"{key!r} is not a valid environment variable name")
    new_line = f"{key}={_quote_env(str(value))}"
    out: list[str] = []
    placed = False
    for line in _read_lines(path):
        if _env_line_key(line) == key:
            if not placed:
                out.append(new_line)
                placed = True
            continue
        out.append(line)
    if not placed:
        out.append(new_line)
    _write(path, "\n".join(out) + "\n", 0o600)


def unset_env_value(path: Path, key: str) -> bool:
    """Remove every KEY line; returns whether there was one."""
    lines = _read_lines(path)
    kept = [line for line in lines if _env_line_key(line) != key]
    if len(kept) == len(lines):
        return False
    _write(path, "\n".join(kept) + ("\n" if kept else ""), 0o600)
    return True


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} must hold a mapping at the top level")
    return loaded


def _dump_yaml(path: Path, data: dict[str, Any]) -> None:
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False) if data else ""
    _write(path, text, None)


def get_config_value(path: Path, dotted: str) -> Any:
    node: Any = _read_yaml(path)
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def set_config_value(path: Path, dotted: str, value: Any) -> None:
    """Set `a.b.c: value` in a YAML file, creating the file and intermediate mappings as needed."""
    parts = [p for p in dotted.split(".")]
    if not all(parts):
        raise ValueError(f"{dotted!r} is not a valid dotted key")
    data = _read_yaml(path)
    node = data
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(parts[: depth + 1])
            raise ValueError(f"{where} in {path} holds a value, not a section; cannot set {dotted}")
        node = child
    node[parts[-1]] = value
    _dump_yaml(path, data)


def unset_config_value(path: Path, dotted: str) -> bool:
    """Remove a dotted key (and sections it leaves empty); returns whether it was there."""
    parts = dotted.split(".")
    data = _read_yaml(path)
    trail: list[tuple[dict[str, Any], str]] = []
    node: Any = data
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return False
        trail.append((node, part))
        node = node[part]
    parent, last = trail.pop()
    del parent[last]
    while trail:
        parent, key = trail.pop()
        if parent[key] == {}:
            del parent[key]
        else:
            break
    _dump_yaml(path, data)
    return True
