"""`agent-gateway config ...` as a real process on temporary homes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from tests.support.gateway_process import gateway_env, run_cli

SECRET = "sk-live-0123456789abcdefWXYZ"


async def cli(home: Path, *args: str, **extra: str) -> tuple[int, str, str]:
    return await run_cli(*args, env=gateway_env(home, extra))


async def test_upper_case_keys_go_to_env_and_dotted_keys_to_config_yaml_keeping_the_rest(tmp_path):
    (tmp_path / ".env").write_text("# my notes\nLLM_MODEL=llama3\nCUSTOM_THING=1\n")
    (tmp_path / "config.yaml").write_text("web:\n  backend: searxng\nmy_plugin:\n  depth: 3\n")
    for args in (("API_SERVER_PORT", "9001"), ("web.search_backend", "ddgs"), ("api_server.max_concurrent_runs", "4"),
                 ("web.allow_private_urls", "yes"), ("model", "3.5"), ("plugins.enabled", "one,two")):
        code, _, err = await cli(tmp_path, "config", "set", *args)
        assert code == 0, err
    assert (tmp_path / ".env").read_text() == "# my notes\nLLM_MODEL=llama3\nCUSTOM_THING=1\nAPI_SERVER_PORT=9001\n"
    assert yaml.safe_load((tmp_path / "config.yaml").read_text()) == {
        "web": {"backend": "searxng", "search_backend": "ddgs", "allow_private_urls": True},
        "my_plugin": {"depth": 3},
        "api_server": {"max_concurrent_runs": 4},
        "model": "3.5",  # text settings stay text
        "plugins": {"enabled": ["one", "two"]},
    }
    results = await asyncio.gather(*(cli(tmp_path, "config", "get", key) for key in
                                     ("API_SERVER_PORT", "api_server.port", "WEB_SEARCH_BACKEND", "LLM_MODEL")))
    # LLM_MODEL in .env wins over `model` in config.yaml: the documented precedence.
    assert [out.strip() for _, out, _ in results] == ["9001", "9001", "ddgs", "llama3"]


async def test_an_invalid_value_is_refused_with_one_line_and_nothing_written(tmp_path):
    (tmp_path / ".env").write_text("API_SERVER_PORT=9001\n")
    cases = [("API_SERVER_PORT", "eighty", "API_SERVER_PORT"), ("api_server.port", "70000", "API_SERVER_PORT"),
             ("AGENT_MAX_ROUNDS", "0", "AGENT_MAX_ROUNDS"), ("AGENT_TOOL_PROGRESS", "loud", "inline, openwebui, off"),
             ("web.allow_private_urls", "maybe", "WEB_ALLOW_PRIVATE_URLS")]
    results = await asyncio.gather(*(cli(tmp_path, "config", "set", key, value) for key, value, _ in cases))
    for (key, _, expected), (code, _out, err) in zip(cases, results, strict=True):
        assert code == 2, key
        assert expected in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
    assert (tmp_path / ".env").read_text() == "API_SERVER_PORT=9001\n"
    assert not (tmp_path / "config.yaml").exists()


async def test_malformed_keys_and_process_only_variables_are_refused(tmp_path):
    results = await asyncio.gather(cli(tmp_path, "config", "set", "Web.Backend", "x"),
                                   cli(tmp_path, "config", "set", "AGENT_GATEWAY_HOME", "/elsewhere"))
    assert results[0][0] == 2 and "dotted lowercase key" in results[0][2]
    assert results[1][0] == 2 and "process environment" in results[1][2]
    assert not (tmp_path / ".env").exists()


async def test_unknown_keys_get_the_nearest_known_name_but_are_still_written(tmp_path):
    typo, dotted = await asyncio.gather(cli(tmp_path, "config", "set", "TAVLY_API_KEY", "tvly-x"),
                                        cli(tmp_path, "config", "set", "web.serch_backend", "exa"))
    known = await cli(tmp_path, "config", "set", "TAVILY_API_KEY", "tvly-y")
    assert typo[0] == 0 and "did you mean TAVILY_API_KEY?" in typo[2]
    assert known[0] == 0 and known[2] == ""  # a provider's own variable is known
    assert dotted[0] == 0 and "did you mean web.search_backend?" in dotted[2]
    assert (tmp_path / ".env").read_text() == "TAVLY_API_KEY=tvly-x\nTAVILY_API_KEY=tvly-y\n"
    assert yaml.safe_load((tmp_path / "config.yaml").read_text()) == {"web": {"serch_backend": "exa"}}


async def test_list_shows_values_with_sources_and_masks_secrets(tmp_path):
    (tmp_path / ".env").write_text(f"API_SERVER_KEY={SECRET}\nTAVILY_API_KEY=tvly-0123456789abcdef9876\n"
                                   "SEARXNG_URL=http://127.0.0.1:8888\n")
    (tmp_path / "config.yaml").write_text("llm:\n  api_key: short\n  base_url: http://127.0.0.1:8000/v1\n")
    (code, out, err), (_, revealed, _) = await asyncio.gather(
        cli(tmp_path, "config", "list", API_SERVER_PORT="9999"),
        cli(tmp_path, "config", "list", "--reveal"))
    assert code == 0, err
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line and not line.startswith("#")}
    assert rows["API_SERVER_PORT"] == ["9999", "environment"]
    assert rows["API_SERVER_KEY"] == ["sk-...WXYZ", ".env"]
    assert rows["LLM_API_KEY"] == ["****", "config.yaml"]
    assert rows["LLM_BASE_URL"] == ["http://127.0.0.1:8000/v1", "config.yaml"]
    assert rows["TAVILY_API_KEY"] == ["tvl...9876", ".env"]
    assert rows["SEARXNG_URL"] == ["http://127.0.0.1:8888", ".env"]
    assert rows["API_SERVER_HOST"] == ["127.0.0.1", "default"]
    for secret in (SECRET, "tvly-0123456789abcdef9876", "short"):
        assert secret not in out and secret in revealed


async def test_unset_removes_the_key_from_its_file(tmp_path):
    (tmp_path / ".env").write_text("API_SERVER_PORT=9001\nLLM_MODEL=x\n")
    (tmp_path / "config.yaml").write_text("web:\n  backend: ddgs\n")
    results = await asyncio.gather(cli(tmp_path, "config", "unset", "API_SERVER_PORT"),
                                   cli(tmp_path, "config", "unset", "web.backend"))
    assert [code for code, _, _ in results] == [0, 0]
    assert (tmp_path / ".env").read_text() == "LLM_MODEL=x\n"
    assert not yaml.safe_load((tmp_path / "config.yaml").read_text())
    code, out, _ = await cli(tmp_path, "config", "unset", "API_SERVER_PORT")
    assert code == 0 and "was not set" in out


async def test_set_warns_when_the_shell_environment_hides_the_new_value(tmp_path):
    code, _, err = await cli(tmp_path, "config", "set", "API_SERVER_PORT", "9001", API_SERVER_PORT="9100")
    assert code == 0
    assert "environment, which takes precedence" in err


async def test_check_says_what_serve_would_do_without_starting(tmp_path):
    (tmp_path / ".env").write_text(f"API_SERVER_KEY={SECRET}\nAPI_SERVER_PORT=0\nSEARXNG_URL=http://127.0.0.1:1\n"
                                   "API_SERVER_CORS_ORIGINS=http://localhost:3000\nLLM_MODEL=qwen3\n")
    code, out, err = await cli(tmp_path, "config", "check")
    assert code == 0, out + err
    assert "listen: http://127.0.0.1:0/v1" in out
    assert "auth: on" in out
    assert "cors: http://localhost:3000" in out
    assert "upstream: http://127.0.0.1:11434/v1 (model qwen3)" in out
    assert "web search: searxng" in out
    assert "serve would start" in out
    assert SECRET not in out
    assert not (tmp_path / "responses.db").exists()


async def test_check_fails_when_serve_would_refuse(tmp_path):
    exposed, broken = await asyncio.gather(
        cli(tmp_path, "config", "check", API_SERVER_HOST="0.0.0.0"),
        cli(tmp_path, "config", "check", AGENT_RUN_TIMEOUT="soon"),
    )
    assert exposed[0] == 2
    assert "auth: off" in exposed[1] and "refuse to listen on 0.0.0.0 without API_SERVER_KEY" in exposed[1]
    assert broken[0] == 2 and "AGENT_RUN_TIMEOUT" in broken[1] and "Traceback" not in broken[2]


async def test_check_points_out_typos_in_the_profile_files(tmp_path):
    (tmp_path / ".env").write_text("API_SERVR_PORT=1\n")
    (tmp_path / "config.yaml").write_text("web:\n  extract_backnd: fetch\n")
    code, out, _ = await cli(tmp_path, "config", "check")
    assert code == 0
    assert "API_SERVR_PORT in .env is not a variable agent-gateway knows; did you mean API_SERVER_PORT?" in out
    assert "did you mean web.extract_backend?" in out


THIRD_PARTY_MANIFEST = """\
name: mysearch
kind: backend
provides_web_providers: [mysearch]
env:
  - {name: MYSEARCH_CREDENTIAL, secret: true, help: MySearch credential}
  - {name: MYSEARCH_ENDPOINT, help: MySearch base URL}
