"""`agent-gateway serve` as a real process: startup, the bind guard, SIGTERM, bad settings."""

from __future__ import annotations

import asyncio

import aiohttp

from tests.fakes.upstream import Reply
from tests.support.gateway_process import gateway_env, run_cli, start_gateway


async def test_serve_prints_url_and_answers(tmp_path, upstream):
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model"})
    gateway = await start_gateway(env=env)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(gateway.base_url + "/health") as resp:
                assert await resp.json() == {"status": "ok"}
            async with session.post(gateway.base_url + "/v1/chat/completions",
                                    json={"messages": [{"role": "user", "content": "hi"}]}) as resp:
                assert resp.status == 200
                assert (await resp.json())["choices"][0]["message"]["content"] == "Hello from the fake model."
                request_id = resp.headers["X-Request-Id"]
    finally:
        assert await gateway.stop() == 0
    # the access line (written in batches off the request path) is on stderr by the time serve exits
    assert gateway.proc.stderr is not None
    err = (await gateway.proc.stderr.read()).decode()
    assert f"INFO agent_gateway.access [{request_id}] POST /v1/chat/completions 200" in err


async def test_loopback_without_key_warns_but_runs(tmp_path, upstream):
    gateway = await start_gateway(env=gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url}))
    await gateway.stop()
    assert gateway.proc.stderr is not None
    said = (await gateway.proc.stderr.read()).decode()
    assert "API_SERVER_KEY" in said and "anyone on this machine" in said


async def test_with_store_keys_serve_does_not_say_anyone_can_use_the_gateway(tmp_path, upstream):
    """Issue 42: the warning said "anyone on this machine can use the gateway" while the keys
    made with `keys create` were enforced."""
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url})
    code, _, err = await run_cli("keys", "create", "alice", env=env)
    assert code == 0, err
    gateway = await start_gateway(env=env)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(gateway.base_url + "/v1/models") as resp:
                assert resp.status == 401  # enforced indeed
    finally:
        await gateway.stop()
    assert gateway.proc.stderr is not None
    assert "anyone on this machine" not in (await gateway.proc.stderr.read()).decode()


async def test_non_loopback_bind_without_key_is_refused(tmp_path):
    code, out, err = await run_cli("serve", "--host", "0.0.0.0", "--port", "0", env=gateway_env(tmp_path))
    assert code != 0
    assert "API_SERVER_KEY" in err
    assert "listening" not in out


async def test_non_loopback_bind_from_env_without_key_is_refused(tmp_path):
    env = gateway_env(tmp_path, {"API_SERVER_HOST": "0.0.0.0"})
    code, _, err = await run_cli("serve", "--port", "0", env=env)
    assert code != 0 and "API_SERVER_KEY" in err


async def test_invalid_port_stops_serve_with_one_line_naming_it(tmp_path):
    code, _, err = await run_cli("serve", env=gateway_env(tmp_path, {"API_SERVER_PORT": "abc"}))
    assert code == 2
    assert "API_SERVER_PORT" in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


async def test_unreadable_yaml_stops_serve_naming_the_file(tmp_path):
    (tmp_path / "config.yaml").write_text("web: [unclosed\n")
    code, _, err = await run_cli("serve", env=gateway_env(tmp_path))
    assert code == 2 and "config.yaml" in err and "Traceback" not in err


async def test_negative_limit_is_refused(tmp_path):
    code, _, err = await run_cli("serve", env=gateway_env(tmp_path, {"API_SERVER_MAX_CONCURRENT_RUNS": "-3"}))
    assert code == 2 and "API_SERVER_MAX_CONCURRENT_RUNS" in err


async def test_disabled_server_exits_with_a_message(tmp_path):
    code, out, err = await run_cli("serve", env=gateway_env(tmp_path, {"API_SERVER_ENABLED": "false"}))
    assert code == 0
    assert "API_SERVER_ENABLED" in err and "listening" not in out


async def test_sigterm_lets_in_flight_finish_and_refuses_new_requests(tmp_path, upstream):
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                 "API_SERVER_SHUTDOWN_GRACE": "10"})
    gateway = await start_gateway(env=env)
    upstream.queue(Reply(text="finished despite shutdown", delay=1.0))
    async with aiohttp.ClientSession() as session:
        in_flight = asyncio.ensure_future(session.post(
            gateway.base_url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}))
        while not upstream.requests:
            await asyncio.sleep(0.02)
        gateway.proc.terminate()
        await asyncio.sleep(0.3)
        async with session.get(gateway.base_url + "/v1/models") as refused:
            assert refused.status == 503
            assert refused.headers["Retry-After"] == "1"
            assert (await refused.json())["error"]["code"] == "service_unavailable"
        resp = await in_flight
        assert resp.status == 200
        assert (await resp.json())["choices"][0]["message"]["content"] == "finished despite shutdown"
    assert await asyncio.wait_for(gateway.proc.wait(), 15) == 0


async def test_serving_a_profile_that_does_not_exist_is_refused(tmp_path):
    code, out, err = await run_cli("-p", "typo", "serve", "--port", "0", env=gateway_env(tmp_path))
    assert code == 2
    assert "profile create typo" in err and "listening" not in out
