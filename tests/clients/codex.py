"""Codex CLI as a user runs it against the gateway: a plain `config.toml` provider block (no feature
flags) in a temp CODEX_HOME, `codex exec` (non-interactive) in a temp project folder.

The fake model answers what Codex's requests call for (tests/clients/model_script.py); Codex
executes the tools the model calls (shell commands, `apply_patch`, `view_image`) on its own side.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.clients.conftest import Ran, Stack, client_env
from tests.conftest import API_KEY
from tests.support import client_installs

#: The variable Codex reads the key from (`env_key`); the gateway's key, never written to a file.
KEY_VARIABLE = "AGENT_GATEWAY_KEY"


def config_toml(base_url: str, *, model: str = "agent-gateway", extra: str = "") -> str:
    """The README's working config: one provider block, nothing else but the model."""
    return f'''model = "{model}"
model_provider = "agent-gateway"
{extra}
[model_providers.agent-gateway]
name = "agent-gateway"
base_url = "{base_url}"
env_key = "{KEY_VARIABLE}"
wire_api = "responses"
'''


@dataclass
class Codex:
    binary: Path
    stack: Stack
    home: Path  # CODEX_HOME
    project: Path  # the folder Codex works in

    def configure(self, **kw: Any) -> None:
        (self.home / "config.toml").write_text(config_toml(self.stack.url, **kw))

    async def exec(self, *args: str, timeout: float = 120) -> Ran:
        """`codex exec ARGS` with the sandbox off (the test folder is the sandbox: Codex's own one
        needs user namespaces a CI container may not have) and no git repository required."""
        argv = [str(self.binary), "exec", "--skip-git-repo-check", "--color", "never",
                "--dangerously-bypass-approvals-and-sandbox", *args]
        env = client_env(self.home.parent, {"CODEX_HOME": str(self.home), KEY_VARIABLE: API_KEY,
                                            "RUST_LOG": "warn"})
        return await self.stack.run(argv, env=env, cwd=self.project, timeout=timeout)


def make_codex(stack: Stack) -> Codex:
    installed = client_installs.codex()
    home = stack.home / "codex-home"
    project = stack.home / "project"
    home.mkdir()
    project.mkdir()
    codex = Codex(installed.executable, stack, home, project)
    codex.configure()
    return codex
