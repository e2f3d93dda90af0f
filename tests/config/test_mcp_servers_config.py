"""`mcp_servers:` in config.yaml: stdio and url servers, `${ENV}` in headers, and errors that name
the server and key without showing a secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.settings import SettingsError, load_settings


def write_config(home: Path, text: str) -> None:
    (home / "config.yaml").write_text(text, encoding="utf-8")


def test_a_stdio_and_a_url_server_are_loaded_with_env_references_expanded(tmp_path: Path) -> None:
    write_config(tmp_path, """
mcp_servers:
  time:
    command: uvx
    args: [mcp-server-time, --local-timezone, UTC]
    env: {TZ: UTC}
    allowed_tools: [get_current_time]
    timeout: 15
  github:
    url: https://api.example.com/mcp/
    headers: {Authorization: "Bearer ${GH_TOKEN}"}
    offer: on_request
""")
    settings = load_settings(tmp_path, environ={"GH_TOKEN": "s3cret"})
    time_, github = settings.mcp_servers
    assert (time_.label, time_.command, time_.args) == ("time", "uvx", ("mcp-server-time", "--local-timezone", "UTC"))
    assert time_.allowed_tools == ("get_current_time",) and time_.timeout == 15 and time_.offer == "all"
    assert time_.require_approval == "never"
    assert github.url == "https://api.example.com/mcp/" and github.headers == {"Authorization": "Bearer s3cret"}
    assert github.offer == "on_request" and github.allowed_tools is None
    assert "s3cret" not in github.describe()


def test_no_mcp_servers_section_means_none(tmp_path: Path) -> None:
    assert load_settings(tmp_path, environ={}).mcp_servers == ()


@pytest.mark.parametrize(("section", "message"), [
    ("  bad:\n    url: http://x/mcp\n    command: uvx\n", "mcp_servers.bad: give exactly one of url"),
    ("  bad:\n    command: uvx\n    offer: sometimes\n", "mcp_servers.bad: offer is one of all, on_request"),
    ("  bad:\n    command: uvx\n    colour: blue\n", "mcp_servers.bad: unknown key 'colour'"),
    ("  bad:\n    url: ftp://x/mcp\n", "mcp_servers.bad: url is an http(s) URL"),
    ("  bad:\n    url: http://x/mcp\n    headers: {A: '${MISSING}'}\n", "${MISSING} is not set"),
    ("  a__b:\n    command: uvx\n", "mcp_servers.a__b: a label is"),
    ("  bad:\n    command: uvx\n    timeout: 0\n", "mcp_servers.bad: timeout is a number of seconds"),
])
def test_a_wrong_server_is_an_error_naming_it(tmp_path: Path, section: str, message: str) -> None:
    write_config(tmp_path, "mcp_servers:\n" + section)
    with pytest.raises(SettingsError, match=None) as raised:
        load_settings(tmp_path, environ={})
    assert message in str(raised.value) and "config.yaml" in str(raised.value)
