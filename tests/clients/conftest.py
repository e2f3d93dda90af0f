"""One stack per test for the real command-line clients: a fake search service, a scripted fake
model, the gateway (the real app, its real web tools) and, in front of it, a recording proxy that
keeps what the client sent and what the gateway answered.

    client -> RecordingProxy (stack.url) -> gateway -> FakeUpstream (stack.model)
                                                    -> FakeSearxng (stack.search)

The clients run as subprocesses on the test's loop (asyncio), so the servers keep answering while
they work. Each client's test module says how it is configured; `stack.sent()` is what reached the
gateway and `stack.model.requests` what the gateway sent the model.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gateway.http.app import create_app
from tests.conftest import API_KEY
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.upstream import FakeUpstream
from tests.support.gateway_process import keep_log
from tests.support.recording_proxy import Exchange, RecordingProxy


@dataclass
class Ran:
    """A client run to its end: exit code, what it printed, and what went over the wire meanwhile."""

    code: int
    out: str
    err: str
    exchanges: list[Exchange] = field(default_factory=list)

    def describe(self) -> str:
        """What a failed assertion should show: the exit, the output's tail, the gateway's errors."""
        errors = [f"{e.status} {e.path}: {e.body.decode(errors='replace')[:600]}"
                  for e in self.exchanges if e.status >= 400]
        failed = [f"{e.path}: {json.dumps(frame)[:600]}" for e in self.exchanges for frame in _frames(e)
                  if isinstance(frame, dict) and frame.get("type") in ("response.failed", "error")]
        return (f"exit {self.code}\n--- stdout\n{self.out[-2000:]}\n--- stderr\n{self.err[-3000:]}\n"
                f"--- gateway 4xx/5xx\n" + "\n".join(errors) + "\n--- failed events\n" + "\n".join(failed))


def _frames(exchange: Exchange) -> list[Any]:
    try:
        return exchange.frames() if "event-stream" in exchange.content_type else []
    except ValueError:
        return []


@dataclass
class Stack:
    url: str  # the gateway's base URL as clients see it (through the recording proxy), with /v1
    model: FakeUpstream
    search: FakeSearxng
    proxy: RecordingProxy
    home: Path

    def sent(self, path: str = "/v1/responses") -> list[Any]:
        """The request bodies that reached the gateway on `path`, in order."""
        return [e.request for e in self.proxy.exchanges if e.path == path]

    def answers(self, path: str = "/v1/responses") -> list[Exchange]:
        return [e for e in self.proxy.exchanges if e.path == path]

    async def run(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, timeout: float = 120,
                  stdin: bytes | None = None) -> Ran:
        """Run a client to its end (killed past `timeout`, which fails the test with what it printed)."""
        process = await asyncio.create_subprocess_exec(
            *argv, env=dict(env), cwd=str(cwd),
            # a client reading stdin (Codex appends it to the prompt) must see it end at once
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(process.communicate(stdin), timeout)
        except TimeoutError:
            process.kill()
            out, err = await process.communicate()
            ran = Ran(-9, out.decode(errors="replace"), err.decode(errors="replace"), list(self.proxy.exchanges))
            pytest.fail(f"{argv[0]} did not finish within {timeout} s\n{ran.describe()}")
        assert process.returncode is not None
        ran = Ran(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"),
                  list(self.proxy.exchanges))
        keep_log(f"client-{process.pid}", ran.err)  # checked for keys with every gateway log
        return ran


#: Every request a client makes to anything but loopback goes to this dead proxy port and fails
#: at once (Codex syncs plugins from GitHub, aider looks for updates): the tests reach only 127.0.0.1.
_NOWHERE = "http://127.0.0.1:9"


def client_env(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """A client's environment: no developer settings or keys of the caller's, a home of its own,
    no way off the machine."""
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({"HOME": str(home), "NO_COLOR": "1", "TERM": "dumb",
                **{name: _NOWHERE for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy",
                                               "ALL_PROXY")},
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost", **extra})
    return env


@pytest.fixture
async def stack(aiohttp_server: Any, searxng_server: FakeSearxng, upstream: FakeUpstream,  # noqa: F811
                make_settings: Any, tmp_path: Path) -> Stack:
    settings = make_settings(api_key=API_KEY, env={"SEARXNG_URL": searxng_server.base_url})
    gateway = await aiohttp_server(create_app(settings))
    proxy = RecordingProxy(str(gateway.make_url("")))
    front = await aiohttp_server(proxy.app())
    return Stack(str(front.make_url("/v1")), upstream, searxng_server, proxy, tmp_path)
