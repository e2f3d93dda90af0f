""".env.example documents every variable the code reads, with the defaults the code really uses."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from gateway.config.envvars import PROCESS_ONLY, known_variables, plugin_variables
from gateway.config.settings import OPTIONS, load_settings
from tests.support.gateway_process import REPO

ASSIGNMENT = re.compile(r"^#?\s*([A-Z][A-Z0-9_]*)=(.*)$")
NAME = r"[\"']([A-Z][A-Z0-9]*_[A-Z0-9_]+)[\"']"
READS = (
    re.compile(r"(?:env|environ|environment)(?:\.get)?\s*[(\[]\s*" + NAME),  # env.get("X"), env["X"], os.environ
    re.compile(r"getenv\(\s*" + NAME),
    re.compile(r"\b[A-Z_]*_VAR\b\s*(?::\s*[\w\[\], ]+)?=\s*" + NAME),  # KEY_VAR = "TAVILY_API_KEY"
)
#: The interpreter's variables, set for child processes, not settings of ours.
NOT_OURS = {"PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING"}


def documented() -> dict[str, str]:
    names = {}
    for line in (REPO / ".env.example").read_text(encoding="utf-8").splitlines():
        match = ASSIGNMENT.match(line)
        if match:
            names[match.group(1)] = match.group(2)
    return names


def source_reads() -> dict[str, str]:
    """Name -> file, for reads found by scanning the source and the plugin manifests."""
    found: dict[str, str] = {}
    for folder in ("gateway", "providers", "plugins"):
        for path in sorted((REPO / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            for pattern in READS:
                for name in pattern.findall(text):
                    found.setdefault(name, str(path.relative_to(REPO)))
        for manifest in sorted((REPO / folder).rglob("plugin.yaml")):
            loaded = yaml.safe_load(manifest.read_text(encoding="utf-8")) or {}
            declared = [item["name"] if isinstance(item, dict) else item for item in loaded.get("env") or []]
            for name in [*(loaded.get("requires_env") or []), *declared]:
                found.setdefault(name, str(manifest.relative_to(REPO)))
    return {name: where for name, where in found.items() if name not in NOT_OURS}


def variables_the_code_reads() -> dict[str, str]:
    found = {o.env: "gateway/config/settings.py OPTIONS" for o in OPTIONS if o.env}
    found.update({name: "a plugin.yaml env: list" for name in plugin_variables()})
    found.update({name: "gateway/config/envvars.py" for name in PROCESS_ONLY})
    return {**source_reads(), **found}


def test_every_variable_the_code_reads_is_in_env_example():
    missing = {name: where for name, where in variables_the_code_reads().items() if name not in documented()}
    assert not missing, f"add these to .env.example: {missing}"


def test_the_scan_sees_reads_in_source_and_manifests():
    # Guard against a scan that silently finds nothing beyond the settings table.
    assert source_reads().get("AGENT_GATEWAY_HOME") == "gateway/config/settings.py"


def test_every_documented_variable_is_known_to_config_set():
    unknown = set(documented()) - known_variables()
    assert not unknown, f"config set would warn about documented variables: {sorted(unknown)}"


def test_documented_defaults_are_the_real_defaults(tmp_path: Path):
    # Uncommenting every settings line must change nothing: the shown values are the defaults.
    lines = [f"{name}={value}" for name, value in documented().items() if name != "AGENT_GATEWAY_HOME"]
    (tmp_path / ".env").write_text("\n".join(lines) + "\n")
    from_example = load_settings(tmp_path, None, environ={})
    plain = load_settings(tmp_path / "empty", None, environ={})
    for option in OPTIONS:
        assert getattr(from_example, option.attr) == getattr(plain, option.attr), option.env


def test_each_variable_is_documented_once_with_a_comment_above():
    lines = (REPO / ".env.example").read_text(encoding="utf-8").splitlines()
    names = [m.group(1) for m in map(ASSIGNMENT.match, lines) if m]
    assert len(names) == len(set(names))
    for index, line in enumerate(lines):
        if ASSIGNMENT.match(line):
            above = lines[index - 1]
            assert above.startswith("# ") and not ASSIGNMENT.match(above), f"no description above {line!r}"
