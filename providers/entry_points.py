"""Installed entry points of one group, without importlib.metadata when no distribution declares it.

`importlib.metadata` (with the email, zipfile and csv modules it pulls in) is most of what plugin
discovery adds to an idle gateway's memory (bench/README.md, idle RSS), and almost every install
has no pip plugin at all. `group_may_be_declared` answers "might any distribution on sys.path
declare this group?" by looking where importlib.metadata looks (the `*.dist-info` / `*.egg-info`
folders of each sys.path directory) for the group's `[section]` in their entry_points.txt. It says
yes whenever it cannot tell (a zip on sys.path, a metadata finder other than the standard one, an
unreadable file), so the full scan runs whenever it could find something.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import importlib.metadata

_INFO_SUFFIXES = (".dist-info", ".egg-info")


def entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    """The group's installed entry points, each once (a distribution seen twice on sys.path)."""
    if not group_may_be_declared(group):
        return []
    import importlib.metadata  # only when some distribution may declare the group (see above)

    seen: set[tuple[str, str]] = set()
    unique = []
    for entry_point in importlib.metadata.entry_points(group=group):
        if (entry_point.name, entry_point.value) not in seen:
            seen.add((entry_point.name, entry_point.value))
            unique.append(entry_point)
    return unique


def group_may_be_declared(group: str) -> bool:
    """False only when no distribution importlib.metadata would find declares `group`."""
    if any(hasattr(finder, "find_distributions") and finder is not importlib.machinery.PathFinder
           for finder in sys.meta_path):
        return True  # a custom metadata finder: only importlib.metadata knows what it finds
    header = f"[{group}]"
    for entry in sys.path:
        root = entry or "."
        try:
            children = os.listdir(root)
        except NotADirectoryError:
            return True  # a zip (or an egg file) on sys.path: importlib.metadata reads inside it
        except OSError:
            continue  # missing or unreadable: importlib.metadata finds nothing there either
        egg = root.lower().endswith(".egg")
        for child in children:
            low = child.lower()
            if low.endswith(_INFO_SUFFIXES) or (egg and low == "egg-info"):
                if _declares(os.path.join(root, child, "entry_points.txt"), header):
                    return True
    return False


def _declares(path: str, header: str) -> bool:
    try:
        with open(path, encoding="utf-8") as file:
            return header in file.read()
    except (FileNotFoundError, NotADirectoryError):  # no entry points (an .egg-info file has none)
        return False
    except (OSError, UnicodeDecodeError):
        return True  # unreadable here: let importlib.metadata read (and report) it
