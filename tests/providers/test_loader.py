"""Plugin discovery from real folders: bundled, user (opt-in) and pip entry points."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.config.settings import load_settings
from providers.loader import load_registry

REPO = Path(__file__).resolve().parents[2]

PROVIDER_PY = '''
from providers.web import WebSearchProvider, search_result


class {cls}(WebSearchProvider):
    name = "{provider}"

    def search(self, query, limit=5):
        return search_result([{{"title": "from {plugin}", "url": "https://x.test/", "description": ""}}])
'''

INIT_PY = '''
from .provider import {cls}


def register(ctx):
    ctx.register_web_search_provider({cls}())
'''


def write_plugin(root: Path, plugin: str, provider: str, *, init: str | None = None,
                 manifest: str | None = None) -> Path:
    folder = root / plugin
    folder.mkdir(parents=True)
    cls = "P" + uuid.uuid4().hex[:6]
    (folder / "provider.py").write_text(PROVIDER_PY.format(cls=cls, provider=provider, plugin=plugin))
    init_source = textwrap.dedent(init) if init is not None else INIT_PY.format(cls=cls)
    (folder / "__init__.py").write_text(init_source)
    (folder / "plugin.yaml").write_text(
        manifest if manifest is not None
        else f"name: {plugin}\nkind: backend\nprovides_web_providers: [{provider}]\nrequires_env: []\n"
    )
    return folder


def settings_for(home: Path, enabled: str = "", **env: str):
    environ = dict(env)
    if enabled:
        environ["PLUGINS_ENABLED"] = enabled
    return load_settings(home, environ=environ).plugin_settings()


def user_root(home: Path) -> Path:
    return home / "plugins" / "web"


def test_bundled_plugins_load_without_errors(tmp_path: Path):
    registry = load_registry(settings_for(tmp_path))
    assert registry.load_errors == []
    bundled = {
        "searxng", "brave-free", "ddgs", "fetch",
        "tavily", "exa", "firecrawl", "parallel", "perplexity", "keenable", "xai",
    }
    assert {p.name for p in registry.providers()} == bundled
    assert {info.name for info in registry.plugins if info.origin == "bundled"} == bundled


def test_bundled_providers_read_keys_from_the_profile_env(tmp_path: Path):
    (tmp_path / ".env").write_text("SEARXNG_URL=http://127.0.0.1:9\n")
    registry = load_registry(load_settings(tmp_path, environ={}).plugin_settings())
    assert registry.get("searxng").is_available()
    assert registry.select("search").provider.name == "searxng"


def test_user_plugin_is_not_loaded_unless_enabled(tmp_path: Path):
    write_plugin(user_root(tmp_path), "mine", "mine-search")
    registry = load_registry(settings_for(tmp_path))
    assert registry.get("mine-search") is None
    [info] = [i for i in registry.plugins if i.origin == "user"]
    assert (info.name, info.enabled) == ("mine", False)

    registry = load_registry(settings_for(tmp_path, enabled="mine"))
    assert registry.get("mine-search") is not None
    assert registry.load_errors == []


def test_enabled_user_plugin_overrides_a_bundled_provider(tmp_path: Path):
    write_plugin(user_root(tmp_path), "my-searxng", "searxng")
    registry = load_registry(settings_for(tmp_path, enabled="my-searxng"))
    assert registry.load_errors == []
    result = registry.get("searxng").search("q")
    assert result["data"]["web"][0]["title"] == "from my-searxng"
    assert registry.origin("searxng") == ("my-searxng", "user")


def test_broken_plugin_is_reported_and_the_others_keep_working(tmp_path: Path):
    root = user_root(tmp_path)
    write_plugin(root, "broken", "broken-search", init="import not_a_module_anywhere\n")
    write_plugin(root, "good", "good-search")
    registry = load_registry(settings_for(tmp_path, enabled="broken,good"))
    assert registry.get("good-search") is not None
    [error] = registry.load_errors
    assert error.plugin == "broken"
    assert "ModuleNotFoundError" in error.reason and "not_a_module_anywhere" in error.reason


def test_plugin_failing_inside_register_leaves_nothing_registered(tmp_path: Path):
    init = '''
    from .provider import *  # noqa
    from providers.web import WebSearchProvider

    class Half(WebSearchProvider):
        name = "half"

    def register(ctx):
        ctx.register_web_search_provider(Half())
        raise RuntimeError("second provider needs a key")
    '''
    write_plugin(user_root(tmp_path), "half", "half", init=init)
    registry = load_registry(settings_for(tmp_path, enabled="half"))
    assert registry.get("half") is None
    assert [(e.plugin, e.reason) for e in registry.load_errors] == [
        ("half", "RuntimeError: second provider needs a key")
    ]


@pytest.mark.parametrize(
    ("manifest", "reason"),
    [
        (None, "missing plugin.yaml"),
        ("kind: frontend\n", "kind 'frontend' is not supported"),
        ("name: [unclosed\n", "cannot read"),
        ("auto_order: first\n", "auto_order must be a whole number"),
        ("extract_role: sometimes\n", "extract_role must be one of general, index-only"),
        ("env: [mysearch_key]\n", "env names 'mysearch_key', which is not an UPPER_CASE variable name"),
        ("env:\n  - {name: MYSEARCH_KEY, secret: maybe}\n", "secret must be true or false"),
    ],
)
def test_bad_manifests_are_reported(tmp_path: Path, manifest: str | None, reason: str):
    folder = write_plugin(user_root(tmp_path), "odd", "odd-search")
    if manifest is None:
        (folder / "plugin.yaml").unlink()
    else:
        (folder / "plugin.yaml").write_text(manifest)
    registry = load_registry(settings_for(tmp_path, enabled="odd"))
    assert registry.get("odd-search") is None
    [error] = registry.load_errors
    assert reason in error.reason


def test_bundled_providers_come_in_the_documented_automatic_order(tmp_path: Path):
    registry = load_registry(settings_for(tmp_path))
    assert [p.name for p in registry.providers()] == [
        "tavily", "exa", "firecrawl", "parallel", "perplexity", "xai",
        "brave-free", "searxng", "keenable", "ddgs", "fetch",
    ]


def test_a_user_plugin_ranks_itself_with_auto_order(tmp_path: Path):
    manifest = "name: {0}\nkind: backend\nprovides_web_providers: [{0}-search]\n"
    write_plugin(user_root(tmp_path), "ranked", "ranked-search", manifest=manifest.format("ranked") + "auto_order: 5\n")
    write_plugin(user_root(tmp_path), "plain", "plain-search", manifest=manifest.format("plain"))
    registry = load_registry(settings_for(tmp_path, enabled="ranked,plain"))
    names = [p.name for p in registry.providers()]
    assert names[0] == "ranked-search" and names[-1] == "plain-search"
    assert registry.select("search").provider.name == "ranked-search"


def test_plugins_get_plugin_settings_not_the_gateway_settings(tmp_path: Path):
    init = '''
    from providers.web import WebSearchProvider

    class Peek(WebSearchProvider):
        name = "peek"

    def register(ctx):
        provider = Peek()
        provider.seen = ctx.settings
        ctx.register_web_search_provider(provider)
    '''
    write_plugin(user_root(tmp_path), "peek", "peek", init=init)
    registry = load_registry(settings_for(tmp_path, enabled="peek", AGENT_TOOL_TIMEOUT="12",
                                          WEB_ALLOW_PRIVATE_URLS="true", LLM_API_KEY="sk-upstream"))
    seen = registry.get("peek").seen
    assert type(seen).__name__ == "PluginSettings"
    assert (seen.tool_timeout, seen.allow_private_urls, seen.home) == (12.0, True, tmp_path)
    assert seen.env["LLM_API_KEY"] == "sk-upstream"  # the environment, as documented: not hidden
    assert not hasattr(seen, "llm_api_key") and not hasattr(seen, "api_key")


def test_enabled_plugin_without_a_folder_is_reported(tmp_path: Path):
    registry = load_registry(settings_for(tmp_path, enabled="ghost"))
    [error] = registry.load_errors
    assert error.plugin == "ghost"
    assert "does not exist" in error.reason


def test_two_user_plugins_claiming_one_name_report_the_second(tmp_path: Path):
    root = user_root(tmp_path)
    write_plugin(root, "one", "same")
    write_plugin(root, "two", "same")
    registry = load_registry(settings_for(tmp_path, enabled="one,two"))
    assert registry.origin("same") == ("one", "user")
    [error] = registry.load_errors
    assert error.plugin == "two" and "already registered by user plugin 'one'" in error.reason


# -- entry points ------------------------------------------------------------------------------
@pytest.fixture
def site_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on sys.path where tests install fake distributions (dist-info + module)."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))  # also invalidates import caches
    before = set(sys.modules)
    yield site
    for name in set(sys.modules) - before:
        if name.startswith("agw_ep_"):
            del sys.modules[name]


def install_distribution(site: Path, dist: str, entry_points: str, modules: dict[str, str]) -> None:
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[agent_gateway.plugins]\n{entry_points}\n")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))


EP_MODULE = '''
from providers.web import WebSearchProvider


class Pip(WebSearchProvider):
    name = "{provider}"


def register(ctx):
    ctx.register_web_search_provider(Pip())
'''


def test_entry_point_module_plugin_is_loaded(tmp_path: Path, site_dir: Path):
    module = f"agw_ep_{uuid.uuid4().hex[:6]}"
    install_distribution(site_dir, "agw-pip-plugin", f"pipsearch = {module}",
                         {module: EP_MODULE.format(provider="pip-search")})
    registry = load_registry(settings_for(tmp_path))
    assert registry.load_errors == []
    assert registry.origin("pip-search") == ("pipsearch", "entry point")


def test_entry_point_register_callable_is_loaded(tmp_path: Path, site_dir: Path):
    module = f"agw_ep_{uuid.uuid4().hex[:6]}"
    install_distribution(site_dir, "agw-pip-callable", f"callable = {module}:register",
                         {module: EP_MODULE.format(provider="pip-callable")})
    registry = load_registry(settings_for(tmp_path))
    assert registry.get("pip-callable") is not None


def test_broken_entry_point_is_reported_and_cannot_take_a_bundled_name(tmp_path: Path, site_dir: Path):
    broken = f"agw_ep_{uuid.uuid4().hex[:6]}"
    thief = f"agw_ep_{uuid.uuid4().hex[:6]}"
    install_distribution(
        site_dir, "agw-pip-bad", f"broken = {broken}\nthief = {thief}",
        {broken: "raise ImportError('needs libfoo')\n", thief: EP_MODULE.format(provider="searxng")},
    )
    registry = load_registry(settings_for(tmp_path))
    reasons = {e.plugin: e.reason for e in registry.load_errors}
    assert reasons["broken"] == "ImportError: needs libfoo"
    assert "already registered by bundled plugin 'searxng'" in reasons["thief"]
    assert registry.origin("searxng") == ("searxng", "bundled")


def install_package(site: Path, dist: str, package: str, manifest: str | None, provider: str) -> None:
    """A distribution whose entry point is a package, optionally shipping a plugin.yaml.

    Name the distribution without '-': importlib.metadata reads a dist-info folder's name up to the
    first '-', so two hyphenated names starting alike would count as one distribution."""
    install_distribution(site, dist, f"{package} = {package}", {})
    (site / package).mkdir()
    (site / package / "__init__.py").write_text(textwrap.dedent(EP_MODULE.format(provider=provider)))
    if manifest is not None:
        (site / package / "plugin.yaml").write_text(manifest)


def test_an_entry_point_package_may_declare_variables_and_a_rank_in_its_plugin_yaml(
    tmp_path: Path, site_dir: Path
):
    from gateway.config.envvars import known_variables

    with_manifest, without = f"agw_ep_{uuid.uuid4().hex[:6]}", f"agw_ep_{uuid.uuid4().hex[:6]}"
    install_package(site_dir, "agw_pip_declared", with_manifest, "name: pipdeclared\nkind: backend\n"
                    "env:\n  - {name: PIPDECLARED_TOKEN, secret: true}\nauto_order: 1\n", "pip-declared")
    install_package(site_dir, "agw_pip_bare", without, None, "pip-bare")
    assert "PIPDECLARED_TOKEN" in known_variables()  # read without importing the package
    assert with_manifest not in sys.modules
    registry = load_registry(settings_for(tmp_path))
    assert registry.load_errors == []
    names = [p.name for p in registry.providers()]
    assert names[0] == "pip-declared" and names[-1] == "pip-bare"


def test_every_bundled_provider_has_its_own_test_module():
    bundled = [p.name for p in (REPO / "plugins" / "web").iterdir() if (p / "plugin.yaml").is_file()]
    assert bundled, "no bundled plugins found"
    missing = [name for name in bundled if not (REPO / "tests" / "providers" / f"test_provider_{name}.py").is_file()]
    assert missing == [], f"bundled providers without tests/providers/test_provider_<dir>.py: {missing}"
