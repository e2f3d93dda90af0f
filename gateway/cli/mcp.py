"""`agent-gateway mcp list` (the profile's MCP servers, their tools after a live tools/list, timing)
and `agent-gateway mcp check [LABEL...] [--call TOOL ARGS]` (each server answers? exit 1 if one did
not, 2 for an unknown label or bad arguments). The live part is gateway/cli/mcp_check.py."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from gateway.cli.commands import help_line
from gateway.cli.mcp_check import Probe, parse_call, probe
from gateway.config.profiles import ProfileError, require_profile
from gateway.config.settings import default_home, load_settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("mcp", help=help_line("mcp"))
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="each configured MCP server, its tools and whether it answered")
    listing.set_defaults(func=_run)
    check = actions.add_parser("check", help="connect to each (or each LABELled) server and list its tools; "
                                             "exit 1 if one failed")
    check.add_argument("labels", nargs="*", metavar="LABEL")
    check.add_argument("--call", nargs=2, metavar=("TOOL", "ARGS"),
                       help="also call TOOL with ARGS (a JSON object) on each server that has it")
    check.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        require_profile(default_home(os.environ), args.profile)
    except ProfileError as exc:
        print(f"agent-gateway: {exc}", file=sys.stderr)
        return 1
    settings = load_settings(profile=args.profile)
    specs = list(settings.mcp_servers)
    labels = list(getattr(args, "labels", None) or [])
    unknown = [label for label in labels if label not in {spec.label for spec in specs}]
    if unknown:
        known = ", ".join(spec.label for spec in specs) or "none"
        print(f"agent-gateway: no MCP server is configured as {unknown[0]!r} (configured: {known})", file=sys.stderr)
        return 2
    if labels:
        specs = [spec for spec in specs if spec.label in labels]
    call = None
    if getattr(args, "call", None):
        try:
            call = parse_call(*args.call)
        except ValueError as exc:
            print(f"agent-gateway: --call: {exc}", file=sys.stderr)
            return 2
    if not specs:
        print("No MCP servers configured (mcp_servers: in the profile's config.yaml).")
        return 0
    probes = asyncio.run(probe(specs, call))
    print("MCP servers:")
    for spec, found in zip(specs, probes, strict=True):
        approval = "approval always" if spec.require_approval == "always" else "no approval"
        print(f"  {spec.label}: offer {spec.offer}; {approval}; timeout {spec.timeout:g} s")
        for line in found.lines(with_tools=args.action == "list" or call is None):
            print(line)
        if call is not None and found.ok and found.called is None:
            print(f"  {'':<16} no tool {call[0]!r} on this server")
    return 0 if _all_answered(probes, call is not None) else 1


def _all_answered(probes: list[Probe], calling: bool) -> bool:
    return all(found.ok and (not calling or found.called is None or found.called[0]) for found in probes)
