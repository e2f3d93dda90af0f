"""The context window as each kind of upstream states it (gateway/upstream/context_window.py),
against real HTTP servers speaking those servers' shapes."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from gateway.upstream.client import UpstreamClient
from gateway.upstream.context_window import DEFAULT_CONTEXT_WINDOW, ContextWindows


async def _windows(aiohttp_server: Any, entry: dict[str, Any], props: dict[str, Any] | None,
                   configured: int | None = None) -> tuple[ContextWindows, UpstreamClient]:
    app = web.Application()

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "other"}, {"id": "the-model", **entry}]})

    async def props_route(request: web.Request) -> web.Response:
        return web.json_response(props) if props is not None else web.json_response({}, status=404)

    app.router.add_get("/v1/models", models)
    app.router.add_get("/props", props_route)
    server = await aiohttp_server(app)
    client = UpstreamClient(str(server.make_url("/v1")), api_key=None, model="the-model",
                            connect_timeout=5, read_timeout=5)
    await client.start()
    return ContextWindows(client.get_json, configured), client


@pytest.mark.parametrize(("entry", "props", "expected"), [
    ({"max_model_len": 8192}, None, 8192),  # vLLM
    ({"context_length": 200000}, None, 200000),  # OpenRouter
    ({"meta": {"n_ctx_train": 131072}}, {"default_generation_settings": {"n_ctx": 4096}}, 4096),  # llama.cpp
    ({"meta": {"n_ctx_train": 131072}}, None, 131072),  # llama.cpp without /props
    ({}, None, DEFAULT_CONTEXT_WINDOW),  # Ollama: nothing stated
])
async def test_the_window_is_what_the_upstream_states(aiohttp_server: Any, entry: dict[str, Any],
                                                      props: dict[str, Any] | None, expected: int) -> None:
    windows, client = await _windows(aiohttp_server, entry, props)
    try:
        assert await windows.tokens("the-model") == expected
    finally:
        await client.close()


async def test_the_setting_wins_over_the_upstream(aiohttp_server: Any) -> None:
    windows, client = await _windows(aiohttp_server, {"max_model_len": 8192}, None, configured=1000)
    try:
        assert await windows.tokens("the-model") == 1000
    finally:
        await client.close()


async def test_a_failed_lookup_is_asked_again_on_the_next_turn(aiohttp_server: Any) -> None:
    answers = iter([web.json_response({"error": "starting"}, status=503),
                    web.json_response({"data": [{"id": "the-model", "max_model_len": 4096}]})])
    app = web.Application()

    async def models(request: web.Request) -> web.Response:
        return next(answers)

    app.router.add_get("/v1/models", models)
    server = await aiohttp_server(app)
    client = UpstreamClient(str(server.make_url("/v1")), api_key=None, model="the-model",
                            connect_timeout=5, read_timeout=5)
    await client.start()
    try:
        windows = ContextWindows(client.get_json, None)
        assert await windows.tokens("the-model") == DEFAULT_CONTEXT_WINDOW
        assert await windows.tokens("the-model") == 4096
    finally:
        await client.close()
