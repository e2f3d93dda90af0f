"""The bundled providers as a set: manifests agree with code, docs list every variable, tests exist."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import yaml

import plugins.web
from tests.fakes.registry_ctx import RecordingContext

PLUGIN_ROOT = Path(plugins.web.__file__).parent
REPO = PLUGIN_ROOT.parent.parent
# The providers of issue 6; the keyless ones (searxng, ddgs, ...) carry their own tests.
PAID_AND_KEYLESS_API_PROVIDERS = ["tavily", "exa", "firecrawl", "parallel", "perplexity", "keenable", "xai"]


def _manifest(dirname: str) -> dict[str, Any]:
    return yaml.safe_load((PLUGIN_ROOT / dirname / "plugin.yaml").read_text(encoding="utf-8"))


def _variables(manifest: dict[str, Any]) -> list[str]:
    declared = [item["name"] for item in manifest.get("env") or []]
    return declared + [name for name in manifest.get("requires_env") or [] if name not in declared]


@pytest.mark.parametrize("dirname", PAID_AND_KEYLESS_API_PROVIDERS)
def test_manifest_names_the_provider_that_register_adds(dirname: str) -> None:
    manifest = _manifest(dirname)
    ctx = RecordingContext({var: "set" for var in _variables(manifest)})

    importlib.import_module(f"plugins.web.{dirname}").register(ctx)

    assert manifest["kind"] == "backend"
    assert manifest["name"] == dirname
    assert [p.name for p in ctx.providers] == manifest["provides_web_providers"]
    assert all(p.is_available() for p in ctx.providers)


@pytest.mark.parametrize("dirname", PAID_AND_KEYLESS_API_PROVIDERS)
def test_a_provider_missing_its_variables_says_which_to_set(dirname: str) -> None:
    manifest = _manifest(dirname)
    ctx = RecordingContext({})

    importlib.import_module(f"plugins.web.{dirname}").register(ctx)

    required = list(manifest.get("requires_env") or [])
    for provider in ctx.providers:
        if required:
            assert provider.is_available() is False
        if not provider.is_available():
            reason = provider.unavailable_reason() or ""
            assert reason.startswith("set ")
            assert all(var in reason for var in required)
            assert any(var in reason for var in _variables(manifest))


@pytest.mark.parametrize("dirname", PAID_AND_KEYLESS_API_PROVIDERS)
def test_docs_list_every_variable_of_the_provider(dirname: str) -> None:
    docs = (REPO / "docs" / "providers.md").read_text(encoding="utf-8")

    assert f"`{dirname}`" in docs
    for var in _variables(_manifest(dirname)):
        assert f"`{var}`" in docs


def test_bundled_plugins_declare_the_provider_variables_config_has_always_known() -> None:
    from gateway.config.envvars import plugin_variables

    declared = plugin_variables()
    assert set(declared) == {
        "SEARXNG_URL", "SEARXNG_LANGUAGE", "SEARXNG_TIMEOUT",
        "BRAVE_SEARCH_API_KEY", "BRAVE_SEARCH_API_URL", "BRAVE_SEARCH_TIMEOUT",
        "TAVILY_API_KEY", "TAVILY_API_URL", "EXA_API_KEY", "EXA_API_URL",
        "FIRECRAWL_API_KEY", "FIRECRAWL_API_URL", "PARALLEL_API_KEY", "PARALLEL_API_URL",
        "PERPLEXITY_API_KEY", "PERPLEXITY_API_URL", "KEENABLE_API_KEY", "KEENABLE_API_URL",
        "XAI_API_KEY", "XAI_API_URL", "XAI_MODEL", "XAI_REASONING_EFFORT",
        "DDGS_REGION", "DDGS_SAFESEARCH", "DDGS_BACKEND", "DDGS_TIMEOUT",
    }
    assert {name for name, var in declared.items() if var.secret} == {n for n in declared if n.endswith("_API_KEY")}
    assert all(var.help for var in declared.values())


def test_every_bundled_provider_has_tests_of_its_own() -> None:
    tests = [p.read_text(encoding="utf-8") for p in (REPO / "tests").rglob("test_*.py")]
    bundled = sorted(p.parent.name for p in PLUGIN_ROOT.glob("*/plugin.yaml"))

    untested = [name for name in bundled if not any(f"plugins.web.{name}" in t for t in tests)]

    assert untested == []
