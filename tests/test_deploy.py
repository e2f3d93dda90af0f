"""Docker cannot run in the test environment: check the image recipe and the compose wiring as text."""

from __future__ import annotations

import json
import re
import shlex

import yaml

from tests.support.gateway_process import REPO


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_image_is_slim_python_run_by_a_non_root_user():
    instructions = dockerfile_instructions()
    assert instructions[0] == ("FROM", "python:3.12-slim")
    users = [rest for keyword, rest in instructions if keyword == "USER"]
    assert users and users[-1] not in ("root", "0")
    runs = " ".join(rest for keyword, rest in instructions if keyword == "RUN")
    assert "pip install --require-hashes -r requirements.lock" in runs and "pip install --no-deps ." in runs
    assert "useradd" in runs


def test_image_binds_all_interfaces_with_its_home_on_a_volume():
    instructions = dockerfile_instructions()
    env = " ".join(rest for keyword, rest in instructions if keyword == "ENV")
    assert "AGENT_GATEWAY_HOME=/data" in env
    assert "API_SERVER_HOST=0.0.0.0" in env
    assert ("VOLUME", "/data") in instructions
    assert ("EXPOSE", "8642") in instructions
    entrypoint = [json.loads(rest) for keyword, rest in instructions if keyword == "ENTRYPOINT"]
    cmd = [json.loads(rest) for keyword, rest in instructions if keyword == "CMD"]
    assert entrypoint[-1] + cmd[-1] == ["agent-gateway", "serve"]


def test_healthcheck_asks_health_with_python_not_curl():
    checks = [rest for keyword, rest in dockerfile_instructions() if keyword == "HEALTHCHECK"]
    assert len(checks) == 1
    command = json.loads(checks[0].split("CMD", 1)[1].strip())
    assert command[:2] == ["python", "-c"]
    assert "urllib.request" in command[2] and "/health" in command[2]
    assert "curl" not in checks[0]
    compile(command[2], "<healthcheck>", "exec")


def test_dockerignore_keeps_secrets_and_stores_out_of_the_image():
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    for pattern in (".env", "*.db", ".git", "tests"):
        assert pattern in ignored
    copied = " ".join(rest for keyword, rest in dockerfile_instructions() if keyword == "COPY")
    for path in ("pyproject.toml", "gateway", "providers", "plugins"):
        assert path in shlex.split(copied)


def test_compose_wires_open_webui_to_the_gateway_with_its_key():
    services = compose()["services"]
    # without a profile: the one-machine setup (the replicas profile is opt-in)
    assert {name for name, spec in services.items() if "profiles" not in spec} == {
        "agent-gateway", "searxng", "open-webui"}
    gateway = services["agent-gateway"]["environment"]
    webui = services["open-webui"]["environment"]
    assert webui["OPENAI_API_BASE_URL"] == "http://agent-gateway:8642/v1"
    # The same key on both sides, taken from the compose .env; the gateway refuses to start without it.
    assert re.fullmatch(r"\$\{API_SERVER_KEY(:\?.+)?\}", gateway["API_SERVER_KEY"])
    assert webui["OPENAI_API_KEY"] == "${API_SERVER_KEY}"
    assert gateway["API_SERVER_HOST"] == "0.0.0.0"
    assert services["open-webui"]["depends_on"]["agent-gateway"]["condition"] == "service_healthy"


def test_the_replicas_profile_runs_two_gateways_on_postgres_behind_nginx_without_sse_buffering():
    services = compose()["services"]
    replicas = {name for name, spec in services.items() if "replicas" in spec.get("profiles", ())}
    assert replicas == {"postgres", "gateway-a", "gateway-b", "load-balancer"}
    for name in ("gateway-a", "gateway-b"):
        env = services[name]["environment"]
        assert env["API_SERVER_DATABASE_URL"].startswith("postgresql://gateway:${POSTGRES_PASSWORD}@postgres:5432/")
        assert "/health/ready" in " ".join(services[name]["healthcheck"]["test"])
    assert services["load-balancer"]["ports"] == ["127.0.0.1:8643:8642"]
    assert "ports" not in services["postgres"]
    conf = (REPO / "deploy/nginx/replicas.conf").read_text()
    assert "proxy_buffering off;" in conf
    assert "server gateway-a:8642;" in conf and "server gateway-b:8642;" in conf


def test_compose_publishes_only_on_the_host_loopback():
    services = compose()["services"]
    assert services["agent-gateway"]["ports"] == ["127.0.0.1:8642:8642"]
    assert services["open-webui"]["ports"] == ["127.0.0.1:3000:8080"]
    assert "ports" not in services["searxng"]


def test_compose_points_the_gateway_at_searxng_with_json_enabled():
    services = compose()["services"]
    assert services["agent-gateway"]["environment"]["SEARXNG_URL"] == "http://searxng:8080"
    mounts = services["searxng"]["volumes"]
    assert "./deploy/searxng/settings.yml:/etc/searxng/settings.yml:ro" in mounts
    settings = yaml.safe_load((REPO / "deploy/searxng/settings.yml").read_text())
    assert "json" in settings["search"]["formats"]
    assert settings["server"]["limiter"] is False
    assert "SEARXNG_SECRET" in services["searxng"]["environment"]


def test_compose_keeps_gateway_home_on_a_named_volume():
    data = compose()
    assert "gateway-data:/data" in data["services"]["agent-gateway"]["volumes"]
    assert "gateway-data" in data["volumes"]
