"""Two real `agent-gateway serve` processes on one PostgreSQL database, seen through HTTP only:
what one replica stored, the other serves; retries and duplicates run the agent once; the LRU
bound is the cluster's; a replica killed mid-burst loses nothing it acknowledged."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from openai import AsyncOpenAI, NotFoundError

from gateway.store.postgres.schema import SCHEMA_VERSION
from tests.fakes.upstream import FakeUpstream, text
from tests.support.documents import two_page_pdf
from tests.support.gateway_process import ServerProcess, gateway_env, run_cli, start_gateway
from tests.support.postgres import PASSWORD, Cluster


def _env(home: Path, upstream: FakeUpstream, url: str, **extra: str) -> dict[str, str]:
    return gateway_env(home, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                              "API_SERVER_DATABASE_URL": url, **extra})


async def _pair(tmp_path: Path, upstream: FakeUpstream, url: str, **extra: str) -> list[ServerProcess]:
    return list(await asyncio.gather(*(start_gateway(env=_env(tmp_path / name, upstream, url, **extra))
                                       for name in ("a", "b"))))


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def _create(http: aiohttp.ClientSession, gateway: ServerProcess, **body: Any) -> dict[str, Any]:
    async with http.post(gateway.base_url + "/v1/responses", json={"model": "m", **body}) as reply:
        assert reply.status == 200, await reply.text()
        return dict(await reply.json())


async def _stop(*gateways: ServerProcess) -> None:
    for gateway in gateways:
        await gateway.stop()


async def test_what_one_replica_stored_the_other_retrieves_chains_deletes_and_continues(
        tmp_path: Path, upstream: FakeUpstream, postgres_url: str, http: aiohttp.ClientSession) -> None:
    a, b = await _pair(tmp_path, upstream, postgres_url)
    try:
        upstream.queue(text("A1"), text("A2"), text("C1"), text("C2"))
        first = await _create(http, a, input="Q1")
        async with http.get(f"{b.base_url}/v1/responses/{first['id']}") as got:
            assert got.status == 200 and (await got.json())["id"] == first["id"]
        await _create(http, b, input="Q2", previous_response_id=first["id"])
        sent = upstream.requests[-1]["messages"][1:]
        assert [(m["role"], m["content"]) for m in sent] == [("user", "Q1"), ("assistant", "A1"), ("user", "Q2")]
        async with http.delete(f"{b.base_url}/v1/responses/{first['id']}") as deleted:
            assert deleted.status == 200
        async with http.get(f"{a.base_url}/v1/responses/{first['id']}") as gone:
            assert gone.status == 404

        await _create(http, a, input="Q1", conversation="team")
        await _create(http, b, input="Q2", conversation="team")
        sent = upstream.requests[-1]["messages"][1:]
        assert [(m["role"], m["content"]) for m in sent] == [("user", "Q1"), ("assistant", "C1"), ("user", "Q2")]
    finally:
        await _stop(a, b)


async def test_retries_and_duplicates_across_replicas_run_the_agent_once(
        tmp_path: Path, upstream: FakeUpstream, postgres_url: str, http: aiohttp.ClientSession) -> None:
    a, b = await _pair(tmp_path, upstream, postgres_url)
    try:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        upstream.queue(text("only once"))
        async with http.post(a.base_url + "/v1/chat/completions", json=body,
                             headers={"Idempotency-Key": "k-retry"}) as first:
            first_bytes = await first.read()
        async with http.post(b.base_url + "/v1/chat/completions", json=body,
                             headers={"Idempotency-Key": "k-retry"}) as retry:
            assert retry.status == 200 and retry.headers["Idempotent-Replayed"] == "true"
            assert await retry.read() == first_bytes
        assert len(upstream.requests) == 1

        upstream.queue(text("slow and once", delay=1.5))

        async def post(gateway: ServerProcess) -> tuple[int, bytes]:
            async with http.post(gateway.base_url + "/v1/chat/completions", json=body,
                                 headers={"Idempotency-Key": "k-dup"}) as reply:
                return reply.status, await reply.read()

        (status_a, bytes_a), (status_b, bytes_b) = await asyncio.gather(post(a), post(b))
        assert status_a == status_b == 200 and bytes_a == bytes_b
        assert len(upstream.requests) == 2
    finally:
        await _stop(a, b)


async def test_the_lru_bound_holds_across_both_replicas(
        tmp_path: Path, upstream: FakeUpstream, postgres_url: str, http: aiohttp.ClientSession) -> None:
    a, b = await _pair(tmp_path, upstream, postgres_url, API_SERVER_MAX_STORED_RESPONSES="4")
    try:
        ids = [(await _create(http, (a, b)[i % 2], input=f"Q{i}"))["id"] for i in range(10)]
        found = []
        for rid in ids:
            async with http.get(f"{(b, a)[len(found) % 2].base_url}/v1/responses/{rid}") as got:
                found.append(got.status == 200)
        assert found == [False] * 6 + [True] * 4
    finally:
        await _stop(a, b)


async def test_kill_9_of_a_replica_mid_burst_loses_nothing_it_acknowledged(
        tmp_path: Path, upstream: FakeUpstream, postgres_url: str, http: aiohttp.ClientSession) -> None:
    a, b = await _pair(tmp_path, upstream, postgres_url, API_SERVER_MAX_STORED_RESPONSES="1000")
    acknowledged: list[str] = []
    try:
        async def writer(worker: int) -> None:
            for i in range(25):  # 8 writers x 25: 200 stored writes
                try:
                    async with http.post(a.base_url + "/v1/responses",
                                         json={"model": "m", "input": f"w{worker}-{i}"}) as reply:
                        if reply.status == 200:
                            acknowledged.append((await reply.json())["id"])
                except aiohttp.ClientError:
                    return

        async def killer() -> None:
            while len(acknowledged) < 60:
                await asyncio.sleep(0.01)
            await a.kill()

        await asyncio.gather(killer(), *(writer(w) for w in range(8)))
        assert 60 <= len(acknowledged) < 200
        for rid in acknowledged:
            async with http.get(f"{b.base_url}/v1/responses/{rid}") as got:
                assert got.status == 200, rid
    finally:
        await _stop(b)


async def test_a_database_with_a_newer_schema_stops_serve_with_exit_1_naming_both_versions(
        tmp_path: Path, upstream: FakeUpstream, postgres_cluster: Cluster, postgres_url: str) -> None:
    gateway = await start_gateway(env=_env(tmp_path, upstream, postgres_url))
    await gateway.stop()
    postgres_cluster.psql(f"UPDATE schema_version SET version = {SCHEMA_VERSION + 1}", postgres_url.rsplit("/", 1)[1])
    code, out, err = await run_cli("serve", "--port", "0", env=_env(tmp_path, upstream, postgres_url))
    assert code == 1
    lines = [line for line in err.splitlines() if "schema version" in line]
    assert len(lines) == 1 and f"schema version {SCHEMA_VERSION + 1}, newer than version {SCHEMA_VERSION}" in lines[0]
    assert PASSWORD not in err


async def test_config_list_and_check_mask_the_database_password(tmp_path: Path, upstream: FakeUpstream,
                                                                postgres_url: str) -> None:
    env = _env(tmp_path, upstream, postgres_url)
    for command in (("config", "list"), ("config", "check")):
        code, out, err = await run_cli(*command, env=env)
        assert PASSWORD not in out + err
    code, out, _ = await run_cli("config", "list", env=env)
    assert "gateway:***@127.0.0.1" in out


async def test_postgres_down_at_start_is_live_not_ready_and_stored_requests_503_until_it_is_up(
        tmp_path: Path, upstream: FakeUpstream, postgres_cluster: Cluster, postgres_url: str,
        http: aiohttp.ClientSession) -> None:
    postgres_cluster.stop()
    try:
        gateway = await start_gateway(env=_env(tmp_path, upstream, postgres_url))
    except BaseException:
        postgres_cluster.start_if_stopped()
        raise
    try:
        async with http.get(gateway.base_url + "/health") as live:
            assert live.status == 200
        async with http.get(gateway.base_url + "/health/ready") as ready:
            assert ready.status == 503 and "Retry-After" in ready.headers
            assert PASSWORD not in await ready.text()
        async with http.post(gateway.base_url + "/v1/responses", json={"model": "m", "input": "hi"}) as stored:
            assert stored.status == 503 and "Retry-After" in stored.headers
            assert (await stored.json())["error"]["type"]
        postgres_cluster.start()
        async with asyncio.timeout(30):
            while True:
                async with http.get(gateway.base_url + "/health/ready") as ready:
                    if ready.status == 200:
                        break
                await asyncio.sleep(0.3)
        await _create(http, gateway, input="hi")
    finally:
        postgres_cluster.start_if_stopped()
        await gateway.stop()


async def test_postgres_restarted_mid_traffic_is_503_with_retry_after_then_heals_by_itself(
        tmp_path: Path, upstream: FakeUpstream, postgres_cluster: Cluster, postgres_url: str,
        http: aiohttp.ClientSession) -> None:
    gateway = await start_gateway(env=_env(tmp_path, upstream, postgres_url))
    try:
        first = await _create(http, gateway, input="before")
        postgres_cluster.stop()
        try:
            async with http.get(f"{gateway.base_url}/v1/responses/{first['id']}") as failed:
                assert failed.status == 503 and "Retry-After" in failed.headers
                assert PASSWORD not in await failed.text()
        finally:
            postgres_cluster.start_if_stopped()
        async with asyncio.timeout(30):  # no restart of the gateway: its pool reconnects
            while True:
                async with http.get(f"{gateway.base_url}/v1/responses/{first['id']}") as got:
                    if got.status == 200:
                        break
                    assert got.status == 503
                await asyncio.sleep(0.3)
        await _create(http, gateway, input="after")
    finally:
        await gateway.stop()


async def test_two_turns_of_one_conversation_racing_on_two_replicas_store_one_and_409_the_other(
        tmp_path: Path, upstream: FakeUpstream, postgres_url: str, http: aiohttp.ClientSession) -> None:
    a, b = await _pair(tmp_path, upstream, postgres_url)
    try:
        upstream.queue(text("first"), text("racer", delay=1.0), text("racer", delay=1.0), text("third"))
        await _create(http, a, input="Q1", conversation="race")

        async def turn(gateway: ServerProcess) -> tuple[int, dict[str, Any]]:
            async with http.post(gateway.base_url + "/v1/responses",
                                 json={"model": "m", "input": "Q2", "conversation": "race"}) as reply:
                return reply.status, await reply.json()

        results = await asyncio.gather(turn(a), turn(b))
        assert sorted(status for status, _ in results) == [200, 409]
        refused = next(body for status, body in results if status == 409)
        assert refused["error"]["code"] == "conversation_conflict"
        winner = next(body for status, body in results if status == 200)
        await _create(http, b, input="Q3", conversation="race")
        sent = upstream.requests[-1]["messages"][1:]
        assert [(m["role"], m["content"]) for m in sent] == [
            ("user", "Q1"), ("assistant", "first"), ("user", "Q2"), ("assistant", "racer"), ("user", "Q3")]
        async with http.get(f"{a.base_url}/v1/responses/{winner['id']}") as got:
            assert got.status == 200
    finally:
        await _stop(a, b)


async def test_a_file_uploaded_through_one_replica_is_read_used_and_deleted_through_the_other(
        tmp_path: Path, upstream: FakeUpstream, postgres_url: str) -> None:
    a, b = await _pair(tmp_path, upstream, postgres_url)
    try:
        async with AsyncOpenAI(base_url=a.base_url + "/v1", api_key="unused", max_retries=0) as on_a, \
                AsyncOpenAI(base_url=b.base_url + "/v1", api_key="unused", max_retries=0) as on_b:
            pdf = two_page_pdf()
            created = await on_a.files.create(file=("report.pdf", pdf, "application/pdf"), purpose="user_data")
            assert [file.id async for file in on_b.files.list()] == [created.id]
            assert (await on_b.files.content(created.id)).content == pdf
            upstream.queue(text("Sales by region."), text("Again."))
            for sdk in (on_b, on_a):  # read on B (and kept there), its kept text used on A
                await sdk.responses.create(model="m", input=[{"role": "user", "content": [
                    {"type": "input_file", "file_id": created.id}, {"type": "input_text", "text": "Page 2?"}]}])
                user = [m for m in upstream.requests[-1]["messages"] if m["role"] == "user"][-1]
                assert "[file: report.pdf]" in user["content"] and "[page 2]" in user["content"]
            assert (await on_b.files.delete(created.id)).deleted
            with pytest.raises(NotFoundError):
                await on_a.files.retrieve(created.id)
    finally:
        await _stop(a, b)
