"""The admin page's files and GET /v1/admin/status over HTTP (the page in a browser:
tests/http/test_admin_page_browser.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.config.settings import OPTIONS_BY_KEY, parse_option
from tests.conftest import API_KEY
from tests.fakes.upstream import FakeUpstream
from tests.keys.test_keys_isolation import make_key

PAGE_FILES = {"/admin": "text/html", "/admin/admin.css": "text/css", "/admin/admin.js": "text/javascript",
              "/admin/chart.js": "text/javascript"}


def models(value: Any) -> Any:
    """The `models` setting as config.yaml would give it."""
    return parse_option(OPTIONS_BY_KEY["models"], value, "config.yaml")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_the_page_and_its_files_need_no_key_and_carry_a_strict_csp(make_client: Callable[..., Any]) -> None:
    client = await make_client(api_key=API_KEY)
    for path, content_type in PAGE_FILES.items():
        reply = await client.get(path)
        assert reply.status == 200, path
        assert reply.headers["Content-Type"] == f"{content_type}; charset=utf-8"
        csp = dict(part.strip().split(" ", 1) for part in reply.headers["Content-Security-Policy"].split(";"))
        assert csp["default-src"] == "'none'"
        assert csp["script-src"] == "'self'" and csp["style-src"] == "'self'" and csp["connect-src"] == "'self'"
        assert csp["frame-ancestors"] == "'none'"
        assert csp["require-trusted-types-for"] == "'script'"  # no string reaches an HTML sink
        # the headers every response has
        assert reply.headers["X-Content-Type-Options"] == "nosniff"
        assert reply.headers["Referrer-Policy"] == "no-referrer"
        assert reply.headers["X-Frame-Options"] == "DENY"
    assert (await client.get("/v1/admin/status")).status == 401  # the API behind it does need one


async def test_the_page_has_no_inline_script_or_style_and_loads_only_its_own_files(
        make_client: Callable[..., Any]) -> None:
    client = await make_client(api_key=API_KEY)
    html = await (await client.get("/admin")).text()
    assert re.findall(r"<script\b[^>]*>", html) == ['<script type="module" src="admin/admin.js">']
    assert "<style" not in html and not re.search(r"\s(?:style|on[a-z]+)=", html)  # no inline style or handler
    assert re.findall(r'(?:src|href)="([^"]+)"', html) == ["admin/admin.css", "admin/admin.js"]
    for path in ("/admin/admin.js", "/admin/chart.js"):
        script = await (await client.get(path)).text()
        assert "innerHTML" not in script and "eval(" not in script
        # no address of another origin in a string (the SVG namespace is a name, never fetched)
        assert re.findall(r"[\"'`](?:https?:)?//[^\"'`]*", script) in ([], ['"http://www.w3.org/2000/svg'])


async def test_other_paths_under_admin_are_404_in_the_envelope(make_client: Callable[..., Any]) -> None:
    client = await make_client(api_key=API_KEY)
    for path in ("/admin/", "/admin/index.html", "/admin/__init__.py", "/admin/admin.js.map"):
        reply = await client.get(path, headers=bearer(API_KEY))
        assert reply.status == 404, path
        assert (await reply.json())["error"]["code"] is not None


async def test_status_needs_an_admin_key(tmp_path: Path, make_client: Callable[..., Any]) -> None:
    plain, admin = await make_key(tmp_path, "plain"), await make_key(tmp_path, "boss", "--admin")
    client = await make_client(api_key=API_KEY)
    assert (await client.get("/v1/admin/status")).status == 401
    assert (await client.get("/v1/admin/status", headers=bearer("sk-wrong"))).status == 401
    for not_admin in (plain, API_KEY):  # API_SERVER_KEY is no admin either: admins are made in the store
        refused = await client.get("/v1/admin/status", headers=bearer(not_admin))
        assert refused.status == 403
        assert set((await refused.json())["error"]) == {"message", "type", "param", "code"}
    allowed = await client.get("/v1/admin/status", headers=bearer(admin))
    assert allowed.status == 200 and allowed.headers["Cache-Control"] == "no-store"


async def test_a_keyless_gateway_has_no_status_route(make_client: Callable[..., Any]) -> None:
    client = await make_client()
    assert (await client.get("/admin")).status == 200  # the page says how to make the first admin
    reply = await client.get("/v1/admin/status")
    assert reply.status == 404 and (await reply.json())["error"]["message"]


async def test_status_says_which_model_routes_answer_and_what_runs(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream, refused_url: str) -> None:
    admin = await make_key(tmp_path, "boss", "--admin")
    table = models({
        "fast": {"model": "fake-model"},
        "gone": {"model": "other", "base_url": refused_url},
        "first": {"model": "fake-model", "fallbacks": ["gone"]},
    })
    client = await make_client(api_key=API_KEY, llm_models=table, model_name="fast", max_concurrent_runs=3)
    reply = await client.get("/v1/admin/status", headers=bearer(admin))
    assert reply.status == 200
    status = await reply.json()
    assert status["object"] == "admin.status" and status["replica"]
    routes = {route["id"]: route for route in status["model_routes"]}
    assert set(routes) == {"fast", "gone", "first"}
    assert routes["fast"]["default"] is True and routes["fast"]["answers"] is True
    assert routes["fast"]["listed"] is True and isinstance(routes["fast"]["latency_ms"], int)
    assert routes["gone"]["answers"] is False and routes["gone"]["error"] and routes["gone"]["listed"] is None
    assert routes["gone"]["upstream"] == refused_url
    assert routes["first"]["fallbacks"] == ["gone"] and routes["first"]["default"] is False
    assert status["runs"] == {"active": 0, "limit": 3, "requests_in_flight": 1, "background": 0,
                              "background_ids": [], "queue": True}


async def test_status_lists_the_web_providers_and_their_chains(tmp_path: Path,
                                                               make_client: Callable[..., Any]) -> None:
    admin = await make_key(tmp_path, "boss", "--admin")
    client = await make_client(web_search_backend="searxng", env={"SEARXNG_URL": "http://127.0.0.1:9"})
    status = await (await client.get("/v1/admin/status", headers=bearer(admin))).json()
    providers = {p["name"]: p for p in status["web"]["providers"]}
    assert providers["searxng"]["search"] is True and providers["searxng"]["chains"] == {"search": 0}
    assert status["web"]["chains"]["search"] == ["searxng"]
    assert set(status["web"]["cache"]) >= {"entries", "hits", "misses"}


def test_the_page_files_are_shipped_as_package_data() -> None:
    """Each file the page route serves matches the package-data globs, so a wheel carries it (a
    wheel built from this checkout was seen to: see the commit adding the page)."""
    import tomllib
    from fnmatch import fnmatch

    from gateway.http.routes.admin_page import FILES

    root = Path(__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for name, _ in FILES.values():
        assert (root / "gateway" / "http" / "admin" / name).is_file()
        assert any(fnmatch(name, pattern) for pattern in globs["gateway.http.admin"]), name