"""


async def test_a_third_party_plugins_declared_variables_are_known_to_config(tmp_path):
    folder = tmp_path / "plugins" / "web" / "mysearch"
    folder.mkdir(parents=True)
    (folder / "plugin.yaml").write_text(THIRD_PARTY_MANIFEST)
    (folder / "__init__.py").write_text("def register(ctx):\n    pass\n")
    credential = "cred-0123456789abcdefQRST"
    code, out, err = await cli(tmp_path, "config", "set", "MYSEARCH_CREDENTIAL", credential)
    assert code == 0 and err == ""  # no "not a variable agent-gateway knows", no "did you mean"
    assert credential not in out  # declared secret: not echoed
    code, out, err = await cli(tmp_path, "config", "set", "MYSEARCH_ENDPOINT", "http://127.0.0.1:9")
    assert code == 0 and err == "" and "= http://127.0.0.1:9" in out
    typo = await cli(tmp_path, "config", "set", "MYSEARCH_ENDPIONT", "x")
    assert typo[0] == 0 and "did you mean MYSEARCH_ENDPOINT?" in typo[2]
    (tmp_path / ".env").write_text(f"MYSEARCH_CREDENTIAL={credential}\nMYSEARCH_ENDPOINT=http://127.0.0.1:9\n")
    (code, listed, _), (_, checked, _) = await asyncio.gather(cli(tmp_path, "config", "list"),
                                                              cli(tmp_path, "config", "check"))
    rows = {line.split()[0]: line.split()[1:] for line in listed.splitlines() if line and not line.startswith("#")}
    assert rows["MYSEARCH_CREDENTIAL"] == ["cre...QRST", ".env"]
    assert rows["MYSEARCH_ENDPOINT"] == ["http://127.0.0.1:9", ".env"]
    assert "MYSEARCH" not in checked  # no "is not a variable agent-gateway knows" warning
    code, got, _ = await cli(tmp_path, "config", "get", "MYSEARCH_CREDENTIAL")
    assert code == 0 and got.strip() == "cre...QRST"
