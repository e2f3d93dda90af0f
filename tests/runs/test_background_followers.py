"""Followers of a background response (issue 42, items 4 and 5): bounded per run and per key (a 429
in the OpenAI envelope past either), a follower that never reads dropped while the run goes on,
followers that never read holding no copy of the run's events (the RSS of a real `serve`), and
on two replicas sharing PostgreSQL, many followers on the other replica costing one reader's
queries while each still gets exactly the run's frames, in order."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import API_KEY
from tests.fakes.upstream import FakeUpstream, Reply
from tests.keys.test_keys_isolation import bearer, make_key
from tests.support import postgres
from tests.support.gateway_process import ServerProcess, gateway_env, start_gateway

AUTH = bearer(API_KEY)
#: a reply whose closing events are megabytes each (the delta, the done events and
#: response.completed all repeat the 2 MB text): about 10 MB of events in all
BIG_TEXT = "w" * 2_000_000


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _silent_follower(host: str, port: int, response_id: str, key: str = API_KEY) -> socket.socket:
    """A follower that sends its request and never reads a byte (a tiny receive window)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, port))
    sock.sendall(f"GET /v1/responses/{response_id}?stream=true HTTP/1.1\r\nHost: {host}\r\n"
                 f"Authorization: Bearer {key}\r\n\r\n".encode())
    return sock


async def _create(client: Any, headers: dict[str, str] = AUTH, **body: Any) -> dict[str, Any]:
    async with client.post("/v1/responses", json={"model": "m", "input": "x", "background": True, **body},
                           headers=headers) as reply:
        assert reply.status == 200, await reply.text()
        return dict(await reply.json())


def _sequence(text: str) -> list[int]:
    return [json.loads(line[6:])["sequence_number"] for line in text.splitlines() if line.startswith("data: ")]


async def _follow(client: Any, response_id: str, headers: dict[str, str] = AUTH) -> tuple[int, str]:
    async with client.get(f"/v1/responses/{response_id}", params={"stream": "true"}, headers=headers) as reply:
        return reply.status, await reply.text()


async def _upstream_called(upstream: FakeUpstream, count: int = 1) -> None:
    async with asyncio.timeout(20):
        while len(upstream.requests) < count:
            await asyncio.sleep(0.02)


async def _until(client: Any, response_id: str, statuses: set[str]) -> str:
    async with asyncio.timeout(30):
        while True:
            async with client.get(f"/v1/responses/{response_id}", headers=AUTH) as reply:
                status = str((await reply.json())["status"])
            if status in statuses:
                return status
            await asyncio.sleep(0.05)


def _assert_too_many(status: int, text: str, setting: str) -> None:
    assert status == 429, text
    error = json.loads(text)["error"]
    assert error["type"] == "requests" and error["code"] == "rate_limit_exceeded"
    assert setting in error["message"]


async def test_a_follower_past_the_per_run_bound_is_a_429_and_one_leaving_makes_room(
        make_client: Any, upstream: FakeUpstream) -> None:
    client = await make_client(api_key=API_KEY, max_followers_per_run=2)
    upstream.queue(Reply(text="a slow answer " * 10, chunk_size=4, chunk_delay=0.05))
    created = await _create(client)
    url = f"/v1/responses/{created['id']}"
    first = await client.get(url, params={"stream": "true"}, headers=AUTH)
    second = await client.get(url, params={"stream": "true"}, headers=AUTH)
    assert first.status == second.status == 200
    _assert_too_many(*await _follow(client, created["id"]), "API_SERVER_MAX_FOLLOWERS_PER_RUN")
    first.close()  # a follower leaves: its place is free again
    await asyncio.sleep(0.1)
    status, text = await _follow(client, created["id"])
    assert status == 200 and "response.completed" in text
    assert _sequence(text) == list(range(len(_sequence(text))))
    assert "response.completed" in await second.text()  # the others went on, whole


