"""The CLI's commands by name: which module registers each, and its line in `agent-gateway --help`.

A module of its own so that a command module can take its help line from here without importing
`main`, and `main` can list every command without importing their modules.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Each command, the module that registers it, and its line in `agent-gateway --help`. Only the module
#: of the command being run is imported: `serve` then loads no other command's code (the config
#: editor, the key and web-status commands: ~1 MiB of a gateway's idle memory, bench/README.md).
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("gateway.cli.serve", "start the HTTP gateway"),
    "tools": ("gateway.cli.web", "show web providers, their capabilities and which are active"),
    "plugins": ("gateway.cli.web", "list, enable or disable web provider plugins"),
    "profile": ("gateway.cli.profile", "create, list and delete profiles (separate gateways)"),
    "config": ("gateway.cli.config", "read and change the profile's settings (.env and config.yaml)"),
    "keys": ("gateway.cli.keys", "API keys with owners, limits and usage (in the profile's store)"),
    "mcp": ("gateway.cli.mcp", "list and check the profile's MCP servers (mcp_servers: in config.yaml)"),
}
_PROFILE_OPTIONS = ("-p", "--profile")


def command_named(argv: Sequence[str]) -> str | None:
    """The command argv runs: its first word that is neither an option nor the profile option's value."""
    words = iter(argv)
    for word in words:
        if word in _PROFILE_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def help_line(command: str) -> str:
    return COMMANDS[command][1]
