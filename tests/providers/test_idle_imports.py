"""What a started gateway has imported: plugin discovery keeps unused code out of an idle process.

Each check starts the app (its cleanup contexts run: the registry is loaded, the web chains are
planned and logged) in a fresh interpreter and reads `sys.modules` there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

STARTED_APP = """
import asyncio, json, sys
from pathlib import Path
from aiohttp import web
from gateway.config.settings import load_settings
from gateway.http.app import create_app

async def main():
    settings = load_settings(Path(sys.argv[1]), environ=json.loads(sys.argv[2]))
    runner = web.AppRunner(create_app(settings))
    await runner.setup()
    try:
        print(json.dumps(sorted(sys.modules)))
    finally:
        await runner.cleanup()

asyncio.run(main())
"""


def modules_of_started_gateway(home: Path, **env: str) -> set[str]:
    environ = {"LLM_BASE_URL": "http://127.0.0.1:9/v1", "LLM_MODEL": "m", **env}
    out = subprocess.run([sys.executable, "-c", STARTED_APP, str(home), json.dumps(environ)], cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_a_gateway_without_pip_plugins_starts_without_importlib_metadata(tmp_path: Path) -> None:
    assert "importlib.metadata" not in modules_of_started_gateway(tmp_path)


def test_a_started_gateway_has_not_imported_the_research_loop(tmp_path: Path) -> None:
    # a research model id is known at start (its options parse in the routes); its loop loads on a first run
    loaded = modules_of_started_gateway(tmp_path)
    research = {name for name in loaded if name.startswith("gateway.agent.research.")}
    assert research <= {"gateway.agent.research.options"}, sorted(research)