async def test_a_key_past_its_follower_bound_gets_a_429_even_to_create_a_stream_and_other_keys_do_not(
        tmp_path: Path, make_client: Any, upstream: FakeUpstream) -> None:
    alice, bob = await make_key(tmp_path, "alice"), await make_key(tmp_path, "bob")
    client = await make_client(max_followers_per_key=2)
    upstream.queue(*[Reply(text="slow", endless=True, chunk_delay=0.05) for _ in range(3)])
    runs = [await _create(client, bearer(alice)) for _ in range(2)]
    held = [await client.get(f"/v1/responses/{run['id']}", params={"stream": "true"}, headers=bearer(alice))
            for run in runs]
    assert [reply.status for reply in held] == [200, 200]
    _assert_too_many(*await _follow(client, runs[0]["id"], bearer(alice)), "API_SERVER_MAX_FOLLOWERS_PER_KEY")
    calls = len(upstream.requests)
    async with client.post("/v1/responses", json={"model": "m", "input": "y", "background": True, "stream": True},
                           headers=bearer(alice)) as reply:
        _assert_too_many(reply.status, await reply.text(), "API_SERVER_MAX_FOLLOWERS_PER_KEY")
    await asyncio.sleep(0.2)
    assert len(upstream.requests) == calls  # refused before the run started
    bobs = await _create(client, bearer(bob))  # another key's followers are counted apart
    async with client.get(f"/v1/responses/{bobs['id']}", params={"stream": "true"}, headers=bearer(bob)) as reply:
        assert reply.status == 200
    for reply in held:
        reply.close()
    for run in [*runs, bobs]:
        key = bob if run is bobs else alice
        async with client.post(f"/v1/responses/{run['id']}/cancel", headers=bearer(key)) as reply:
            assert (await reply.json())["status"] == "cancelled"


async def test_a_follower_that_does_not_read_is_dropped_and_the_run_goes_on(
        make_client: Any, upstream: FakeUpstream) -> None:
    client = await make_client(api_key=API_KEY, max_followers_per_run=1, follower_stall_seconds=0.5)
    upstream.queue(Reply(text=BIG_TEXT, chunk_size=len(BIG_TEXT), delay=0.5))
    created = await _create(client)
    silent = _silent_follower(client.server.host, client.server.port, created["id"])
    try:
        await asyncio.sleep(0.2)
        _assert_too_many(*await _follow(client, created["id"]), "API_SERVER_MAX_FOLLOWERS_PER_RUN")
        assert await _until(client, created["id"], {"completed", "failed"}) == "completed"
        # the silent follower is stuck on megabytes it never takes: dropped after its stall bound,
        # its place given back
        async with asyncio.timeout(10):
            while (result := await _follow(client, created["id"]))[0] == 429:
                await asyncio.sleep(0.2)
        status, text = result
        assert status == 200
        seq = _sequence(text)
        assert seq == list(range(len(seq))) and "response.completed" in text and BIG_TEXT in text
    finally:
        silent.close()


# ---- a real `serve` process: what non-reading followers cost its memory -----------------------

def _env(home: Path, upstream: FakeUpstream, **extra: str) -> dict[str, str]:
    return gateway_env(home, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                              "API_SERVER_KEY": API_KEY, **extra})


async def test_followers_that_never_read_hold_no_copy_of_the_runs_events(
        tmp_path: Path, upstream: FakeUpstream) -> None:
    gateway = await start_gateway(env=_env(tmp_path, upstream, API_SERVER_MAX_FOLLOWERS_PER_RUN="100",
                                           API_SERVER_MAX_FOLLOWERS_PER_KEY="100"))
    gateway.keep_draining()
    sockets: list[socket.socket] = []
    try:
        host, port = gateway.base_url.removeprefix("http://").rsplit(":", 1)
        async with aiohttp.ClientSession(base_url=gateway.base_url) as http:
            upstream.queue(Reply(text="warm"), Reply(text=BIG_TEXT, chunk_size=len(BIG_TEXT), delay=1.0))
            warm = await _create(http)
            await _until(http, warm["id"], {"completed"})
            before = rss_mb(gateway.pid)
            created = await _create(http)
            sockets = [_silent_follower(host, int(port), created["id"]) for _ in range(20)]
            assert await _until(http, created["id"], {"completed", "failed"}) == "completed"
            await asyncio.sleep(1.0)  # every follower is stuck on the run's last megabytes now
            grown = rss_mb(gateway.pid) - before
            # one copy of ~10 MB of events and its store write; on main each follower joined its own
            # copy of the backlog (and aiohttp another): 20 followers, about 400 MiB
            assert grown < 80, f"RSS grew {grown:.1f} MiB with 20 followers that never read"
            status, text = await _follow(http, created["id"])  # a reading follower is served meanwhile
            assert status == 200 and BIG_TEXT in text
    finally:
        for sock in sockets:
            sock.close()
        await gateway.stop()


