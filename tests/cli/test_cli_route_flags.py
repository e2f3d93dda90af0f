"""A route's `vision` and `drop_params` as a user meets them on the command line: `config set`
stores them, `config check` says what each route will do."""

from __future__ import annotations

import yaml

from tests.fakes.upstream import FakeUpstream
from tests.support.gateway_process import gateway_env, run_cli


async def test_config_check_says_which_routes_see_images_and_what_each_drops(tmp_path, upstream: FakeUpstream):
    upstream.model_fields["other-model"] = {"architecture": {"input_modalities": ["text", "image"]}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"models": {
        "strict": {"model": "fake-model", "base_url": upstream.base_url, "vision": True,
                   "drop_params": ["verbosity", "reasoning_effort"]},
        "seen": {"model": "other-model", "base_url": upstream.base_url},
        "plain": {"model": "fake-model", "base_url": upstream.base_url},
    }}))
    code, out, err = await run_cli("config", "check", env=gateway_env(tmp_path, {
        "LLM_BASE_URL": upstream.base_url, "API_SERVER_PORT": "0"}))
    assert code == 0, err
    lines = {line.split(":")[0]: line for line in out.splitlines() if line.startswith("model route ")}
    assert lines["model route strict"].endswith("; vision; drops reasoning_effort, verbosity")
    assert lines["model route seen"].endswith("; vision")  # discovered from the upstream's list
    assert "vision" not in lines["model route plain"] and "drops" not in lines["model route plain"]


async def test_config_set_stores_a_routes_vision_and_drop_params(tmp_path):
    env = gateway_env(tmp_path)
    assert (await run_cli("config", "set", "models.q.vision", "true", env=env))[0] == 0
    assert (await run_cli("config", "set", "models.q.drop_params", "reasoning_effort,verbosity", env=env))[0] == 0
    stored = yaml.safe_load((tmp_path / "config.yaml").read_text())["models"]["q"]
    assert stored == {"vision": True, "drop_params": ["reasoning_effort", "verbosity"]}
    code, _, err = await run_cli("config", "set", "models.q.drop_params", "messages", env=env)
    assert code != 0 and "cannot drop 'messages'" in err
