"""The OpenAPI document: served without auth, and in step with the routes the app really has."""

from __future__ import annotations

import json
from typing import Any

from gateway.http.app import create_app
from gateway.http.routes.openapi import openapi_document
from tests.conftest import API_KEY

HTTP_METHODS = {"get", "post", "put", "patch", "delete"}


def app_operations(app: Any) -> set[tuple[str, str]]:
    """(METHOD, path template) for every route; HEAD is aiohttp's automatic twin of GET, and OPTIONS
    belongs to CORS preflight, which is not an API operation."""
    ops = set()
    for route in app.router.routes():
        if route.method in ("HEAD", "OPTIONS", "*"):
            continue
        path = route.resource.canonical.replace("{model_id:.+}", "{model_id}")
        ops.add((route.method, path))
    return ops


def document_operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in doc["paths"].items() for method in item if method in HTTP_METHODS}


def test_every_route_is_documented_and_every_documented_operation_exists(settings):
    doc = json.loads(openapi_document())
    assert app_operations(create_app(settings)) == document_operations(doc)


def test_document_declares_bearer_auth_and_the_shared_error_envelope():
    doc = json.loads(openapi_document())
    assert doc["openapi"].startswith("3.1")
    assert doc["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "description": "API_SERVER_KEY, when set."}
    error = doc["components"]["schemas"]["Error"]["properties"]["error"]
    assert set(error["required"]) == {"message", "type", "param", "code"}
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    assert response == {"$ref": f"#/components/responses/{status}"}, (method, path, status)


async def test_openapi_json_is_served_without_a_key(make_client):
    client = await make_client(api_key=API_KEY)
    resp = await client.get("/openapi.json")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("application/json")
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert (await resp.json())["paths"]["/v1/chat/completions"]["post"]["operationId"] == "createChatCompletion"
    assert (await client.get("/v1/models")).status == 401


def test_the_document_is_shipped_as_package_data():
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert "*.json" in pyproject["tool"]["setuptools"]["package-data"]["*"]
