"""The real command-line clients of tests/clients/, pinned, installed once per machine into a cache
that outlives the checkout (as scripts/real_upstream_setup caches its wheel).

`$AGENT_GATEWAY_CLIENT_CACHE` (default /var/cache/agent-gateway/clients, else
~/.cache/agent-gateway-clients when that is not writable) holds one folder per client and version:
Codex CLI from npm (`@openai/codex` with its platform package, which carries the binary), `llm`
(whose own OpenAI models talk the Responses API with `responses: true`, where it printed streamed
reasoning twice; the llm-openai-plugin needs no install for that and prints no reasoning at all)
and `aider-chat` (heavy: a venv of its own), each from its registry's ordinary client. A
folder is used once its `.installed` marker exists (written last, so an interrupted install is
redone). A client that cannot be installed (no registry, no npm) skips its tests with the reason.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Bump a pin here (one place) to test another release; the cache keeps one folder per version.
CODEX_VERSION = "0.171.0"
LLM_PINS = ("llm==0.36",)
AIDER_PINS = ("aider-chat==0.86.2",)

_INSTALL_TIMEOUT = 1200


def cache_root() -> Path:
    configured = os.environ.get("AGENT_GATEWAY_CLIENT_CACHE")
    if configured:
        return Path(configured).expanduser()
    system = Path("/var/cache/agent-gateway/clients")
    try:
        system.mkdir(parents=True, exist_ok=True)
        if os.access(system, os.W_OK):
            return system
    except OSError:
        pass
    return Path("~/.cache/agent-gateway-clients").expanduser()


@dataclass(frozen=True)
class Installed:
    folder: Path
    executable: Path


def _install(folder: Path, executable: Path, steps: list[list[str]], what: str) -> Installed:
    done = folder / ".installed"
    if not done.exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        # one installer at a time per client (two test sessions on one machine share the cache)
        with (folder.parent / f".{folder.name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                _run_steps(folder, steps, what)
                done.write_text("ok\n")
    if not executable.exists():
        pytest.skip(f"{what} was installed but {executable} is missing")
    return Installed(folder, executable)


def _run_steps(folder: Path, steps: list[list[str]], what: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for step in steps:
        try:
            subprocess.run(step, cwd=folder, check=True, timeout=_INSTALL_TIMEOUT, capture_output=True)
        except (OSError, subprocess.SubprocessError) as exc:
            output = getattr(exc, "stderr", b"") or b""
            reason = output.decode(errors="replace").strip().splitlines()[-3:]
            pytest.skip(f"{what} could not be installed ({' '.join(step[:3])} ...): {exc}; {reason}")


def codex() -> Installed:
    """Codex CLI's native binary (what `codex` runs through its Node launcher)."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not on this machine: Codex CLI comes from npm")
    folder = cache_root() / f"codex-{CODEX_VERSION}"
    install = ["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--loglevel=error",
               f"@openai/codex@{CODEX_VERSION}"]
    _install(folder, folder / "node_modules/@openai/codex/bin/codex.js", [install],
             f"Codex CLI {CODEX_VERSION}")
    binaries = sorted(folder.glob("node_modules/@openai/codex-*/vendor/*/bin/codex"))
    if not binaries:
        pytest.skip(f"Codex CLI {CODEX_VERSION} has no binary for this platform in its npm packages")
    return Installed(folder, binaries[0])


def _venv(name: str, pins: tuple[str, ...], command: str, what: str) -> Installed:
    folder = cache_root() / name
    steps = [[sys.executable, "-m", "venv", str(folder)],
             [str(folder / "bin/python"), "-m", "pip", "install", "-q", *pins]]
    return _install(folder, folder / "bin" / command, steps, what)


def llm() -> Installed:
    version = "-".join(pin.split("==")[1] for pin in LLM_PINS)
    return _venv(f"llm-{version}", LLM_PINS, "llm", " and ".join(LLM_PINS))


def aider() -> Installed:
    return _venv(f"aider-{AIDER_PINS[0].split('==')[1]}", AIDER_PINS, "aider", AIDER_PINS[0])
