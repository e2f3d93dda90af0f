"""`agent-gateway profile create NAME | list | delete NAME [--yes]`.

A profile is a separate gateway: its own port, key, upstream, store and plugins under
`<home>/profiles/NAME/`; run anything against it with `agent-gateway -p NAME <command>`.
"""

from __future__ import annotations

import argparse
import os
import sys

from gateway.cli.commands import help_line
from gateway.config import profiles
from gateway.config.settings import default_home


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("profile", help=help_line("profile"))
    actions = parser.add_subparsers(dest="profile_action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="make <home>/profiles/NAME with its own port and key")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--port", type=int, help="port for this profile (default: the next free one from 8643)")
    create.add_argument("--no-key", action="store_true",
                        help="do not generate an API_SERVER_KEY (anyone on this machine can then use it)")
    create.set_defaults(func=run_create)

    listing = actions.add_parser("list", help="show every profile, its port and whether a key is set")
    listing.set_defaults(func=run_list)

    delete = actions.add_parser("delete", help="remove <home>/profiles/NAME and everything in it")
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    delete.set_defaults(func=run_delete)


def _fail(message: str, code: int = 1) -> int:
    print(f"agent-gateway: {message}", file=sys.stderr)
    return code


def run_create(args: argparse.Namespace) -> int:
    home = default_home(os.environ)
    if args.port is not None and not 1 <= args.port <= 65535:
        return _fail(f"--port must be 1-65535, got {args.port}", 2)
    try:
        port = args.port if args.port is not None else profiles.suggest_port(home)
        key = None if args.no_key else profiles.generate_key()
        directory = profiles.create_profile(home, args.name, port=port, key=key)
    except profiles.ProfileError as exc:
        return _fail(str(exc))
    print(f"created profile {args.name} in {directory}")
    print(f"  port: {port} (change with: agent-gateway -p {args.name} config set API_SERVER_PORT N)")
    if key:
        # Shown once: afterwards only `config get API_SERVER_KEY --reveal` prints it.
        print(f"  API key (shown once, keep it safe): {key}")
    else:
        print("  no API key: anyone on this machine can use it (set one with config set API_SERVER_KEY ...)")
    print(f"next: agent-gateway -p {args.name} config set LLM_BASE_URL http://127.0.0.1:11434/v1")
    print(f"      agent-gateway -p {args.name} serve")
    return 0


def run_list(args: argparse.Namespace) -> int:
    home = default_home(os.environ)
    rows = [("PROFILE", "PORT", "KEY", "PATH")]
    for name in [None, *profiles.profile_names(home)]:
        info = profiles.describe(home, name)
        label = name or "(default)"
        if info.error:
            rows.append((label, "?", "?", f"{info.path}  [error: {info.error}]"))
            continue
        rows.append((label, str(info.port), "yes" if info.has_key else "no", str(info.path)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3])
    return 0


def run_delete(args: argparse.Namespace) -> int:
    home = default_home(os.environ)
    try:
        directory = profiles.require_profile(home, args.name)
    except profiles.ProfileError as exc:
        return _fail(str(exc))
    if not args.yes:
        if not sys.stdin.isatty():
            return _fail(f"refusing to delete profile {args.name} without confirmation: add --yes", 2)
        answer = input(f"Delete profile {args.name} and everything in {directory} "
                       "(keys, settings, stored conversations)? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return 1
    try:
        profiles.delete_profile(home, args.name)
    except (profiles.ProfileError, OSError) as exc:
        return _fail(f"cannot delete profile {args.name}: {exc}")
    print(f"deleted profile {args.name} ({directory})")
    return 0
