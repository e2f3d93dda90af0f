"""`agent-gateway tools --check`: a real subprocess against the loopback fakes, each answering as
its real service documents; every failure kind is named, the exit status says whether all passed,
and no key is ever printed."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.fakes.brave import FakeBrave, brave_server  # noqa: F401 - fixture
from tests.fakes.exa import API_KEY as EXA_KEY
from tests.fakes.exa import ExaFake, exa_fake  # noqa: F401 - fixture
from tests.fakes.firecrawl import API_KEY as FIRECRAWL_KEY
from tests.fakes.firecrawl import FirecrawlFake, error_reply, firecrawl_fake  # noqa: F401 - fixture
from tests.fakes.keenable import KeenableFake, keenable_fake  # noqa: F401 - fixture
from tests.fakes.pages import PageServer, page_server  # noqa: F401 - fixture
from tests.fakes.scripted import Reply
from tests.fakes.tavily import API_KEY as TAVILY_KEY
from tests.fakes.tavily import TavilyFake, tavily_fake  # noqa: F401 - fixture
from tests.fakes.xai import API_KEY as XAI_KEY
from tests.fakes.xai import XaiFake, xai_fake  # noqa: F401 - fixture
from tests.support.gateway_process import gateway_env, run_cli

WRONG_BRAVE_KEY = "BSA-not-the-right-one-42"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def line_of(out: str, provider: str, call: str) -> str:
    return next(line for line in out.splitlines() if line.split()[:2] == [provider, call])


async def test_a_working_provider_passes_with_latency_and_counts(tmp_path: Path, tavily_fake: TavilyFake):  # noqa: F811
    env = gateway_env(tmp_path, {"TAVILY_API_KEY": TAVILY_KEY, "TAVILY_API_URL": tavily_fake.base_url})

    code, out, err = await run_cli("tools", "--check", "tavily", env=env)

    assert code == 0, out + err
    assert line_of(out, "tavily", "search").split()[2:] [0] == "ok"
    assert "2 results" in line_of(out, "tavily", "search")  # what the fake answered
    assert "1 page" in line_of(out, "tavily", "extract")
    assert "all checked providers answered" in out
    [search] = tavily_fake.requests_to("/search")
    assert search.headers["Authorization"] == f"Bearer {TAVILY_KEY}"  # the agent's own call path
    assert TAVILY_KEY not in out + err


async def test_each_failure_kind_is_named_and_the_check_fails(
    tmp_path: Path, brave_server: FakeBrave, exa_fake: ExaFake, firecrawl_fake: FirecrawlFake,  # noqa: F811
    xai_fake: XaiFake, page_server: PageServer,  # noqa: F811
):
    firecrawl_fake.script(error_reply(402), route="search")
    firecrawl_fake.script(error_reply(402), route="scrape")
    exa_fake.script(Reply(429, {"requestId": "r", "error": "Rate limit exceeded", "tag": "RATE_LIMIT_EXCEEDED"},
                          headers={"Retry-After": "30"}), route="search")
    env = gateway_env(tmp_path, {
        "BRAVE_SEARCH_API_KEY": WRONG_BRAVE_KEY, "BRAVE_SEARCH_API_URL": brave_server.base_url,
        "EXA_API_KEY": EXA_KEY, "EXA_API_URL": exa_fake.base_url,
        "FIRECRAWL_API_KEY": FIRECRAWL_KEY, "FIRECRAWL_API_URL": firecrawl_fake.base_url,
        "PERPLEXITY_API_KEY": "pplx-unused-key", "PERPLEXITY_API_URL": f"http://127.0.0.1:{closed_port()}",
        "XAI_API_KEY": XAI_KEY, "XAI_API_URL": xai_fake.base_url, "XAI_MODEL": "grok-3",  # retired
        "AGENT_TOOL_TIMEOUT": "5",
    })

    code, out, err = await run_cli(
        "tools", "--check", "brave-free", "firecrawl", "exa", "perplexity", "xai", "fetch", "tavily",
        "--page", page_server.url + "/article", env=env, timeout=60)

    assert code == 1, out + err
    assert "FAILED" in line_of(out, "brave-free", "search") and "bad key:" in line_of(out, "brave-free", "search")
    assert "out of credit:" in line_of(out, "firecrawl", "search")
    assert "rate-limited (resets in 30 s):" in line_of(out, "exa", "search")
    assert "unreachable:" in line_of(out, "perplexity", "search")
    assert "model retired:" in line_of(out, "xai", "search") and "set XAI_MODEL" in line_of(out, "xai", "search")
    # The built-in reader refuses a loopback page unless WEB_ALLOW_PRIVATE_URLS is set.
    assert "blocked by the URL guard:" in line_of(out, "fetch", "extract")
    assert "not configured: set TAVILY_API_KEY" in line_of(out, "tavily", "-")
    assert "failed: brave-free, exa, fetch, firecrawl, perplexity, tavily, xai" in out
    for key in (WRONG_BRAVE_KEY, EXA_KEY, FIRECRAWL_KEY, XAI_KEY, "pplx-unused-key"):
        assert key not in out + err


async def test_an_unknown_name_is_a_usage_error(tmp_path: Path):
    code, out, err = await run_cli("tools", "--check", "nosuch", env=gateway_env(tmp_path))
    assert code == 2 and "unknown web provider(s): nosuch" in err and out == ""


async def test_config_check_says_to_run_the_live_check(tmp_path: Path):
    code, out, _ = await run_cli("config", "check", env=gateway_env(tmp_path))
    assert "run `agent-gateway tools --check`" in out


async def test_without_names_every_available_provider_is_checked_and_unconfigured_ones_are_not(
    tmp_path: Path, tavily_fake: TavilyFake, keenable_fake: KeenableFake, page_server: PageServer,  # noqa: F811
):
    env = gateway_env(tmp_path, {
        "TAVILY_API_KEY": TAVILY_KEY, "TAVILY_API_URL": tavily_fake.base_url,
        "KEENABLE_API_URL": keenable_fake.base_url,  # keyless: available with no configuration
        "WEB_ALLOW_PRIVATE_URLS": "true", "DDGS_TIMEOUT": "3",
    })

    code, out, err = await run_cli("tools", "--check", "--page", page_server.url + "/article", env=env, timeout=60)

    for provider, call in (("tavily", "search"), ("tavily", "extract"), ("keenable", "search"),
                           ("keenable", "extract"), ("fetch", "extract")):
        assert " ok " in line_of(out, provider, call), out + err
    checked = {line.split()[0] for line in out.splitlines() if line.startswith("  ")}
    assert not checked & {"exa", "firecrawl", "parallel", "perplexity", "xai", "brave-free", "searxng"}
    # ddgs is checked when its extra is installed; it reaches the real DuckDuckGo, so either outcome.
    ddgs_failed = "ddgs" in checked and "FAILED" in line_of(out, "ddgs", "search")
    assert code == (1 if ddgs_failed else 0)


async def test_a_key_the_service_echoes_back_is_never_printed(tmp_path: Path, tavily_fake: TavilyFake):  # noqa: F811
    tavily_fake.script(Reply(403, {"detail": {"error": f"Key {TAVILY_KEY} is disabled for this plan"}}), route="search")
    env = gateway_env(tmp_path, {"TAVILY_API_KEY": TAVILY_KEY, "TAVILY_API_URL": tavily_fake.base_url})

    code, out, err = await run_cli("tools", "--check", "tavily", env=env)

    assert code == 1
    assert "request rejected: Tavily refused the request (403: plan, permission or limit): Key *** is disabled" in out
    assert TAVILY_KEY not in out + err
