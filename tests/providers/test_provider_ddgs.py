"""The DDGS provider: a child process per search, against a fake `ddgs` library on its PYTHONPATH."""

from __future__ import annotations

import importlib.machinery
import json
import os
import sys
import time
from pathlib import Path

import pytest

from plugins.web.ddgs.provider import DdgsProvider
from providers.web import ProviderError

# A stand-in for the third-party `ddgs` package; FAKE_DDGS_MODE scripts it, FAKE_DDGS_LOG records calls.
FAKE_DDGS = '''
import json, os, time


class RatelimitException(Exception):
    pass


class DDGSException(Exception):
    pass


class DDGS:
    def text(self, query, region="us-en", safesearch="moderate", timelimit=None, max_results=10,
             backend="auto"):
        with open(os.environ["FAKE_DDGS_LOG"], "a") as log:
            call = {"query": query, "region": region, "safesearch": safesearch,
                    "max_results": max_results, "backend": backend, "pid": os.getpid()}
            log.write(json.dumps(call) + "\\n")
        mode = os.environ.get("FAKE_DDGS_MODE", "ok")
        if mode == "hang":
            while True:
                time.sleep(1)
        if mode == "ratelimit":
            raise RatelimitException("202 Ratelimit")
        if mode == "nothing":
            raise DDGSException("No results found.")  # what ddgs 9.16 raises when nothing matches
        if mode == "crash":
            os._exit(3)
        return [{"title": f"{query} {n}", "href": f"https://ddg.example/{n}", "body": f"body {n}"}
                for n in range(1, max_results + 1)]
'''


@pytest.fixture
def fake_ddgs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "fakelib" / "ddgs"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_DDGS)
    log = tmp_path / "calls.jsonl"
    # The child inherits the process environment; these steer the fake library only.
    monkeypatch.setenv("FAKE_DDGS_LOG", str(log))
    monkeypatch.setenv("FAKE_DDGS_MODE", "ok")
    return package.parent


def calls(tmp_path: Path) -> list[dict]:
    path = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_without_the_library_it_is_unavailable_with_an_install_hint(tmp_path: Path, monkeypatch):
    # where the `ddgs` extra is installed, hide it: this is about a machine without it
    monkeypatch.setattr(sys, "path", [p for p in sys.path
                                      if importlib.machinery.PathFinder.find_spec("ddgs", [p]) is None])
    provider = DdgsProvider({"PYTHONPATH": str(tmp_path / "empty")})
    assert not provider.is_available()
    assert provider.unavailable_reason() == (
        "the ddgs package is not installed: pip install 'agent-gateway[ddgs]'"
    )


async def test_search_runs_the_library_in_a_child_and_maps_results(fake_ddgs: Path, tmp_path: Path):
    provider = DdgsProvider({"PYTHONPATH": str(fake_ddgs), "DDGS_REGION": "de-de"})
    assert provider.is_available()

    result = await provider.search("hello", limit=2)

    assert result == {"success": True, "data": {"web": [
        {"title": "hello 1", "url": "https://ddg.example/1", "description": "body 1", "position": 1},
        {"title": "hello 2", "url": "https://ddg.example/2", "description": "body 2", "position": 2},
    ]}}
    [call] = calls(tmp_path)
    assert call["query"] == "hello" and call["max_results"] == 2 and call["region"] == "de-de"
    assert call["pid"] != os.getpid()


async def test_a_hanging_library_costs_the_call_and_the_child_is_killed(
    fake_ddgs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("FAKE_DDGS_MODE", "hang")
    provider = DdgsProvider({"PYTHONPATH": str(fake_ddgs), "DDGS_TIMEOUT": "0.8"})
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"did not finish within 0.8 s"):
        await provider.search("stuck")
    assert time.monotonic() - started < 5
    [call] = calls(tmp_path)
    with pytest.raises(ProcessLookupError):
        os.kill(call["pid"], 0)


async def test_library_errors_become_one_sentence(fake_ddgs: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_DDGS_MODE", "ratelimit")
    provider = DdgsProvider({"PYTHONPATH": str(fake_ddgs)})
    with pytest.raises(ProviderError, match=r"DuckDuckGo rate limit reached \(RatelimitException\)") as info:
        await provider.search("x")
    assert (info.value.kind, info.value.retryable) == ("rate_limited", True)  # the chain moves on


async def test_nothing_found_is_an_empty_result_not_a_failure(fake_ddgs: Path, monkeypatch: pytest.MonkeyPatch):
    # ddgs raises DDGSException("No results found."); reported as a failure, the chain fell back.
    monkeypatch.setenv("FAKE_DDGS_MODE", "nothing")
    provider = DdgsProvider({"PYTHONPATH": str(fake_ddgs)})
    assert await provider.search("xqzzv plorth") == {"success": True, "data": {"web": []}}


async def test_a_crashing_child_is_reported(fake_ddgs: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_DDGS_MODE", "crash")
    provider = DdgsProvider({"PYTHONPATH": str(fake_ddgs)})
    with pytest.raises(ProviderError, match="ddgs worker failed: exit code 3"):
        await provider.search("x")


async def test_a_search_country_picks_the_duckduckgo_region(fake_ddgs: Path, tmp_path: Path):
    provider = DdgsProvider({"PYTHONPATH": str(fake_ddgs), "DDGS_REGION": "de-de"})
    await provider.search("news", limit=1, country="GB")
    await provider.search("news", limit=1, country="ZZ")  # not a listed country: DDGS_REGION
    assert [c["region"] for c in calls(tmp_path)] == ["uk-en", "de-de"]
    assert provider.search_options == {"country"}
