"""Who owns a stored object: a profile and a key name, as one string.

An owner is `"<profile>/<key name>"` (the default profile is the empty string, so its key
`default` is `"/default"`). Profile names are lowercase letters, digits, '-' and '_' and key names
`[A-Za-z0-9._-]`, so neither holds '/' or ':' and an owner string names exactly one pair. A named
conversation is kept under `"<owner>:<name>"`: alice's `notes` and bob's `notes` are two rows, and
the client's name (any text) comes after the first ':' whatever it holds.
"""

from __future__ import annotations

import re

#: The key API_SERVER_KEY stands for, and the owner of a keyless gateway's objects and of what a
#: store made before owners (schema version 4) held.
DEFAULT_KEY = "default"
KEY_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


def profile_label(profile: str | None) -> str:
    return profile or ""


def owner_of(profile: str | None, key_name: str) -> str:
    return f"{profile_label(profile)}/{key_name}"


def owner_prefix(profile: str | None) -> str | None:
    """What every owner of `profile` starts with (None for None: any profile), so a query can keep
    to one profile's rows where profiles share a database."""
    return None if profile is None else f"{profile}/"


def key_name_of(owner: str) -> str:
    return owner.partition("/")[2]


def scoped_name(owner: str, name: str) -> str:
    return f"{owner}:{name}"


def unscoped_name(stored: str) -> str:
    return stored.partition(":")[2]


DEFAULT_OWNER = owner_of(None, DEFAULT_KEY)
