"""Model routes as a user meets them on the command line: `serve` with an upstream that is down,
its banner, and `config check` / `config get` with routes, good and bad."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp
import yaml

from tests.fakes.upstream import FakeUpstream
from tests.support.gateway_process import gateway_env, run_cli, start_gateway

KEY = "sk-route-cli-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_serve_with_auto_starts_while_the_upstream_is_down_and_serves_it_once_it_answers(
        tmp_path, aiohttp_server):
    port = _free_port()
    env = gateway_env(tmp_path, {"LLM_BASE_URL": f"http://127.0.0.1:{port}/v1", "LLM_MODELS": "auto"})
    gateway = await start_gateway(env=env)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(gateway.base_url + "/v1/models") as resp:
                assert resp.status == 200
                assert [m["id"] for m in (await resp.json())["data"]] == ["agent-gateway",
                                                                          "agent-gateway-deep-research"]
            # the upstream comes up on that port: a request for one of its models finds it once the
            # discovery's back-off after the failed looks has passed (issue 42: 1 s doubling, so a
            # burst of unknown ids against a down upstream is a few /models calls, not one each)
            fake = FakeUpstream(models=["late-model"])
            await aiohttp_server(fake.app(), port=port)
            async with asyncio.timeout(20):
                while True:
                    async with session.post(gateway.base_url + "/v1/chat/completions", json={
                            "model": "late-model", "messages": [{"role": "user", "content": "hi"}]}) as resp:
                        if resp.status == 200:
                            assert (await resp.json())["model"] == "late-model"
                            break
                        assert resp.status == 404, await resp.text()  # not yet looked again
                    await asyncio.sleep(0.5)
            assert fake.requests[-1]["model"] == "late-model"
    finally:
        assert await gateway.stop() == 0
    assert gateway.proc.stderr is not None
    err = (await gateway.proc.stderr.read()).decode()
    assert "model routes: auto" in err and "did not answer" in err  # the banner says so


def _write_routes(home: Any, upstream: FakeUpstream, second_url: str) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump({"models": {
        "one": {"model": "fake-model", "base_url": upstream.base_url, "api_key_env": "ONE_KEY",
                "context_window": 4096, "fallbacks": ["two"]},
        "two": {"model": "gone-model", "base_url": second_url},
    }}))


async def test_serve_banner_lists_the_routes_and_whether_each_upstream_answered(tmp_path, upstream):
    down = f"http://127.0.0.1:{_free_port()}/v1"
    _write_routes(tmp_path, upstream, down)
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model", "ONE_KEY": KEY})
    gateway = await start_gateway(env=env)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(gateway.base_url + "/v1/chat/completions", json={
                    "model": "one", "messages": [{"role": "user", "content": "hi"}]}) as resp:
                assert resp.status == 200 and (await resp.json())["model"] == "one"
    finally:
        assert await gateway.stop() == 0
    assert upstream.headers[-1]["Authorization"] == f"Bearer {KEY}"
    assert gateway.proc.stderr is not None
    err = (await gateway.proc.stderr.read()).decode()
    assert f"model route one: fake-model at {upstream.base_url}, upstream answered; context window 4096; " \
           "fallbacks two" in err
    assert f"model route two: gone-model at {down}, upstream did not answer" in err
    assert "POST /v1/chat/completions 200" in err and "model=one" in err  # the access line names the route
    assert KEY not in err


async def test_config_check_lists_routes_and_warns_about_a_missing_key_and_a_down_upstream(tmp_path, upstream):
    down = f"http://127.0.0.1:{_free_port()}/v1"
    _write_routes(tmp_path, upstream, down)
    code, out, err = await run_cli("config", "check", env=gateway_env(tmp_path, {
        "LLM_BASE_URL": upstream.base_url, "API_SERVER_PORT": "0"}))  # whatever holds 8642 on this machine
    assert code == 0, err
    assert "model route one: fake-model at" in out and "upstream answered" in out
    assert "model route two: gone-model at" in out
    assert "ONE_KEY (its api_key_env) is not set" in out + err
    assert f"the upstream at {down} did not answer" in out + err
    code, out, _ = await run_cli("config", "get", "models", env=gateway_env(tmp_path))
    assert code == 0 and "one -> fake-model" in out and "fallbacks two" in out


async def test_config_check_names_what_is_wrong_in_the_routes(tmp_path):
    cases = {
        "unknown key": ({"a": {"model": "x", "fallback": ["b"]}}, "route 'a': unknown key 'fallback'"),
        "unknown fallback": ({"a": {"model": "x", "fallbacks": ["c"]}}, "route 'a': fallback 'c' is not a route"),
        "cycle": ({"a": {"fallbacks": ["b"]}, "b": {"fallbacks": ["a"]}},
                  "fallbacks go round in a circle: a -> b -> a"),
        "a key, not a name": ({"a": {"api_key_env": "sk-live-0123456789"}}, "never the key itself"),
        "bad choice": ({"a": {"web_tools": "sometimes"}}, "web_tools is one of always, on_request, off"),
        "bad url": ({"a": {"base_url": "ftp://x"}}, "route 'a': base_url:"),
    }
    for name, (routes, message) in cases.items():
        (tmp_path / "config.yaml").write_text(yaml.safe_dump({"models": routes}))
        code, out, err = await run_cli("config", "check", env=gateway_env(tmp_path))
        assert code != 0, name
        assert message in out + err, (name, out + err)
        assert "sk-live-0123456789" not in out + err
        code, _, err = await run_cli("serve", "--port", "0", env=gateway_env(tmp_path))
        assert code == 2 and message in err and "Traceback" not in err, name


async def test_config_set_builds_a_profiles_routes_field_by_field_and_refuses_a_bad_one(tmp_path, upstream):
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "API_SERVER_PORT": "0"})  # 8642 may be taken
    assert (await run_cli("profile", "create", "team", "--no-key", env=env))[0] == 0
    for key, value in (("models.fast.model", "fake-model"), ("models.slow.model", "other-model"),
                       ("models.fast.fallbacks", "slow"), ("models.fast.web_tools", "off"),
                       ("models.fast.context_window", "4096")):
        code, _, err = await run_cli("-p", "team", "config", "set", key, value, env=env)
        assert code == 0 and "warning" not in err, (key, err)
    written = yaml.safe_load((tmp_path / "profiles" / "team" / "config.yaml").read_text())["models"]
    assert written["fast"] == {"model": "fake-model", "fallbacks": ["slow"], "web_tools": "off",
                               "context_window": 4096}
    code, _, err = await run_cli("-p", "team", "config", "set", "models.fast.fallbacks", "nowhere", env=env)
    assert code == 2 and "fallback 'nowhere' is not a route" in err
    code, _, err = await run_cli("-p", "team", "config", "set", "models.fast.colour", "red", env=env)
    assert code == 2 and "unknown key 'colour'" in err
    code, out, err = await run_cli("-p", "team", "config", "check", env=env)
    assert code == 0, err
    assert "model route fast: fake-model at" in out and "fallbacks slow" in out
    assert "model route team (default)" in out  # the profile's model name: the default upstream
