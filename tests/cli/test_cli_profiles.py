"""`agent-gateway profile ...` and `-p NAME` as real processes on temporary homes."""

from __future__ import annotations

import asyncio
import os
import re
import stat
import sys
from pathlib import Path

import aiohttp

from tests.support.gateway_process import gateway_env, run_cli, start_gateway

KEY_LINE = re.compile(r"API key \(shown once, keep it safe\): (\S+)")


async def cli(home: Path, *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    return await run_cli(*args, env=gateway_env(home), stdin=stdin)


async def configure(home: Path, profile: str, settings: dict[str, str]) -> None:
    # One at a time: concurrent writers of one .env would race on its rename.
    for key, value in settings.items():
        code, _, err = await cli(home, "-p", profile, "config", "set", key, value)
        assert code == 0, err


async def test_two_profiles_serve_side_by_side_with_their_own_model_keys_and_stores(tmp_path, upstream):
    for code, _, err in await asyncio.gather(*(cli(tmp_path, "profile", "create", n) for n in ("alice", "bob"))):
        assert code == 0, err
    keys = {"alice": "sk-alice-0123456789abcdef", "bob": "sk-bob-0123456789abcdef"}
    await asyncio.gather(*(
        configure(tmp_path, name, {"API_SERVER_KEY": key, "LLM_BASE_URL": upstream.base_url,
                                   "API_SERVER_PORT": "0", "model": "fake-model"})
        for name, key in keys.items()))

    env = gateway_env(tmp_path)
    alice, bob = await asyncio.gather(start_gateway("-p", "alice", env=env), start_gateway("-p", "bob", env=env))
    gateways = {"alice": alice, "bob": bob}
    try:
        async with aiohttp.ClientSession() as session:
            stored = {}
            for name, gateway in gateways.items():
                auth = {"Authorization": f"Bearer {keys[name]}"}
                async with session.get(gateway.base_url + "/v1/models", headers=auth) as resp:
                    assert resp.status == 200
                    assert [m["id"] for m in (await resp.json())["data"]] == [name, f"{name}-deep-research"]
                other = "bob" if name == "alice" else "alice"
                async with session.get(gateway.base_url + "/v1/models",
                                       headers={"Authorization": f"Bearer {keys[other]}"}) as resp:
                    assert resp.status == 401
                async with session.post(gateway.base_url + "/v1/responses", headers=auth,
                                        json={"model": name, "input": "hi"}) as resp:
                    assert resp.status == 200, await resp.text()
                    stored[name] = (await resp.json())["id"]
            # A response stored by alice's gateway is unknown to bob's, and the other way round.
            for name, gateway in gateways.items():
                auth = {"Authorization": f"Bearer {keys[name]}"}
                other = "bob" if name == "alice" else "alice"
                async with session.get(gateway.base_url + f"/v1/responses/{stored[name]}", headers=auth) as resp:
                    assert resp.status == 200
                async with session.get(gateway.base_url + f"/v1/responses/{stored[other]}", headers=auth) as resp:
                    assert resp.status == 404
    finally:
        await asyncio.gather(alice.stop(), bob.stop())
    for name in ("alice", "bob"):
        assert (tmp_path / "profiles" / name / "responses.db").is_file()
    assert not (tmp_path / "responses.db").exists()
    assert all(request["model"] == "fake-model" for request in upstream.requests)


async def test_create_writes_an_owner_only_env_with_a_key_shown_once(tmp_path):
    code, out, err = await cli(tmp_path, "profile", "create", "team-a")
    assert code == 0, err
    key = KEY_LINE.search(out).group(1)
    directory = tmp_path / "profiles" / "team-a"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / ".env").stat().st_mode) == 0o600
    assert f"API_SERVER_KEY={key}" in (directory / ".env").read_text()

    masked, revealed = await asyncio.gather(cli(tmp_path, "-p", "team-a", "config", "get", "API_SERVER_KEY"),
                                            cli(tmp_path, "-p", "team-a", "config", "get", "API_SERVER_KEY",
                                                "--reveal"))
    assert key not in masked[1] and masked[1].strip().endswith(key[-4:])
    assert revealed[1].strip() == key


async def test_new_profiles_get_distinct_free_ports_and_list_shows_them(tmp_path):
    assert (await cli(tmp_path, "profile", "create", "one"))[0] == 0
    assert (await cli(tmp_path, "profile", "create", "two", "--no-key"))[0] == 0
    code, out, _ = await cli(tmp_path, "profile", "list")
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["(default)"][1:3] == ["8642", "no"]
    assert rows["one"][2] == "yes" and rows["two"][2] == "no"
    ports = {rows[name][1] for name in ("(default)", "one", "two")}
    assert len(ports) == 3


async def test_invalid_profile_names_are_refused_without_touching_the_disk(tmp_path):
    home = tmp_path / "home"
    for name in ("../escape", "Alice", "a/b", ".hidden", "x" * 80):
        code, _, err = await cli(home, "profile", "create", name)
        assert code == 2, name
        assert "invalid profile name" in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
    code, _, err = await cli(home, "-p", "../escape", "config", "list")
    assert code == 2 and "invalid profile name" in err
    assert not (tmp_path / "escape").exists()
    assert not (home / "profiles").exists() or not any((home / "profiles").iterdir())


async def test_creating_an_existing_profile_fails_and_keeps_its_files(tmp_path):
    assert (await cli(tmp_path, "profile", "create", "keep"))[0] == 0
    before = (tmp_path / "profiles" / "keep" / ".env").read_text()
    code, _, err = await cli(tmp_path, "profile", "create", "keep")
    assert code == 1 and "already exists" in err
    assert (tmp_path / "profiles" / "keep" / ".env").read_text() == before


async def test_delete_needs_yes_when_nobody_can_answer(tmp_path):
    assert (await cli(tmp_path, "profile", "create", "gone"))[0] == 0
    code, _, err = await cli(tmp_path, "profile", "delete", "gone", stdin=b"y\n")
    assert code == 2 and "--yes" in err
    assert (tmp_path / "profiles" / "gone").is_dir()

    code, out, _ = await cli(tmp_path, "profile", "delete", "gone", "--yes")
    assert code == 0 and "deleted profile gone" in out
    assert not (tmp_path / "profiles" / "gone").exists()
    code, _, err = await cli(tmp_path, "profile", "delete", "gone", "--yes")
    assert code == 1 and "does not exist" in err


async def test_delete_asks_on_a_terminal(tmp_path):
    assert (await cli(tmp_path, "profile", "create", "asked"))[0] == 0
    env = gateway_env(tmp_path)
    # A pseudo-terminal makes stdin a TTY, as when a person runs the command.
    primary, secondary = os.openpty()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "profile", "delete", "asked", env=env, stdin=secondary,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    os.close(secondary)
    os.write(primary, b"n\n")
    out, _ = await asyncio.wait_for(proc.communicate(), 20)
    os.close(primary)
    assert proc.returncode == 1
    assert "nothing deleted" in out.decode()
    assert (tmp_path / "profiles" / "asked").is_dir()


async def test_commands_on_a_missing_profile_say_how_to_create_it(tmp_path):
    code, _, err = await cli(tmp_path, "-p", "nobody", "config", "set", "API_SERVER_PORT", "9000")
    assert code == 1
    assert "agent-gateway profile create nobody" in err
    assert not (tmp_path / "profiles" / "nobody").exists()
