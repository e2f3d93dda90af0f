"""Settings precedence: flag > environment > profile .env > config.yaml > default."""

from __future__ import annotations

import pytest

from gateway.config.settings import SettingsError, load_settings


def test_defaults(tmp_path):
    s = load_settings(tmp_path, environ={})
    assert (s.host, s.port, s.api_key, s.model_name) == ("127.0.0.1", 8642, None, "agent-gateway")
    assert s.max_stored_responses == 100 and s.max_concurrent_runs == 32 and s.max_body_bytes == 10_000_000
    assert s.llm_base_url == "http://127.0.0.1:11434/v1" and s.llm_model is None
    assert s.db_path == tmp_path / "responses.db"


def test_precedence_flag_env_dotenv_yaml_default(tmp_path):
    (tmp_path / "config.yaml").write_text("api_server:\n  port: 1111\n  max_concurrent_runs: 3\nmodel: from-yaml\n"
                                          "web:\n  search_backend: searxng\n")
    (tmp_path / ".env").write_text("API_SERVER_PORT=2222\nLLM_MODEL='from-dotenv'\nTAVILY_API_KEY=tvly-x\n")
    s = load_settings(tmp_path, environ={"API_SERVER_PORT": "3333"}, overrides={"port": "4444"})
    assert s.port == 4444
    assert load_settings(tmp_path, environ={"API_SERVER_PORT": "3333"}).port == 3333
    assert load_settings(tmp_path, environ={}).port == 2222
    s = load_settings(tmp_path, environ={})
    assert s.max_concurrent_runs == 3 and s.llm_model == "from-dotenv" and s.web_search_backend == "searxng"
    assert s.env["TAVILY_API_KEY"] == "tvly-x"
    assert load_settings(tmp_path, environ={"TAVILY_API_KEY": "tvly-env"}).env["TAVILY_API_KEY"] == "tvly-env"


def test_profile_uses_its_own_directory_and_name(tmp_path):
    profile = tmp_path / "profiles" / "research"
    profile.mkdir(parents=True)
    (profile / ".env").write_text("API_SERVER_KEY=k-research\n")
    s = load_settings(tmp_path, "research", environ={})
    assert s.model_name == "research" and s.api_key == "k-research"
    assert s.db_path == profile / "responses.db"
    assert load_settings(tmp_path, environ={}).api_key is None


@pytest.mark.parametrize(("env", "name"), [
    ({"API_SERVER_PORT": "abc"}, "API_SERVER_PORT"),
    ({"API_SERVER_PORT": "70000"}, "API_SERVER_PORT"),
    ({"API_SERVER_MAX_CONCURRENT_RUNS": "-1"}, "API_SERVER_MAX_CONCURRENT_RUNS"),
    ({"API_SERVER_ENABLED": "maybe"}, "API_SERVER_ENABLED"),
    ({"AGENT_TOOL_PROGRESS": "loud"}, "AGENT_TOOL_PROGRESS"),
    ({"LLM_BASE_URL": "localhost:11434/v1"}, "LLM_BASE_URL"),
    ({"LLM_BASE_URL": "ftp://models.example/v1"}, "LLM_BASE_URL"),
    ({"LLM_BASE_URL": "http://127.0.0.1:99999/v1"}, "LLM_BASE_URL"),
    ({"LLM_HTTP_CLIENT": "reqwest"}, "LLM_HTTP_CLIENT must be one of auto, aiohttp"),
])
def test_invalid_values_name_the_setting(tmp_path, env, name):
    with pytest.raises(SettingsError, match=name):
        load_settings(tmp_path, environ=env)


def test_bad_yaml_names_the_file(tmp_path):
    (tmp_path / "config.yaml").write_text("a: [\n")
    with pytest.raises(SettingsError, match="config.yaml"):
        load_settings(tmp_path, environ={})


@pytest.mark.parametrize("name", ["../evil", "a/b", "", "UPPER", ".hidden", "x" * 70])
def test_profile_names_are_validated(tmp_path, name):
    with pytest.raises(SettingsError, match="profile name"):
        load_settings(tmp_path, name, environ={})


@pytest.mark.parametrize(
    ("raw", "host"),
    [("[::1]", "::1"), ("LocalHost.", "localhost"), ("127.0.0.1.", "127.0.0.1"), ("[::]", "::"),
     ("gateway_1", "gateway_1"), ("0.0.0.0", "0.0.0.0")],
)
def test_bind_address_is_normalised_so_guard_and_bind_see_one_spelling(tmp_path, raw, host):
    assert load_settings(tmp_path, environ={"API_SERVER_HOST": raw}).host == host


@pytest.mark.parametrize("raw", ["", "http://127.0.0.1", "[::1", "a host", "127.0.0.1:8642"])
def test_a_bind_address_that_is_no_address_is_a_settings_error_naming_it(tmp_path, raw):
    with pytest.raises(SettingsError, match="API_SERVER_HOST"):
        load_settings(tmp_path, environ={"API_SERVER_HOST": raw})
