"""MCP servers for the MCP client's tests, each a real process or a loopback app.

- `sdk_server(json_response=)`: tests/fakes/mcp_sdk_server.py, the official `mcp` SDK's Streamable
  HTTP server (both eras on one endpoint), as a child process; yields its URL.
- `everything_http()`: `@modelcontextprotocol/server-everything` (npm, pinned in
  tests/node/mcp/package.json, installed once into the test cache) in its Streamable HTTP mode.
- `everything_stdio()`: the command and arguments that run it over stdio.
- `time_stdio()`: `mcp-server-time` (PyPI, the test extra) over stdio.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.faults import free_port
from tests.support.node_clients import npm_installed

REPO = Path(__file__).resolve().parents[2]
MCP_NODE_DIR = REPO / "tests" / "node" / "mcp"


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP server exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"no MCP server listening on 127.0.0.1:{port} after {timeout} s")


@contextmanager
def _serving(args: list[str], port: int, *, cwd: Path = REPO, env: dict[str, str] | None = None) -> Iterator[None]:
    process = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, process)
        yield
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def sdk_server(*, json_response: bool = False) -> Iterator[str]:
    port = free_port()
    args = [sys.executable, "-m", "tests.fakes.mcp_sdk_server", str(port)] + (["--json"] if json_response else [])
    with _serving(args, port):
        yield f"http://127.0.0.1:{port}/mcp"


def everything_stdio() -> tuple[str, list[str]]:
    folder = npm_installed(MCP_NODE_DIR)
    script = folder / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    return "node", [str(script), "stdio"]


@contextmanager
def everything_http() -> Iterator[str]:
    command, args = everything_stdio()
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    with _serving([command, args[0], "streamableHttp"], port, env=env):
        yield f"http://127.0.0.1:{port}/mcp"


def time_stdio() -> tuple[str, list[str]]:
    return sys.executable, ["-m", "mcp_server_time", "--local-timezone", "UTC"]


def faulty_stdio() -> tuple[str, list[str]]:
    return sys.executable, ["-m", "tests.fakes.mcp_faulty", "stdio"]
