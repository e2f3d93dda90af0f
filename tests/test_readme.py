"""Every command in the README is one a test runs: curl and SDK examples against a real gateway
process on a fake upstream, profile/config commands against a temporary home, and the reference table."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from gateway.config.settings import OPTIONS, OPTIONS_BY_KEY, parse_option
from tests.support.gateway_process import REPO, gateway_env, run_cli, start_gateway

README = (REPO / "README.md").read_text(encoding="utf-8")
DOCUMENTED_URL = "http://127.0.0.1:8642"
KEY = "sk-readme-test-key-0123456789"


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def shell_commands(program: str) -> list[str]:
    """Commands starting with `program` in ```sh blocks, with backslash continuations joined."""
    commands = []
    for block in code_blocks("sh"):
        for command in block.replace("\\\n", " ").splitlines():
            if command.strip().startswith(program + " "):
                commands.append(command.strip())
    return commands


def test_readme_opens_with_the_install_and_test_commands():
    indented = [line.strip() for line in README.splitlines() if line.startswith("    ")]
    assert indented[:2] == ["pip install -e . && agent-gateway serve",
                            "pip install -e '.[test]' && python -m pytest -q"]


def test_configuration_table_lists_every_option():
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([A-Z0-9_]+)` \| `([a-z0-9_.]+)` \|", README, re.M)}
    for option in OPTIONS:
        assert rows.get(option.env) == option.key, f"README table is missing {option.env} ({option.key})"


def test_librechat_snippet_is_valid_yaml_pointing_at_v1():
    (snippet,) = [block for block in code_blocks("yaml") if "librechat" in README and "custom" in block]
    endpoint = yaml.safe_load(snippet)["endpoints"]["custom"][0]
    assert endpoint["baseURL"].endswith(":8642/v1")
    assert endpoint["models"]["default"] == ["agent-gateway"]


@pytest.fixture
async def gateway(tmp_path, upstream):
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                 "API_SERVER_KEY": KEY})
    process = await start_gateway(env=env)
    yield process
    await process.stop()


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl binary")
async def test_readme_curl_examples_work_against_a_running_gateway(gateway, upstream):
    commands = shell_commands("curl")
    assert len(commands) >= 3
    env = {**os.environ, "API_SERVER_KEY": KEY}
    for command in commands:
        command = command.replace(DOCUMENTED_URL, gateway.base_url)
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", command + " --silent --show-error --fail-with-body", env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, f"{command}\n{out.decode()}\n{err.decode()}"
        body = out.decode()
        assert ("data: [DONE]" in body) if '"stream": true' in command else body.startswith("{"), body
        assert '"error": {' not in body
    assert len(upstream.requests) == len(commands) - 1  # every example but /v1/models reached the model


async def test_readme_python_sdk_example_runs(gateway):
    (example,) = [block for block in code_blocks("python") if "OpenAI(" in block]
    env = {**os.environ, "API_SERVER_KEY": KEY}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", example.replace(DOCUMENTED_URL, gateway.base_url), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == "Hello from the fake model."


async def test_readme_profile_and_config_commands_run_on_a_fresh_home(tmp_path: Path):
    commands = shell_commands("agent-gateway")
    assert any(" profile create " in c for c in commands) and any(" config set " in c for c in commands)
    env = gateway_env(tmp_path / "home")
    for command in commands:
        args = shlex.split(command)[1:]
        code, out, err = await run_cli(*args, env=env)
        assert code == 0, f"{command}\n{out}\n{err}"
        assert "Traceback" not in err
    # What the README promises the commands did.
    profiles = tmp_path / "home" / "profiles"
    assert sorted(p.name for p in profiles.iterdir()) == ["alice", "bob"]
    assert "LLM_MODEL=qwen3:8b" in (profiles / "alice" / ".env").read_text()
    assert yaml.safe_load((profiles / "bob" / "config.yaml").read_text()) == {"web": {"search_backend": "ddgs"}}


def test_the_model_routes_example_is_a_valid_models_setting():
    (snippet,) = [block for block in code_blocks("yaml") if block.startswith("models:")]
    routes = parse_option(OPTIONS_BY_KEY["models"], yaml.safe_load(snippet)["models"], "README")
    by_id = {route.id: route for route in routes.routes}
    assert by_id["qwen3"].fallbacks == ("openrouter-qwen",)
    assert by_id["openrouter-qwen"].api_key_env == "OPENROUTER_API_KEY"
    assert by_id["fast-relay"].web_tools == "off" and by_id["fast-relay"].reasoning == "hide"
