"""What a SQLite fault means for the person running the gateway, in a few words."""

from __future__ import annotations

import sqlite3


def describe(exc: sqlite3.Error) -> str:
    text = str(exc).strip() or type(exc).__name__
    lowered = text.lower()
    if "readonly" in lowered or "read-only" in lowered:
        return "the database file is read-only"
    if "disk is full" in lowered or "database or disk is full" in lowered:
        return "the disk is full"
    if "locked" in lowered or "busy" in lowered:
        return "the database is locked by another process"
    if "not a database" in lowered or "malformed" in lowered:
        return "the database file is corrupt or not a SQLite database"
    if "unable to open" in lowered:
        return "the database file cannot be opened"
    return text
