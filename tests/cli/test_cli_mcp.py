"""`agent-gateway mcp list|check` and `config check` with MCP servers, as real processes on a
temporary home: a real stdio server (`mcp-server-time`, PyPI), the `mcp` SDK's HTTP server, and a
server that is down; header values never printed."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.gateway_process import gateway_env, run_cli
from tests.support.mcp_servers import sdk_server, time_stdio

SECRET = "hdr-secret-0123456789"


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with sdk_server() as url:
        yield url


def write_config(home: Path, servers: dict[str, object]) -> None:
    (home / ".env").write_text("API_SERVER_PORT=0\nSEARXNG_URL=http://127.0.0.1:1\n")
    (home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": servers}))


def servers(url: str) -> dict[str, object]:
    command, args = time_stdio()
    return {"time": {"command": command, "args": args, "timeout": 30},
            "sdk": {"url": url, "headers": {"X-Api-Key": SECRET}, "require_approval": "always"}}


async def cli(home: Path, *args: str) -> tuple[int, str, str]:
    return await run_cli(*args, env=gateway_env(home, {}))


async def test_mcp_list_shows_each_server_its_tools_and_timing(tmp_path, sdk_url):
    write_config(tmp_path, servers(sdk_url))
    code, out, err = await cli(tmp_path, "mcp", "list")
    assert code == 0, out + err
    assert "time: offer all; no approval" in out and "sdk: offer all; approval always" in out
    assert "get_current_time" in out and "echo" in out and " ok " in out
    assert SECRET not in out + err


async def test_mcp_check_fails_with_exit_1_when_a_server_does_not_answer(tmp_path, sdk_url):
    write_config(tmp_path, {**servers(sdk_url), "dead": {"command": sys.executable, "args": ["-c", "pass"],
                                                          "timeout": 5}})
    code, out, _ = await cli(tmp_path, "mcp", "check")
    assert code == 1 and "dead" in out and "FAILED" in out
    code, out, _ = await cli(tmp_path, "mcp", "check", "sdk", "time")
    assert code == 0 and "dead" not in out
    code, _, err = await cli(tmp_path, "mcp", "check", "nope")
    assert code == 2 and "nope" in err


async def test_mcp_check_call_runs_one_tool(tmp_path, sdk_url):
    write_config(tmp_path, servers(sdk_url))
    code, out, err = await cli(tmp_path, "mcp", "check", "sdk", "--call", "echo", '{"text": "hello-there"}')
    assert code == 0, out + err
    assert "call ok" in out and "hello-there" in out
    code, out, _ = await cli(tmp_path, "mcp", "check", "sdk", "--call", "fail", '{"reason": "boom"}')
    assert code == 1 and "call FAILED" in out
    code, _, err = await cli(tmp_path, "mcp", "check", "--call", "echo", "[1]")
    assert code == 2 and "JSON object" in err


async def test_config_check_lists_the_mcp_servers_and_warns_for_one_that_is_down(tmp_path, sdk_url):
    write_config(tmp_path, {"sdk": {"url": sdk_url, "headers": {"X-Api-Key": SECRET}},
                            "dead": {"command": sys.executable, "args": ["-c", "pass"], "timeout": 5}})
    code, out, err = await cli(tmp_path, "config", "check")
    assert code == 0, out + err
    assert "mcp servers (tools listed live):" in out
    assert "warning: the MCP server dead did not answer" in out and "serve would start" in out
    assert SECRET not in out + err
