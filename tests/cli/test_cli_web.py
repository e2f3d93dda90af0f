"""`agent-gateway tools` and `agent-gateway plugins ...` output and effects."""

from __future__ import annotations

from pathlib import Path

import yaml

from gateway.cli.web import plugins_command, tools_report
from gateway.config.settings import load_settings

USER_PLUGIN = '''
from providers.web import WebSearchProvider


class Mine(WebSearchProvider):
    name = "mine"


def register(ctx):
    ctx.register_web_search_provider(Mine())
'''


def make_user_plugin(home: Path, name: str, source: str = USER_PLUGIN) -> None:
    folder = home / "plugins" / "web" / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(source)
    (folder / "plugin.yaml").write_text(f"name: {name}\nkind: backend\nprovides_web_providers: [mine]\n")


def test_tools_report_lists_providers_availability_and_active_choices(tmp_path: Path):
    settings = load_settings(tmp_path, environ={"SEARXNG_URL": "http://127.0.0.1:8888"})
    report = tools_report(settings)
    lines = report.splitlines()
    searxng = next(line for line in lines if line.strip().startswith("searxng"))
    brave = next(line for line in lines if line.strip().startswith("brave-free"))
    fetch = next(line for line in lines if line.strip().startswith("fetch"))
    assert searxng.split()[1:5] == ["yes", "-", "-", "available"]
    assert "unavailable: set BRAVE_SEARCH_API_KEY" in brave
    assert fetch.split()[1:4] == ["-", "yes", "-"]
    assert "  search: searxng" in lines
    assert "  extract: fetch" in lines


def test_tools_report_shows_load_errors(tmp_path: Path):
    make_user_plugin(tmp_path, "broken", "raise RuntimeError('no key')\n")
    settings = load_settings(tmp_path, environ={"PLUGINS_ENABLED": "broken"})
    report = tools_report(settings)
    assert "Plugin load errors:\n  broken: RuntimeError: no key" in report


def test_plugins_enable_and_disable_edit_the_profile_config(tmp_path: Path):
    make_user_plugin(tmp_path, "mine")
    (tmp_path / "config.yaml").write_text("model: qwen\n")
    settings = load_settings(tmp_path, environ={})

    code, text = plugins_command(settings, "list")
    assert code == 0 and "disabled (enable with: agent-gateway plugins enable mine)" in text

    code, text = plugins_command(settings, "enable", "mine")
    assert code == 0 and text.startswith("enabled mine")
    assert yaml.safe_load((tmp_path / "config.yaml").read_text()) == {
        "model": "qwen", "plugins": {"enabled": ["mine"]}
    }
    reloaded = load_settings(tmp_path, environ={})
    assert "loaded: mine" in plugins_command(reloaded, "list")[1]

    code, text = plugins_command(reloaded, "disable", "mine")
    assert code == 0 and text.startswith("disabled mine")
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["plugins"]["enabled"] == []


def test_enabling_an_unknown_or_bundled_plugin_says_why(tmp_path: Path):
    settings = load_settings(tmp_path, environ={})
    code, text = plugins_command(settings, "enable", "nope")
    assert code == 1 and "no user plugin named 'nope'" in text
    code, text = plugins_command(settings, "enable", "searxng")
    assert code == 0 and "bundled plugin and is always loaded" in text
    assert not (tmp_path / "config.yaml").exists()
    assert plugins_command(settings, "frobnicate", "x")[0] == 2
