"""Every way `agent-gateway` can fail to start is one line on stderr and a non-zero exit.

Real processes: the commands run as a user runs them; the port is taken by a real socket.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.support.gateway_process import REPO, gateway_env, run_cli, start_gateway

#: TEST-NET-1 (RFC 5737): never an address of this machine, so binding it fails with EADDRNOTAVAIL.
FOREIGN_ADDRESS = "192.0.2.1"


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


async def test_serve_on_a_busy_port_says_so_in_one_line_and_exits_1(tmp_path, taken_port):
    code, out, err = await run_cli("serve", "--port", str(taken_port), env=gateway_env(tmp_path))

    assert code == 1
    line = one_line(err)
    assert line == (f"agent-gateway: port {taken_port} on 127.0.0.1 is already in use (another gateway or "
                    "profile?): stop that one, or choose another port with API_SERVER_PORT or `serve --port`")
    assert "listening" not in out


async def test_config_check_says_the_port_is_taken_and_that_serve_would_not_start(tmp_path, taken_port):
    env = gateway_env(tmp_path, {"API_SERVER_PORT": str(taken_port)})
    code, out, _ = await run_cli("config", "check", env=env)

    assert code == 2
    assert f"error: port {taken_port} on 127.0.0.1 is already in use" in out
    assert out.rstrip().endswith("serve would refuse to start")


def unprivileged_port_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text())
    except (OSError, ValueError):
        return 1024


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0 or unprivileged_port_start() <= 80,
                    reason="needs root and util-linux's setpriv to start serve without the right to bind port 80")
async def test_serve_on_a_privileged_port_without_the_right_says_permission_denied_in_one_line(tmp_path):
    # Without CAP_NET_BIND_SERVICE even root gets EACCES on port 80, as an ordinary user would.
    drop = ["setpriv", "--bounding-set", "-net_bind_service", "--inh-caps", "-net_bind_service"]
    proc = await asyncio.create_subprocess_exec(
        *drop, sys.executable, "-m", "gateway", "serve", "--port", "80", env=gateway_env(tmp_path), cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)

    assert proc.returncode == 1
    assert one_line(err.decode()) == (
        "agent-gateway: not allowed to listen on port 80 of 127.0.0.1 (permission denied; ports below 1024 "
        "need root): choose another port with API_SERVER_PORT or `serve --port`")


async def test_serve_on_an_address_of_another_machine_says_which_setting_to_change(tmp_path):
    env = gateway_env(tmp_path, {"API_SERVER_KEY": "k" * 32})
    code, _, err = await run_cli("serve", "--host", FOREIGN_ADDRESS, "--port", "0", env=env)

    assert code == 1
    line = one_line(err)
    assert line.startswith(f"agent-gateway: cannot listen on {FOREIGN_ADDRESS}: that address is not one of "
                           "this machine's; set API_SERVER_HOST")


async def test_config_check_says_an_address_of_another_machine_cannot_be_bound(tmp_path):
    env = gateway_env(tmp_path, {"API_SERVER_KEY": "k" * 32, "API_SERVER_HOST": FOREIGN_ADDRESS})
    code, out, _ = await run_cli("config", "check", env=env)

    assert code == 2
    assert f"error: cannot listen on {FOREIGN_ADDRESS}: that address is not one of this machine's" in out


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("config.yaml", b"web: [unclosed\n", "config.yaml is not valid YAML"),
        ("config.yaml", b"web:\n  backend: \xff\xfe\n", "config.yaml: it is not UTF-8 text"),
        (".env", b"LLM_MODEL=\xff\n", ".env: it is not UTF-8 text"),
        (".env", b"this is not a setting\n", ".env:1: expected KEY=VALUE"),
    ],
)
async def test_serve_with_an_unreadable_profile_file_names_the_file_in_one_line(tmp_path, name, content, expected):
    (tmp_path / name).write_bytes(content)
    code, _, err = await run_cli("serve", "--port", "0", env=gateway_env(tmp_path))

    assert code == 2
    line = one_line(err)
    assert str(tmp_path) in line and expected in line


async def test_serve_with_a_config_file_that_is_a_folder_says_it_cannot_read_it(tmp_path):
    (tmp_path / "config.yaml").mkdir()
    code, _, err = await run_cli("serve", "--port", "0", env=gateway_env(tmp_path))

    assert code == 2
    assert one_line(err) == f"agent-gateway: cannot read {tmp_path / 'config.yaml'}: Is a directory"


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0,
                    reason="needs root and util-linux's setpriv to run without the right to read any file")
@pytest.mark.parametrize("name", ["config.yaml", ".env"])
async def test_serve_with_a_profile_file_it_may_not_read_says_permission_denied_in_one_line(tmp_path, name):
    (tmp_path / name).write_text("")
    (tmp_path / name).chmod(0)
    # Without CAP_DAC_OVERRIDE root obeys file modes, as an ordinary user does.
    drop = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search",
            "--inh-caps", "-dac_override,-dac_read_search"]
    proc = await asyncio.create_subprocess_exec(
        *drop, sys.executable, "-m", "gateway", "serve", "--port", "0", env=gateway_env(tmp_path), cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)

    assert proc.returncode == 2
    assert one_line(err.decode()) == f"agent-gateway: cannot read {tmp_path / name}: Permission denied"


@pytest.mark.parametrize("command", [("serve", "--port", "0"), ("tools",), ("config", "check"), ("config", "list")])
async def test_a_profile_that_does_not_exist_is_one_line_naming_it(tmp_path, command):
    code, _, err = await run_cli("-p", "nosuch", *command, env=gateway_env(tmp_path))

    assert code != 0
    assert "profile 'nosuch' does not exist" in one_line(err)


async def test_a_profile_name_that_is_not_a_name_is_one_line(tmp_path):
    code, _, err = await run_cli("-p", "../etc", "serve", env=gateway_env(tmp_path))

    assert code == 2
    assert one_line(err).startswith("agent-gateway: invalid profile name '../etc'")


@pytest.mark.parametrize(("host", "shown"), [("[::1]", "[::1]"), ("LocalHost.", "localhost")])
async def test_bracketed_ipv6_and_a_trailing_dot_are_loopback_addresses_serve_listens_on(
    tmp_path, upstream, host, shown
):
    env = gateway_env(tmp_path, {"API_SERVER_HOST": host, "LLM_BASE_URL": upstream.base_url})
    gateway = await start_gateway(env=env)  # no key: allowed, because these are loopback
    try:
        assert gateway.base_url.startswith(f"http://{shown}:")
        async with aiohttp.ClientSession() as session, session.get(gateway.base_url + "/health") as resp:
            assert resp.status == 200
    finally:
        assert await gateway.stop() == 0


@pytest.mark.parametrize("host", ["[::]", "0.0.0.0."])
async def test_every_interface_spelt_with_brackets_or_a_dot_still_needs_a_key(tmp_path, host):
    code, _, err = await run_cli("serve", "--port", "0", env=gateway_env(tmp_path, {"API_SERVER_HOST": host}))

    assert code == 2
    assert "refusing to listen" in one_line(err) and "API_SERVER_KEY" in err


async def test_a_bind_address_that_is_no_address_is_refused_in_one_line(tmp_path):
    code, _, err = await run_cli("serve", env=gateway_env(tmp_path, {"API_SERVER_HOST": "http://0.0.0.0"}))

    assert code == 2
    assert "API_SERVER_HOST" in one_line(err) and "not an IP address or host name" in err


async def test_the_upstream_password_is_masked_in_the_startup_line_config_check_and_config_list(tmp_path, upstream):
    secret_url = upstream.base_url.replace("http://", "http://alice:S3cretPassw0rd@")
    env = gateway_env(tmp_path, {"LLM_BASE_URL": secret_url, "LLM_MODEL": "fake-model"})
    masked = upstream.base_url.replace("http://", "http://alice:***@")

    gateway = await start_gateway(env=env)
    await gateway.stop()
    assert gateway.proc.stderr is not None
    err = gateway.banner + (await gateway.proc.stderr.read()).decode()
    _, check_out, _ = await run_cli("config", "check", env=env)
    _, list_out, _ = await run_cli("config", "list", env=env)
    _, revealed, _ = await run_cli("config", "list", "--reveal", env=env)

    assert "S3cretPassw0rd" not in err + check_out + list_out
    assert gateway.banner.endswith(f"upstream {masked})")
    assert f"upstream: {masked} (model fake-model)" in check_out
    assert masked in list_out
    assert secret_url in revealed
