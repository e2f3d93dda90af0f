"""DDGS provider: keyless web search through the optional `ddgs` library.

The library is synchronous and can hang holding the GIL, so each search runs in a child process
(`python -m plugins.web.ddgs.worker`, JSON over stdin/stdout) that is killed when it overruns.

Environment: DDGS_REGION (default us-en), DDGS_SAFESEARCH (on|moderate|off, default moderate),
DDGS_BACKEND (default auto), DDGS_TIMEOUT (seconds, default 20). PYTHONPATH from the profile's
environment is handed to the child (and consulted by is_available), so the library may live there.
"""

from __future__ import annotations

import asyncio
import importlib.machinery
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from providers.failures import RATE_LIMITED, TIMEOUT
from providers.locales import ddg_region
from providers.web import Envelope, ProviderError, WebSearchProvider, search_result

INSTALL_HINT = "pip install 'agent-gateway[ddgs]'"
# The directory that holds the top-level `plugins` package, so the child can import the worker.
_IMPORT_ROOT = Path(__file__).resolve().parents[3]


class DdgsProvider(WebSearchProvider):
    name = "ddgs"

    def __init__(self, env: Mapping[str, str]) -> None:
        self.region = env.get("DDGS_REGION") or "us-en"
        self.safesearch = env.get("DDGS_SAFESEARCH") or "moderate"
        self.backend = env.get("DDGS_BACKEND") or "auto"
        self.timeout = float(env.get("DDGS_TIMEOUT") or 20)
        self.extra_paths = [p for p in (env.get("PYTHONPATH") or "").split(os.pathsep) if p]

    @property
    def display_name(self) -> str:
        return "DDGS (DuckDuckGo)"

    def is_available(self) -> bool:
        # find_spec on the paths the child will see: no import, so no import-time cost or side effect.
        return importlib.machinery.PathFinder.find_spec("ddgs", self.extra_paths + sys.path) is not None

    def unavailable_reason(self) -> str | None:
        return None if self.is_available() else f"the ddgs package is not installed: {INSTALL_HINT}"

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(_IMPORT_ROOT), *self.extra_paths])
        env["PYTHONUNBUFFERED"] = "1"
        return env

    async def search(self, query: str, limit: int = 5, *, country: str | None = None) -> Envelope:
        request = {
            "query": query,
            "max_results": limit,
            # a request's country picks DuckDuckGo's region for it ("GB" -> uk-en); else DDGS_REGION
            "region": ddg_region(country) or self.region,
            "safesearch": self.safesearch,
            "backend": self.backend,
        }
        answer = await self._run_worker(request)
        if "error" in answer:
            message = str(answer["error"])
            limited = "rate limit" in message.lower()
            # A rate limit passes: another provider (or this one later) may answer.
            raise ProviderError(message, retryable=limited, kind=RATE_LIMITED if limited else None)
        results = answer.get("results")
        if not isinstance(results, list):
            raise ProviderError("ddgs worker answered without results")
        hits = [
            {"title": r.get("title"), "url": r["href"], "description": r.get("body")}
            for r in results
            if isinstance(r, dict) and isinstance(r.get("href"), str)
        ]
        return search_result(hits[:limit])

    async def _run_worker(self, request: dict[str, Any]) -> dict[str, Any]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "plugins.web.ddgs.worker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._child_env(),
        )
        try:
            stdout, stderr = await asyncio.wait_for(
                proc.communicate(json.dumps(request).encode()), self.timeout
            )
        except TimeoutError:
            raise ProviderError(f"ddgs search did not finish within {self.timeout:g} s (stopped)",
                                retryable=True, kind=TIMEOUT) from None
        finally:
            # Also reached when the tool call itself is cancelled: never leave a child behind.
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        try:
            answer = json.loads(stdout.decode() or "null")
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            lines = stderr.decode(errors="replace").strip().splitlines()
            last = lines[-1] if lines else f"exit code {proc.returncode}"
            raise ProviderError(f"ddgs worker failed: {last[:300]}")
        return answer
