"""The image recipe and the compose wiring, read as text.

The image and the compose `replicas` profile are also built and run, by scripts/container_smoke
(podman), which .ci/run calls where the machine can run containers; these checks hold the files to
what that run found, on every machine.
"""

from __future__ import annotations

import json
import re
import shlex

import yaml

from gateway.config.options import OPTIONS_BY_ENV
from tests.support.gateway_process import REPO

NGINX_TEMPLATE = REPO / "deploy/nginx/replicas.conf.template"


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


def stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions, one list per FROM."""
    result: list[list[tuple[str, str]]] = []
    for keyword, rest in dockerfile_instructions():
        if keyword == "FROM":
            result.append([])
        result[-1].append((keyword, rest))
    return result


def seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+)(s|m)", duration)
    assert match, duration
    return int(match.group(1)) * (60 if match.group(2) == "m" else 1)


def test_image_is_slim_python_run_by_a_non_root_user():
    final = stages()[-1]
    assert final[0] == ("FROM", "python:3.12-slim")
    users = [rest for keyword, rest in final if keyword == "USER"]
    assert users and users[-1] not in ("root", "0")
    runs = " ".join(rest for keyword, rest in final if keyword == "RUN")
    assert "pip install --require-hashes -r requirements.lock" in runs
    assert "useradd" in runs


def test_the_wheel_is_built_with_the_pinned_backend_and_the_image_holds_no_second_copy_of_the_code():
    build, final = stages()
    assert build[0] == ("FROM", "python:3.12-slim AS wheel")
    build_runs = [rest for keyword, rest in build if keyword == "RUN"]
    assert "pip install --require-hashes -r requirements-build.lock" in build_runs
    # no isolation: pip must not fetch the newest setuptools for the build
    assert any("pip wheel --no-deps --no-build-isolation" in run for run in build_runs)
    copied = [rest for keyword, rest in final if keyword == "COPY"]
    assert copied == ["requirements.lock ./", "--from=wheel /wheels /tmp/wheels"]
    runs = " ".join(rest for keyword, rest in final if keyword == "RUN")
    assert "pip install --no-deps /tmp/wheels/*.whl" in runs and "rm -rf /tmp/wheels" in runs


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


def test_healthcheck_asks_readiness_with_python_not_curl():
    checks = [rest for keyword, rest in dockerfile_instructions() if keyword == "HEALTHCHECK"]
    assert len(checks) == 1
    command = json.loads(checks[0].split("CMD", 1)[1].strip())
    assert command[:2] == ["python", "-c"]
    # readiness: a store that cannot be written makes the container unhealthy
    assert "urllib.request" in command[2] and "/health/ready'" in command[2]
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
    assert "proxy_buffering off;" in NGINX_TEMPLATE.read_text()


def test_nginx_finds_the_replicas_by_name_at_request_time_through_the_networks_dns():
    services = compose()["services"]
    aliases = [services[name]["networks"]["default"]["aliases"] for name in ("gateway-a", "gateway-b")]
    assert aliases == [["gateway-replicas"], ["gateway-replicas"]]
    conf = NGINX_TEMPLATE.read_text()
    # no upstream block: its server names are resolved once, when nginx starts
    assert not re.search(r"^\s*upstream\b", conf, re.M)
    assert re.search(r"^resolver \$\{NGINX_RESOLVER\} valid=\d+s", conf, re.M)
    assert "set $replicas gateway-replicas;" in conf and "proxy_pass http://$replicas:8642;" in conf
    balancer = services["load-balancer"]
    assert balancer["environment"]["NGINX_ENVSUBST_FILTER"] == "^NGINX_RESOLVER$$"
    mounts = balancer["volumes"]
    assert "./deploy/nginx/replicas.conf.template:/etc/nginx/templates/default.conf.template:ro" in mounts
    assert "./deploy/nginx/resolver.envsh:/docker-entrypoint.d/15-replicas-resolver.envsh:ro" in mounts
    # the image's entrypoint sources only executable *.envsh files
    assert (REPO / "deploy/nginx/resolver.envsh").stat().st_mode & 0o111


def test_neither_a_slow_start_nor_a_clients_503_takes_a_replica_out_of_rotation():
    services = compose()["services"]
    assert services["load-balancer"]["depends_on"] == {
        "gateway-a": {"condition": "service_healthy"}, "gateway-b": {"condition": "service_healthy"}}
    conf = NGINX_TEMPLATE.read_text()
    retries = re.findall(r"^\s*proxy_next_upstream (.+);", conf, re.M)
    assert retries == ["error timeout"]  # a 503 is a replica's answer, passed on, never a failure
    assert "max_fails" not in conf and "fail_timeout" not in conf


def test_replicas_keep_their_home_on_named_volumes_not_anonymous_ones():
    data = compose()
    for name in ("agent-gateway", "gateway-a", "gateway-b"):
        mounts = [mount for mount in data["services"][name]["volumes"] if mount.endswith(":/data")]
        assert len(mounts) == 1 and mounts[0].split(":")[0] in data["volumes"], name
    assert data["services"]["gateway-a"]["volumes"] != data["services"]["gateway-b"]["volumes"]


def test_compose_stops_the_gateways_after_their_shutdown_grace_not_during_it():
    grace = OPTIONS_BY_ENV["API_SERVER_SHUTDOWN_GRACE"].default
    for name in ("agent-gateway", "gateway-a", "gateway-b"):
        spec = compose()["services"][name]
        assert "API_SERVER_SHUTDOWN_GRACE" not in spec["environment"]
        assert seconds(spec["stop_grace_period"]) >= grace + 5, name


def test_compose_reaches_the_host_through_host_gateway_that_podman_before_5_3_can_replace():
    services = compose()["services"]
    for name in ("agent-gateway", "gateway-a", "gateway-b"):
        assert services[name]["extra_hosts"] == ["host.docker.internal:${HOST_GATEWAY:-host-gateway}"]
        assert "host.docker.internal" in services[name]["environment"]["LLM_BASE_URL"]


def test_compose_keeps_the_web_tools_local_searxng_and_no_third_party_fallback():
    services = compose()["services"]
    for name in ("agent-gateway", "gateway-a", "gateway-b"):
        env = services[name]["environment"]
        assert (env["WEB_SEARCH_BACKEND"], env["WEB_SEARCH_FALLBACK"]) == ("searxng", "none"), name
        assert env["WEB_EXTRACT_FALLBACK"] == "none", name  # pages are read by the gateway itself


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
