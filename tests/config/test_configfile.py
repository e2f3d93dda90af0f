"""Editing .env and config.yaml keeps everything else in them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml

from gateway.config.files import set_config_value, set_env_value, unset_config_value, unset_env_value
from gateway.config.settings import load_settings, read_dotenv


def test_set_env_value_creates_the_file_and_parents_readable_by_owner_only(tmp_path: Path):
    path = tmp_path / "profiles" / "work" / ".env"
    set_env_value(path, "TAVILY_API_KEY", "tvly-123")
    assert path.read_text() == "TAVILY_API_KEY=tvly-123\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_set_env_value_replaces_in_place_and_keeps_other_lines(tmp_path: Path):
    path = tmp_path / ".env"
    path.write_text("# keys\nexport SEARXNG_URL=http://old\nLLM_MODEL=qwen\nSEARXNG_URL=dup\n")
    set_env_value(path, "SEARXNG_URL", "http://new:8888")
    assert path.read_text() == "# keys\nSEARXNG_URL=http://new:8888\nLLM_MODEL=qwen\n"


@pytest.mark.parametrize("value", ["has space", "with # hash", 'say "hi"', "it's", ""])
def test_env_values_round_trip_through_the_settings_reader(tmp_path: Path, value: str):
    path = tmp_path / ".env"
    set_env_value(path, "AGENT_SYSTEM_PROMPT", value)
    assert read_dotenv(path)["AGENT_SYSTEM_PROMPT"] == value


def test_env_values_that_cannot_be_written_are_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="cannot span lines"):
        set_env_value(tmp_path / ".env", "A", "one\ntwo")
    with pytest.raises(ValueError, match="not a valid environment variable name"):
        set_env_value(tmp_path / ".env", "bad-name", "x")


def test_unset_env_value_removes_every_line_for_the_key(tmp_path: Path):
    path = tmp_path / ".env"
    path.write_text("A=1\nB=2\nexport A=3\n")
    assert unset_env_value(path, "A") is True
    assert path.read_text() == "B=2\n"
    assert unset_env_value(path, "A") is False


def test_set_config_value_nests_dotted_keys_and_keeps_the_rest(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text("model: qwen\nweb:\n  backend: searxng\n")
    set_config_value(path, "web.search_backend", "brave-free")
    set_config_value(path, "plugins.enabled", ["mine"])
    assert yaml.safe_load(path.read_text()) == {
        "model": "qwen",
        "web": {"backend": "searxng", "search_backend": "brave-free"},
        "plugins": {"enabled": ["mine"]},
    }
    settings = load_settings(tmp_path, environ={})
    assert settings.web_search_backend == "brave-free"
    assert settings.plugins_enabled == ("mine",)


def test_set_config_value_refuses_to_replace_a_value_with_a_section(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text("web: fast\n")
    with pytest.raises(ValueError, match="web in .* holds a value, not a section"):
        set_config_value(path, "web.backend", "x")
    assert path.read_text() == "web: fast\n"


def test_unset_config_value_prunes_sections_left_empty(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text("model: qwen\nweb:\n  backend: searxng\n")
    assert unset_config_value(path, "web.backend") is True
    assert yaml.safe_load(path.read_text()) == {"model": "qwen"}
    assert unset_config_value(path, "web.backend") is False
