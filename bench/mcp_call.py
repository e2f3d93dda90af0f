"""What one MCP `tools/call` costs the client: the gateway's own (HTTP/1.1 kept alive + JSON) against the `mcp` SDK.

    python -m bench.mcp_call calls [--calls 200] [--era modern|legacy] [--json] [--only ours|sdk]
                                   [--loop asyncio|uvloop]                    # callgrind
    python -m bench.mcp_call rss                                                   # import cost, both clients

`calls` starts the SDK's own server (tests/fakes/mcp_sdk_server.py) outside valgrind, then runs each
client under `valgrind --tool=callgrind` twice: a warm-up alone (connect, era, `tools/list`, 5 calls)
and the warm-up plus N calls of `echo`; the difference over N is the client's instructions per call
over a warm session, interpreter start-up and imports cancelled out. The client runs on asyncio's
event loop (the figures before 2026-12-05's `mcplean` section), or on uvloop's (`--loop uvloop`,
what `serve` runs the gateway on). `rss` reads VmRSS in fresh
interpreters: aiohttp alone (the gateway has it already), then plus each client's modules.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WARM_CALLS = 5


async def _ours(url: str, era: str, calls: int) -> None:
    from gateway.agent.mcp.http import HttpConnection
    from gateway.agent.mcp.server import McpServer
    from providers.urlsafety import allow_all

    server = McpServer("bench", HttpConnection(url, policy=allow_all, era=None if era == "modern" else "2025-11-25"))
    await server.list_tools()
    for _ in range(WARM_CALLS + calls):
        result = await server.call_tool("echo", {"text": "otters"})
        assert result.output == "otters"
    await server.close()


async def _sdk(url: str, era: str, calls: int) -> None:
    from mcp.client.client import Client

    async with Client(url, mode="auto" if era == "modern" else "legacy") as client:
        await client.list_tools()
        for _ in range(WARM_CALLS + calls):
            result = await client.call_tool("echo", {"text": "otters"})
            assert result.content[0].text == "otters"  # type: ignore[union-attr]


def client_main(impl: str, url: str, era: str, calls: int, loop: str = "asyncio") -> None:
    runner = _ours if impl == "ours" else _sdk
    if loop == "uvloop":
        import uvloop

        uvloop.run(runner(url, era, calls))
    else:
        asyncio.run(runner(url, era, calls))


def _instructions(impl: str, url: str, era: str, calls: int, loop: str = "asyncio") -> int:
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m",
                        "bench.mcp_call", "client", impl, url, era, str(calls), loop],
                       cwd=REPO, check=True, capture_output=True, timeout=1800)
        dump = sorted(glob.glob(out + "*"))[0]
        for line in Path(dump).read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("no totals in the callgrind output")


def calls_main(args: argparse.Namespace) -> None:
    from tests.support.mcp_servers import sdk_server

    with sdk_server(json_response=args.json) as url:
        print(f"server: mcp SDK, {'JSON' if args.json else 'SSE'} replies; era {args.era}; {args.calls} calls; "
              f"{args.loop}'s event loop")
        for impl in (args.only,) if args.only else ("ours", "sdk"):
            base = _instructions(impl, url, args.era, 0, args.loop)
            total = _instructions(impl, url, args.era, args.calls, args.loop)
            print(f"{impl:5} {(total - base) / args.calls:>12,.0f} instructions per tools/call "
                  f"(warm-up alone {base:,})", flush=True)


RSS = """
import sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
import aiohttp, yarl, json
base = rss()
{imports}
print(f"{{rss() - base:.1f}} MiB over aiohttp, {{len(sys.modules)}} modules")
"""


def rss_main() -> None:
    for name, imports in (
        ("ours", "import gateway.agent.mcp.registry"),
        ("sdk", "import mcp.client.client"),
        ("mcp_types only", "import mcp_types"),
    ):
        out = subprocess.run([sys.executable, "-c", RSS.format(imports=imports)], cwd=REPO, capture_output=True,
                             text=True, check=True)
        print(f"{name:15} {out.stdout.strip()}")


def main() -> None:
    if sys.argv[1:2] == ["client"]:
        client_main(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), *sys.argv[6:7])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["calls", "rss"])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--era", choices=["modern", "legacy"], default="modern")
    parser.add_argument("--json", action="store_true", help="the server replies with JSON bodies, not SSE")
    parser.add_argument("--only", choices=["ours", "sdk"], help="measure one client (ours: the gateway's side)")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio",
                        help="the client's event loop (uvloop: as under `serve`)")
    args = parser.parse_args()
    if args.what == "rss":
        rss_main()
    else:
        calls_main(args)


if __name__ == "__main__":
    main()
