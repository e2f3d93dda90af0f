"""fetch: download pages through the URL-safety fetcher and turn them into readable markdown.

HTML goes through trafilatura (main-content extraction: drops navigation, ads and boilerplate,
keeps headings, lists and tables as markdown, and reads the title from the metadata). Plain text,
markdown, JSON, XML and CSV pass through as text. Other types (images, PDFs, archives) are refused
with a clear error rather than fed to the model as noise.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import subprocess
import sys
from typing import Any

from providers.urlsafety import Fetched, SafeFetcher
from providers.web import Envelope, ProviderError, WebSearchProvider, extract_result, page

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({
    "text/plain", "text/markdown", "text/x-markdown", "text/csv", "text/xml", "application/xml",
    "application/json", "application/ld+json",
})

log = logging.getLogger(__name__)


#: Run by a child interpreter: prints why trafilatura cannot be imported, or nothing.
_PROBE = """
import json, sys
sys.path[:] = json.loads(sys.argv[1])
try:
    import trafilatura
except Exception as exc:
    print(type(exc).__name__ + ": " + (" ".join(str(exc).split()) or "no message"))
"""
PROBE_TIMEOUT = 60.0  # seconds; a cold import on a slow disk takes a few


def extractor_import_error() -> str | None:
    """Why the HTML extractor (trafilatura and its lxml stack) cannot be imported, or None when it can.

    Imports it for real: a package that is present but broken (trafilatura 2 on lxml 6 without
    lxml_html_clean raises ImportError from deep inside) is caught only by importing. The import is
    tried in a child interpreter (same executable and module path) unless this process already holds
    it: imported here, the lxml stack would stay in a gateway's memory from its start on, read a page
    or not (bench/README.md, idle RSS).
    """
    if "trafilatura" in sys.modules:  # a failed import leaves no entry: this one imported
        return None
    try:
        probe = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(sys.path)], capture_output=True,
                               text=True, timeout=PROBE_TIMEOUT, check=False)
        detail = probe.stdout.strip() or (f"the import check exited with status {probe.returncode}"
                                          if probe.returncode else "")
    except (OSError, subprocess.SubprocessError):  # no child interpreter to be had: import here
        detail = _import_here()
    if not detail:
        return None
    return (f"its HTML extractor trafilatura cannot be imported ({detail}); "
            "reinstall agent-gateway so its dependencies are complete")


def _import_here() -> str:
    try:
        import trafilatura  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import-time failure means the extractor cannot run
        return f"{type(exc).__name__}: {' '.join(str(exc).split()) or 'no message'}"
    return ""


class FetchProvider(WebSearchProvider):
    name = "fetch"

    def __init__(
        self, *, allow_private: bool = False, max_bytes: int | None = None, timeout: float = 20.0
    ) -> None:
        options: dict[str, Any] = {"allow_private": allow_private, "timeout": timeout}
        if max_bytes is not None:
            options["max_bytes"] = max_bytes
        self._fetcher = SafeFetcher(**options)
        # Checked on first ask, then kept: an import either works for this process or it does not.
        self._extractor_checked = False
        self._extractor_error: str | None = None

    @property
    def display_name(self) -> str:
        return "Built-in fetcher"

    def is_available(self) -> bool:
        return self.unavailable_reason() is None

    def unavailable_reason(self) -> str | None:
        if not self._extractor_checked:
            self._extractor_error = extractor_import_error()
            self._extractor_checked = True
        return self._extractor_error

    def supports_search(self) -> bool:
        return False

    def supports_extract(self) -> bool:
        return True

    async def extract(self, urls: list[str], **kwargs: Any) -> Envelope:
        pages = await asyncio.gather(*(self._one(url) for url in urls))
        return extract_result(pages)

    async def _one(self, url: str) -> dict[str, Any]:
        try:
            fetched = await self._fetcher.fetch(url)
        except ProviderError as exc:
            return page(url, error=str(exc))
        if fetched.status >= 400:
            return page(url, error=f"the server answered HTTP {fetched.status}")
        try:
            title, text = await asyncio.to_thread(readable, fetched)
        except ProviderError as exc:
            return page(url, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - one page the extractor chokes on must not sink the batch
            log.warning("fetch: reading %s failed: %s: %s", url, type(exc).__name__, exc)
            return page(url, error=f"the page could not be read ({type(exc).__name__})")
        metadata: dict[str, Any] = {"content_type": fetched.content_type or "unknown"}
        if fetched.final_url != url:
            metadata["final_url"] = fetched.final_url
        if fetched.truncated:
            metadata["truncated"] = f"download cut at {len(fetched.body)} bytes"
        return page(url, text, title=title, metadata=metadata)

    async def aclose(self) -> None:
        await self._fetcher.aclose()


def readable(fetched: Fetched) -> tuple[str, str]:
    """(title, text) of a fetched document; CPU-bound, so callers run it in a thread."""
    kind = fetched.content_type
    _check_charset(fetched.charset)
    if kind in HTML_TYPES or (not kind and fetched.body.lstrip()[:1] == b"<"):
        return _from_html(fetched)
    if kind in TEXT_TYPES or kind.startswith("text/") or kind.endswith("+json") or kind.endswith("+xml"):
        return "", fetched.body.decode(fetched.charset or "utf-8", errors="replace")
    raise ProviderError(f"refused: {kind or 'untyped binary data'} is not a web page or text document")


def _check_charset(charset: str | None) -> None:
    if charset is None:
        return
    try:
        codecs.lookup(charset)
    except LookupError:
        raise ProviderError(f"the page declares an unknown character set {charset[:60]!r}") from None


def _from_html(fetched: Fetched) -> tuple[str, str]:
    import trafilatura  # heavy import (lxml, justext); kept out of gateway start-up

    html = fetched.body.decode(fetched.charset, errors="replace") if fetched.charset else fetched.body
    text = trafilatura.extract(
        html,
        url=fetched.final_url,
        output_format="markdown",
        include_tables=True,
        include_links=False,
        include_comments=False,
        favor_recall=True,
    )
    metadata = trafilatura.extract_metadata(html, default_url=fetched.final_url)
    title = (metadata.title if metadata else None) or ""
    if not text:
        raise ProviderError("no readable text found on the page")
    return title, text