# ---- two replicas on PostgreSQL: one reader of the store per run per replica -----------------

#: what a follower reading the store runs (store/postgres/runs.py `events_after` and `get`)
READS = ("FROM background_events WHERE response_id", "FROM background_runs WHERE response_id = $1")


@pytest.fixture
def statement_log(postgres_cluster: postgres.Cluster, postgres_url: str) -> Callable[[], int]:
    """How many follower reads (READS) the test's database has run so far, from the server's log:
    every statement of this database is logged as it runs (pg_stat_database's counters reach
    the view up to 10 s late)."""
    database = postgres_url.rsplit("/", 1)[1]
    postgres_cluster.psql(f"ALTER DATABASE \"{database}\" SET log_statement = 'all'")
    log = postgres_cluster.directory / "log"
    start = log.stat().st_size

    def reads() -> int:
        with log.open("rb") as file:
            file.seek(start)
            text = file.read().decode(errors="replace")
        return sum(line.count(what) for line in text.splitlines() if "execute" in line for what in READS)

    return reads


@pytest.fixture
async def replicas(tmp_path: Path, upstream: FakeUpstream, postgres_url: str,
                   statement_log: Callable[[], int]) -> AsyncIterator[list[ServerProcess]]:
    started = list(await asyncio.gather(*(
        start_gateway(env=_env(tmp_path / name, upstream, API_SERVER_DATABASE_URL=postgres_url,
                               API_SERVER_MAX_FOLLOWERS_PER_RUN="100", API_SERVER_MAX_FOLLOWERS_PER_KEY="100"))
        for name in ("a", "b"))))
    for gateway in started:
        gateway.keep_draining()
    yield started
    await asyncio.gather(*(gateway.stop() for gateway in started))


async def test_followers_on_the_other_replica_cost_one_readers_queries_and_each_gets_every_frame_in_order(
        replicas: list[ServerProcess], upstream: FakeUpstream, statement_log: Callable[[], int]) -> None:
    a, b = replicas
    reads: dict[int, int] = {}
    async with aiohttp.ClientSession() as http:
        for followers in (1, 20):
            upstream.queue(Reply(text="one two three four five six seven eight nine ten " * 3, chunk_size=3,
                                 chunk_delay=0.03))
            async with http.post(a.base_url + "/v1/responses", headers=AUTH,
                                 json={"model": "m", "input": "x", "background": True}) as reply:
                response_id = (await reply.json())["id"]
            before = statement_log()
            seen = await asyncio.gather(*(_follow_on(http, b, response_id) for _ in range(followers)))
            reads[followers] = statement_log() - before
            for sequence in seen:  # every follower: the whole run, in order, once
                assert sequence == list(range(len(seen[0]))) and len(sequence) > 50
    # on main each follower read the store itself: 20 followers, 20 times one's reads
    assert 0 < reads[20] <= 2 * reads[1] + 10, reads


async def _follow_on(http: aiohttp.ClientSession, gateway: ServerProcess, response_id: str) -> list[int]:
    async with http.get(f"{gateway.base_url}/v1/responses/{response_id}", params={"stream": "true"},
                        headers=AUTH) as reply:
        assert reply.status == 200, await reply.text()
        return _sequence(await reply.text())
