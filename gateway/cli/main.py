"""The `agent-gateway` command: global options, then one subcommand module per command group.

Each command module exposes `register(subparsers)`, which adds its parser(s) and sets
`func(args) -> int` as the default; `main` only parses and dispatches.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from gateway import __version__
from gateway.cli.commands import COMMANDS, command_named
from gateway.config.settings import SettingsError, validate_profile_name


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The whole CLI's parser; the command argv names gets its real options, every other command a
    stand-in with its help line (enough for `--help` and for argparse's "invalid choice")."""
    parser = argparse.ArgumentParser(
        prog="agent-gateway",
        description="An OpenAI-compatible gateway with a web-tool-using agent behind it.",
    )
    parser.add_argument("-p", "--profile", metavar="NAME",
                        help="use profile NAME (<home>/profiles/NAME) instead of the default profile")
    parser.add_argument("--version", action="version", version=f"agent-gateway {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    command = command_named(argv)
    if command is not None:
        importlib.import_module(COMMANDS[command][0]).register(subparsers)
    registered = set(subparsers.choices)
    for name, (_module, help_line) in COMMANDS.items():
        if name not in registered:
            subparsers.add_parser(name, help=help_line)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if args.profile is not None:
            validate_profile_name(args.profile)
        return int(args.func(args) or 0)
    except SettingsError as exc:
        print(f"agent-gateway: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file or socket the command needed: one line, not a traceback
        where = f": {exc.filename}" if exc.filename else ""
        print(f"agent-gateway: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
