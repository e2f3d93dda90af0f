"""The command line loads only the command it runs: `serve` carries no other command's code.

Real processes: `python -m gateway` as a user runs it, and a fresh interpreter per module check.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gateway.cli.commands import COMMANDS
from tests.support.gateway_process import REPO, gateway_env, run_cli

OTHER_COMMAND_MODULES = {"gateway.cli.config", "gateway.cli.keys", "gateway.cli.web", "gateway.cli.web_check",
                         "gateway.cli.profile"}


def _cli_modules_after_parsing(argv: list[str]) -> set[str]:
    code = ("import json, sys; from gateway.cli.main import build_parser; "
            f"build_parser({argv!r}).parse_known_args({argv!r}); print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return {name for name in json.loads(out.stdout) if name.startswith("gateway.cli.")}


def test_serve_loads_no_other_commands_code() -> None:
    assert _cli_modules_after_parsing(["serve", "--port", "0"]) & OTHER_COMMAND_MODULES == set()


@pytest.mark.parametrize("argv", [["-p", "keys", "serve"], ["--profile", "config", "serve"],
                                  ["--profile=keys", "serve"]])
def test_a_profile_named_like_a_command_is_no_command(argv: list[str]) -> None:
    assert _cli_modules_after_parsing(argv) & OTHER_COMMAND_MODULES == set()


async def test_help_lists_every_command_with_its_line(tmp_path) -> None:
    code, out, err = await run_cli("--help", env=gateway_env(tmp_path))
    assert code == 0, err
    listing = " ".join(out.split())  # argparse wraps the help lines
    for name, (_module, help_line) in COMMANDS.items():
        assert f"{name} {help_line}" in listing


@pytest.mark.parametrize("command", sorted(COMMANDS))
async def test_each_commands_own_help_shows_its_options(tmp_path, command: str) -> None:
    code, out, err = await run_cli(command, "--help", env=gateway_env(tmp_path))
    assert code == 0, err
    assert out.startswith(f"usage: agent-gateway {command} ")
    assert "options:" in out


async def test_an_unknown_command_names_the_choices(tmp_path) -> None:
    code, _out, err = await run_cli("serv", env=gateway_env(tmp_path))
    assert code == 2
    assert "invalid choice: 'serv'" in err
    assert "'serve'" in err and "'keys'" in err
