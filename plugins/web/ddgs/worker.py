"""Child process for the ddgs provider: one search request as JSON on stdin, one JSON answer on stdout.

Run as `python -m plugins.web.ddgs.worker`. The `ddgs` library has been seen to hang while holding
the GIL; in a child process such a hang costs one tool call (the parent kills us), not the server.

stdin:  {"query": str, "max_results": int, "region": str, "safesearch": str, "backend": str}
stdout: {"results": [{"title", "href", "body"}, ...]}  or  {"error": str}
"""

from __future__ import annotations

import json
import sys
from typing import Any


def search(request: dict[str, Any]) -> dict[str, Any]:
    try:
        from ddgs import DDGS  # imported here: optional extra, and only ever in this child
    except ImportError:
        return {"error": "the ddgs package is not installed: pip install 'agent-gateway[ddgs]'"}
    try:
        results = DDGS().text(
            request["query"],
            region=request.get("region", "us-en"),
            safesearch=request.get("safesearch", "moderate"),
            max_results=int(request.get("max_results", 5)),
            backend=request.get("backend", "auto"),
        )
    except Exception as exc:  # noqa: BLE001 - reported to the parent as one sentence
        kind = type(exc).__name__
        if _nothing_found(exc):
            return {"results": []}
        if "ratelimit" in kind.lower():
            return {"error": f"DuckDuckGo rate limit reached ({kind}): {exc}"}
        return {"error": f"ddgs search failed ({kind}): {exc}"}
    return {"results": [r for r in results or [] if isinstance(r, dict)]}


def _nothing_found(exc: Exception) -> bool:
    """ddgs 9.x raises DDGSException("No results found.") when nothing matches: an empty answer,
    not a failure (which would send the call down the fallback chain for nothing)."""
    return type(exc).__name__ == "DDGSException" and "no results found" in str(exc).lower()


def main() -> int:
    try:
        request = json.loads(sys.stdin.read())
    except ValueError as exc:
        print(json.dumps({"error": f"bad request to the ddgs worker: {exc}"}))
        return 2
    print(json.dumps(search(request), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
