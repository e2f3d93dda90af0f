"""JavaScript clients (tests/node/package.json, pinned) installed for the tests and run under Node.

`node_clients()` installs the packages with npm into a cache folder named after the package
file's hash (`AGENT_GATEWAY_TEST_CACHE`, default ~/.cache/agent-gateway-tests), once, and copies the
scripts beside node_modules (an ES module resolves its imports from its own folder). `run_node`
runs one script with arguments and returns its last stdout line as JSON. The tests skip only
where the machine has no `node` and `npm` at all.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
#: what npm prints when it cannot reach its registry (the only case where the tests skip)
_UNREACHABLE = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ENETUNREACH")


def node_clients() -> Path:
    """The folder with node_modules and the scripts; installs what is missing."""
    folder = npm_installed(NODE_DIR)
    for script in NODE_DIR.glob("*.mjs"):
        shutil.copy2(script, folder / script.name)
    return folder


def npm_installed(package_dir: Path) -> Path:
    """A cache folder with `package_dir`'s package.json installed by npm (once per its hash)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not on this machine")
    manifest = (package_dir / "package.json").read_bytes()
    cache = Path(os.environ.get("AGENT_GATEWAY_TEST_CACHE", "~/.cache/agent-gateway-tests")).expanduser()
    folder = cache / ("node-" + hashlib.sha256(manifest).hexdigest()[:16])
    done = folder / ".installed"  # written last: an interrupted install is redone
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_bytes(manifest)
        done_npm = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-package-lock",
                                   "--loglevel=error"], cwd=folder, timeout=600, capture_output=True, text=True)
        if done_npm.returncode != 0 and any(word in done_npm.stderr for word in _UNREACHABLE):
            pytest.skip(f"the npm registry cannot be reached: {done_npm.stderr.strip()[-300:]}")
        done_npm.check_returncode()
        done.write_text("ok\n")
    return folder


async def run_node(folder: Path, script: str, *args: str, timeout: float = 120) -> Any:
    """Run `script` from `folder` (the gateway keeps serving on this loop meanwhile)."""
    process = await asyncio.create_subprocess_exec(
        "node", str(folder / script), *args, cwd=folder,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, err.decode(errors="replace")[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1])
