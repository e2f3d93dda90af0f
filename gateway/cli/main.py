"""The `agent-gateway` command: global options, then one subcommand module per command group.

Each command module exposes `register(subparsers)`, which adds its parser(s) and sets
`func(args) -> int` as the default; `main` only parses and dispatches.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gateway import __version__
from gateway.cli import config as cli_config
from gateway.cli import keys as cli_keys
from gateway.cli import profile as cli_profile
from gateway.cli import serve as cli_serve
from gateway.cli import web as cli_web
from gateway.config.settings import SettingsError, validate_profile_name

COMMAND_MODULES = (cli_serve, cli_web, cli_profile, cli_config, cli_keys)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-gateway",
        description="An OpenAI-compatible gateway with a web-tool-using agent behind it.",
    )
    parser.add_argument("-p", "--profile", metavar="NAME",
                        help="use profile NAME (<home>/profiles/NAME) instead of the default profile")
    parser.add_argument("--version", action="version", version=f"agent-gateway {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
