"""The compose `replicas` profile, brought up with podman-compose (scripts/container_smoke).

Its own network: the bench's fake (model and SearXNG) runs there as the `searxng` service, and the
checks reach nginx on the port docker-compose.yml publishes on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from container_smoke_support import (
    BASE,
    KEY,
    LB,
    PROJECT,
    REPO,
    chat,
    check,
    compose,
    http,
    podman,
    wait_for,
)


def container_address(name: str) -> str:
    networks = json.loads(podman("inspect", "--format", "{{json .NetworkSettings.Networks}}", name).stdout)
    return next(iter(networks.values()))["IPAddress"]


def upstreams_since(since: str) -> list[str]:
    """The replica address of each request nginx logged since `since` (its log format has upstream=)."""
    logs = podman("logs", "--since", since, f"{PROJECT}_load-balancer_1").stdout
    return re.findall(r"upstream=([\d.]+):8642", logs)


def anonymous_volumes() -> list[str]:
    names = podman("volume", "ls", "--format", "{{.Name}}").stdout.split()
    return [name for name in names if re.fullmatch(r"[0-9a-f]{64}", name)]


def through_lb(count: int) -> list[int]:
    return [chat(LB, f"hello {i}")[0] for i in range(count)]


def replica_get(replica: str, path: str) -> int:
    code = ("import sys, urllib.request, urllib.error\n"
            f"r = urllib.request.Request('http://127.0.0.1:8642{path}', headers={{'Authorization': 'Bearer {KEY}'}})\n"
            "try: print(urllib.request.urlopen(r, timeout=10).status)\n"
            "except urllib.error.HTTPError as e: print(e.code)\n")
    return int(podman("exec", f"{PROJECT}_{replica}_1", "python", "-c", code).stdout.strip() or 0)


def wait_healthy(replica: str, timeout: float = 120) -> float:
    name = f"{PROJECT}_{replica}_1"
    return wait_for(f"{replica} healthy",
                    lambda: podman("healthcheck", "run", name, check_rc=False, quiet=True).returncode == 0, timeout)


def replicas() -> None:
    print("\n-- docker-compose.yml, profile replicas (podman-compose)", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="agsmoke-compose-"))
    try:
        shutil.copy(REPO / "docker-compose.yml", workdir)
        shutil.copytree(REPO / "deploy", workdir / "deploy")
        # The fake model and SearXNG: the bench's fake, built on the image just built
        context = Path(os.environ["STANDIN_CONTEXT"])
        shutil.copytree(REPO / "bench", context / "bench", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        podman("build", "--quiet", "--network", "none", "-t", "docker.io/searxng/searxng:latest",
               "-f", str(context / "searxng.Containerfile"), str(context))
        # podman < 5.3 has no host-gateway: README, "Docker" (HOST_GATEWAY)
        host_ip = "10.88.0.1"
        (workdir / ".env").write_text(
            f"API_SERVER_KEY={KEY}\nPOSTGRES_PASSWORD=smoke-{secrets.token_hex(8)}\n"
            f"SEARXNG_SECRET={secrets.token_hex(16)}\nLLM_BASE_URL=http://searxng:8080/v1\n"
            f"HOST_GATEWAY={host_ip}\n")
        compose(workdir, "down", "-v")
        anonymous_before = set(anonymous_volumes())
        start = time.monotonic()
        compose(workdir, "up", "-d", "--no-build", "load-balancer")
        # A client that does not wait: requests through nginx while the replicas start (podman-compose
        # on podman < 4.6 starts nginx at once). Refused connections then must not mark the replicas
        # down for later requests.
        starting = threading.Event()
        early: list[int] = []

        def early_client() -> None:
            while not starting.is_set():
                early.append(chat(LB, "early", timeout=10)[0])
                time.sleep(0.2)

        client = threading.Thread(target=early_client)
        client.start()
        try:
            for replica in ("gateway-a", "gateway-b"):
                wait_healthy(replica)
        finally:
            starting.set()
            client.join(20)
        print(f"  both replicas ready {time.monotonic() - start:.1f} s after up; requests sent while they "
              f"started got {sorted(set(early))}", flush=True)
        hosts = podman("exec", f"{PROJECT}_gateway-a_1", "cat", "/etc/hosts").stdout
        check(re.search(rf"^{re.escape(host_ip)}\s.*host\.docker\.internal", hosts, re.M) is not None,
              "extra_hosts maps host.docker.internal (HOST_GATEWAY, podman < 5.3)")
        for replica in ("gateway-a", "gateway-b"):
            volumes = podman("inspect", "--format", "{{range .Mounts}}{{.Name}} {{end}}",
                             f"{PROJECT}_{replica}_1").stdout.split()
            check(volumes == [f"{PROJECT}_{replica}-data"] and not set(volumes) & set(anonymous_volumes()),
                  f"{replica}'s only volume is its named one, not an anonymous one ({volumes})")

        since = str(int(time.time()))
        statuses = through_lb(20)
        check(statuses == [200] * 20, f"no 502 once ready: 20 chats through nginx answer 200 ({set(statuses)})")
        addresses = {replica: container_address(f"{PROJECT}_{replica}_1") for replica in ("gateway-a", "gateway-b")}
        spread = set(upstreams_since(since))
        check(spread == set(addresses.values()), f"nginx spread them over both replicas ({spread})")

        status, stored = http("POST", f"{LB}/v1/responses", {"model": "agent-gateway", "input": "shared"})
        check(status == 200, "a response stored through nginx")
        for replica in ("gateway-a", "gateway-b"):
            check(replica_get(replica, f"/v1/responses/{stored['id']}") == 200, f"{replica} reads it (PostgreSQL)")

        print("  PostgreSQL stopped: what needs the store gets 503, which must not take a replica out", flush=True)
        podman("stop", "-t", "10", f"{PROJECT}_postgres_1")
        # Three, so that each replica answers 503 at least twice: nginx's former `max_fails=1` default
        # with `proxy_next_upstream ... http_503` then marked both down for 10 s.
        reads = [http("GET", f"{LB}/v1/responses/{stored['id']}")[0] for _ in range(3)]
        check(reads == [503] * 3, f"reads of a stored response answer 503 through nginx ({reads})")
        statuses = through_lb(6)
        check(statuses == [200] * 6, f"chats right after it still answer 200: both replicas in rotation ({statuses})")
        podman("start", f"{PROJECT}_postgres_1")
        for replica in ("gateway-a", "gateway-b"):
            wait_healthy(replica)

        print("  gateway-a stopped, its address taken, gateway-a started again (a new address)", flush=True)
        podman("stop", "-t", "20", f"{PROJECT}_gateway-a_1")
        statuses = through_lb(6)
        check(statuses == [200] * 6, f"with gateway-a down, nginx sends everything to gateway-b ({set(statuses)})")
        # As on a busy Docker network: another container gets the stopped replica's address, so the
        # replica comes back on a new one (nginx itself is not touched).
        network = next(iter(json.loads(podman("inspect", "--format", "{{json .NetworkSettings.Networks}}",
                                              f"{PROJECT}_gateway-a_1").stdout)))
        podman("run", "-d", "--name", f"{PROJECT}-squatter", "--network", network, "--ip", addresses["gateway-a"],
               BASE, "sleep", "600")
        podman("start", f"{PROJECT}_gateway-a_1")
        wait_healthy("gateway-a")
        new_address = container_address(f"{PROJECT}_gateway-a_1")
        check(new_address != addresses["gateway-a"], "gateway-a is back on a new address")
        print(f"  gateway-a: {addresses['gateway-a']} before, {new_address} now", flush=True)
        time.sleep(2.5)  # nginx's resolver caches an answer for valid=2s
        since = str(int(time.time()))
        statuses = through_lb(20)
        served = upstreams_since(since)
        check(statuses == [200] * 20, "20 chats through nginx answer 200 after the restart")
        check(new_address in served, f"the restarted gateway-a gets traffic again ({served.count(new_address)}/20)")
        podman("rm", "-f", f"{PROJECT}-squatter", quiet=True)
        compose(workdir, "down", "-v")
        # the searxng stand-in inherits the gateway image's VOLUME /data
        for name in set(anonymous_volumes()) - anonymous_before:
            podman("volume", "rm", "-f", name, quiet=True)
    except BaseException:
        podman("rm", "-f", f"{PROJECT}-squatter", check_rc=False, quiet=True)
        for service in ("load-balancer", "gateway-a", "gateway-b", "postgres"):
            logs = podman("logs", "--tail", "15", f"{PROJECT}_{service}_1", check_rc=False, quiet=True)
            print(f"--- {service}:\n{logs.stdout}{logs.stderr}", file=sys.stderr)
        compose(workdir, "down", "-v")
        raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
