"""API_SERVER_DATABASE_URL's password, in every form a PostgreSQL URL can carry it, reaches no HTTP
body, no log line and no `config` output; a client-facing message names no URL, user, host or port.

Real `serve` processes on the session's PostgreSQL cluster, pointed at a database that does not
exist (the server itself refuses, so the gateway reports a real PostgreSQL fault), and the real CLI.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.common.redact import redact_url, scrub
from tests.fakes.upstream import FakeUpstream
from tests.support.gateway_process import gateway_env, run_cli, start_gateway
from tests.support.postgres import Cluster

PASSWORD = "Pw-Form-7xQ"


def _forms(port: int, database: str) -> dict[str, str]:
    where = f"127.0.0.1:{port}/{database}"
    return {
        "userinfo": f"postgresql://gateway:{PASSWORD}@{where}",
        "password_param": f"postgresql://gateway@{where}?password={PASSWORD}",
        "sslpassword_param": f"postgresql://gateway@{where}?sslmode=disable&sslpassword={PASSWORD}",
        "options_param": f"postgresql://gateway@{where}?options=-c%20password%3D{PASSWORD}",
        "raw_at_in_password": f"postgresql://gateway:a@b/{PASSWORD}@{where}",
    }


#: Not a URL the settings accept (the port is no number): serve refuses it, config still shows it.
UNPARSABLE = f"postgresql://gateway:{PASSWORD}@127.0.0.1:notaport/agw"


@pytest.mark.parametrize("url", [*_forms(5432, "agw").values(), UNPARSABLE,
                                 f"host=127.0.0.1 user=gateway password={PASSWORD} dbname=agw",
                                 f"postgresql://gateway@127.0.0.1/agw?PassWord={PASSWORD}#frag",
                                 f"postgresql://gateway:{PASSWORD}@[::1/agw"])
def test_redaction_masks_the_password_whatever_the_form(url: str) -> None:
    assert PASSWORD not in redact_url(url)
    assert PASSWORD not in scrub(f"the driver said: {url}", url)


def test_a_driver_message_quoting_a_secret_parameter_is_scrubbed() -> None:
    url = _forms(5432, "agw")["sslpassword_param"]
    assert scrub(f'bad sslpassword "{PASSWORD}" for {url}', url) == \
        'bad sslpassword "***" for postgresql://gateway@127.0.0.1:5432/agw?sslmode=disable&sslpassword=***'


def test_redaction_keeps_what_is_not_secret() -> None:
    assert redact_url("postgresql://agw@127.0.0.1:5432/agw?password=x&sslmode=require") == \
        "postgresql://agw@127.0.0.1:5432/agw?password=***&sslmode=require"
    assert redact_url("http://127.0.0.1:11434/v1") == "http://127.0.0.1:11434/v1"


async def test_no_form_of_the_password_reaches_a_body_a_log_line_or_config_output(
        tmp_path: Path, upstream: FakeUpstream, postgres_cluster: Cluster) -> None:
    forms = _forms(postgres_cluster.port, "no_such_database")

    async def serve(name: str, url: str) -> tuple[str, list[str], str]:
        env = gateway_env(tmp_path / name, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                            "API_SERVER_DATABASE_URL": url})
        gateway = await start_gateway(env=env)
        bodies = []
        try:
            async with aiohttp.ClientSession() as http:
                for method, path, body in (("GET", "/health/ready", None),
                                           ("POST", "/v1/responses", {"input": "hi"}),
                                           ("GET", "/v1/responses/resp_1", None)):
                    async with http.request(method, gateway.base_url + path, json=body) as reply:
                        assert reply.status == 503, (name, path, await reply.text())
                        bodies.append(await reply.text())
        finally:
            await gateway.stop()
        assert gateway.proc.stderr is not None and gateway.proc.stdout is not None
        log = (await gateway.proc.stderr.read()).decode() + (await gateway.proc.stdout.read()).decode()
        return name, bodies, log

    async def config(url: str) -> str:
        env = gateway_env(tmp_path / "cli", {"API_SERVER_DATABASE_URL": url})
        outputs = await asyncio.gather(run_cli("config", "list", env=env),
                                       run_cli("config", "get", "API_SERVER_DATABASE_URL", env=env),
                                       run_cli("config", "check", env=env))
        return "".join(out + err for _, out, err in outputs)

    served = await asyncio.gather(*(serve(name, url) for name, url in forms.items()))
    shown = await asyncio.gather(*(config(url) for url in [*forms.values(), UNPARSABLE]))
    unparsable_serve = await run_cli("serve", "--port", "0", env=gateway_env(
        tmp_path / "bad", {"LLM_BASE_URL": upstream.base_url, "API_SERVER_DATABASE_URL": UNPARSABLE}))

    for name, bodies, log in served:
        for body in bodies:
            message = _message(body)
            assert message in (  # keyless with the store down: keys fail closed first (issue 42)
                "The response store is unavailable; retry shortly.",
                "The API keys cannot be read yet (the store is unavailable); retry shortly."), (name, body)
            for named in (PASSWORD, "gateway", "127.0.0.1", str(postgres_cluster.port), "no_such_database"):
                assert named not in body, (name, named, body)
        assert PASSWORD not in log, (name, log)
        # the log keeps the detail: where (masked) and what PostgreSQL said
        assert "no_such_database" in log and "unavailable" in log, (name, log)
    for output in shown:
        assert PASSWORD not in output, output
        assert "API_SERVER_DATABASE_URL" in output
    code, out, err = unparsable_serve
    assert code != 0 and PASSWORD not in out + err


def _message(body: str) -> Any:
    return json.loads(body)["error"]["message"]
