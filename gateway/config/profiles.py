"""Profiles on disk: `<home>/profiles/NAME/` folders, each a separate gateway (own `.env`, config, store).

The default profile lives directly in the home. This module only knows folders and files; the
`profile` CLI (gateway/cli_profile.py) does the talking.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gateway.config.settings import SettingsError, load_settings, profile_dir, validate_profile_name

#: The default profile keeps the documented default port; new profiles count up from the next one.
FIRST_PROFILE_PORT = 8643
KEY_PREFIX = "sk-ag-"


class ProfileError(Exception):
    """A profile operation cannot go ahead; the message says why in one sentence."""


@dataclass(frozen=True)
class ProfileInfo:
    name: str | None  # None is the default profile
    path: Path
    port: int | None  # None when the profile's files do not load
    has_key: bool
    error: str | None = None


def profiles_root(home: Path) -> Path:
    return home / "profiles"


def profile_names(home: Path) -> list[str]:
    """Names of the profile folders in the home, sorted; stray files and odd names are ignored."""
    root = profiles_root(home)
    if not root.is_dir():
        return []
    names = []
    for entry in root.iterdir():
        try:
            validate_profile_name(entry.name)
        except SettingsError:
            continue
        if entry.is_dir():
            names.append(entry.name)
    return sorted(names)


def require_profile(home: Path, name: str | None) -> Path:
    """The folder of an existing profile (the default profile always exists, even before its first file)."""
    directory = profile_dir(home, name)
    if name is not None and not directory.is_dir():
        raise ProfileError(f"profile {name!r} does not exist: create it with `agent-gateway profile create {name}`")
    return directory


def describe(home: Path, name: str | None) -> ProfileInfo:
    """What a profile's own files configure; the process environment is deliberately ignored here."""
    path = profile_dir(home, name)
    try:
        settings = load_settings(home, name, environ={})
    except SettingsError as exc:
        return ProfileInfo(name, path, None, False, error=str(exc))
    return ProfileInfo(name, path, settings.port, bool(settings.api_key))


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def suggest_port(home: Path, taken: Iterable[int] = ()) -> int:
    """The first port from FIRST_PROFILE_PORT that no profile is configured with and nothing listens on."""
    used = set(taken)
    for name in [None, *profile_names(home)]:
        info = describe(home, name)
        if info.port is not None:
            used.add(info.port)
    port = FIRST_PROFILE_PORT
    while port in used or not _port_is_free(port):
        port += 1
        if port > 65535:
            raise ProfileError("no free port found above 8643; choose one with --port")
    return port


def create_profile(home: Path, name: str, *, port: int | None = None, key: str | None = None) -> Path:
    """Make `<home>/profiles/NAME/` with an owner-only `.env` holding the port and (optionally) a key."""
    directory = profile_dir(home, validate_profile_name(name))
    if directory.exists() or directory.is_symlink():
        raise ProfileError(f"profile {name!r} already exists at {directory}")
    profiles_root(home).mkdir(parents=True, exist_ok=True)
    # 0700: the folder holds keys and stored conversations, other users of the box have no business there.
    directory.mkdir(mode=0o700)
    lines = [f"# agent-gateway profile {name}: settings here override config.yaml; see .env.example"]
    if port is not None:
        lines.append(f"API_SERVER_PORT={port}")
    if key is not None:
        lines.append(f"API_SERVER_KEY={key}")
    env_path = directory / ".env"
    # Created 0600 from the start, so the key is never readable by others, not even for a moment.
    fd = os.open(env_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return directory


def delete_profile(home: Path, name: str) -> Path:
    directory = profile_dir(home, validate_profile_name(name))
    if directory.is_symlink():
        # rmtree would refuse anyway; say plainly that we will not follow links out of the home.
        raise ProfileError(f"{directory} is a symbolic link; remove it by hand if you mean to")
    if not directory.is_dir():
        raise ProfileError(f"profile {name!r} does not exist")
    shutil.rmtree(directory)
    return directory
