"""OpenAI's hosted web search options on the wire -> `WebSearchOptions`. Pure, no I/O.

Responses: a tool `{"type": "web_search" | "web_search_2025_08_26" | "web_search_preview" |
"web_search_preview_2025_03_11", "filters": {"allowed_domains": [...]}, "search_context_size",
"user_location": {"type": "approximate", "country", "region", "city", "timezone"}}` (`filters`
only on the non-preview types). Chat Completions: `web_search_options: {"search_context_size",
"user_location": {"type": "approximate", "approximate": {...}}}`.

Anything malformed is an `InvalidRequestError` naming the field (`tools[0].filters.allowed_domains[1]`).
"""

from __future__ import annotations

import re
from typing import Any

from gateway.agent.web.options import CONTEXT_SIZES, WebSearchOptions
from gateway.errors import InvalidRequestError, echo

WEB_SEARCH_TYPES = frozenset({"web_search", "web_search_2025_08_26"})
PREVIEW_TYPES = frozenset({"web_search_preview", "web_search_preview_2025_03_11"})
HOSTED_WEB_SEARCH = WEB_SEARCH_TYPES | PREVIEW_TYPES
#: OpenAI's own cap on `filters.allowed_domains`.
MAX_ALLOWED_DOMAINS = 100
MAX_LOCATION_CHARS = 200
LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
DOMAIN_RE = re.compile(rf"^(?=.{{1,253}}$){LABEL}(?:\.{LABEL})*$")
COUNTRY_RE = re.compile(r"^[A-Za-z]{2}$")
TIMEZONE_RE = re.compile(r"^[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*$")


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def _object(value: Any, param: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _bad(f"'{param}' must be an object.", param)
    return value


def domain(raw: Any, param: str) -> str:
    """One allowed domain, as OpenAI takes it ("arxiv.org"); a scheme or a trailing slash is forgiven."""
    if not isinstance(raw, str):
        raise _bad(f"'{param}' must be a domain name string.", param)
    text = raw.strip().lower()
    for scheme in ("https://", "http://"):
        if text.startswith(scheme):
            text = text[len(scheme):]
    text = text.rstrip("/").rstrip(".")
    if text.startswith("www."):
        text = text[4:]  # www.example.com allows example.com's other hosts too, as people mean it
    if not DOMAIN_RE.match(text):
        raise _bad(f"'{param}' must be a domain name such as 'example.com', got {echo(repr(raw))}.", param)
    return text


def allowed_domains(filters: Any, param: str) -> tuple[str, ...]:
    value = _object(filters, param)
    if value is None:
        return ()
    domains = value.get("allowed_domains")
    if domains is None:
        return ()
    where = f"{param}.allowed_domains"
    if not isinstance(domains, list):
        raise _bad(f"'{where}' must be a list of domain names.", where)
    if len(domains) > MAX_ALLOWED_DOMAINS:
        raise _bad(f"'{where}' may hold at most {MAX_ALLOWED_DOMAINS} domains.", where)
    found = [domain(d, f"{where}[{i}]") for i, d in enumerate(domains)]
    return tuple(dict.fromkeys(found))


def context_size(value: Any, param: str) -> str:
    if value is None:
        return "medium"
    if not isinstance(value, str) or value not in CONTEXT_SIZES:
        raise _bad(f"'{param}' must be low, medium or high.", param)
    return value


def _location_text(location: dict[str, Any], key: str, param: str) -> str | None:
    value = location.get(key)
    if value is None:
        return None
    where = f"{param}.{key}"
    if not isinstance(value, str) or len(value) > MAX_LOCATION_CHARS:
        raise _bad(f"'{where}' must be a string of at most {MAX_LOCATION_CHARS} characters.", where)
    return value.strip() or None


Place = tuple[str | None, str | None, str | None, str | None]
NOWHERE: Place = (None, None, None, None)


def location(value: dict[str, Any], param: str) -> Place:
    """(country, region, city, timezone) of an approximate location, checked."""
    country = _location_text(value, "country", param)
    if country is not None and not COUNTRY_RE.match(country):
        raise _bad(f"'{param}.country' must be a two-letter ISO country code such as 'NO'.", f"{param}.country")
    timezone = _location_text(value, "timezone", param)
    if timezone is not None and not TIMEZONE_RE.match(timezone):
        raise _bad(f"'{param}.timezone' must be an IANA time zone such as 'Europe/Oslo'.", f"{param}.timezone")
    region = _location_text(value, "region", param)
    return (country.upper() if country else None, region, _location_text(value, "city", param), timezone)


def _options(domains: tuple[str, ...], size: str, place: Place, force: bool = False) -> WebSearchOptions:
    country, region, city, timezone = place
    return WebSearchOptions(allowed_domains=domains, context_size=size, country=country, region=region,
                            city=city, timezone=timezone, force_search=force)


def _approximate_type(value: dict[str, Any], param: str) -> None:
    kind = value.get("type", "approximate")
    if kind != "approximate":
        raise _bad(f"'{param}.type' must be 'approximate'.", f"{param}.type")


def hosted_tool(tool: dict[str, Any], param: str) -> WebSearchOptions:
    """A Responses hosted web search tool (its `type` already known to be one of HOSTED_WEB_SEARCH)."""
    filters = tool.get("filters")
    if filters is not None and tool["type"] in PREVIEW_TYPES:
        raise _bad(f"'filters' is not supported on {tool['type']}; use the 'web_search' tool.", f"{param}.filters")
    domains = allowed_domains(filters, f"{param}.filters")
    size = context_size(tool.get("search_context_size"), f"{param}.search_context_size")
    place = NOWHERE
    user_location = _object(tool.get("user_location"), f"{param}.user_location")
    if user_location is not None:
        _approximate_type(user_location, f"{param}.user_location")
        place = location(user_location, f"{param}.user_location")
    return _options(domains, size, place)


def chat_options(value: Any) -> WebSearchOptions | None:
    """Chat Completions' `web_search_options`; None when the request has none."""
    options = _object(value, "web_search_options")
    if options is None:
        return None
    size = context_size(options.get("search_context_size"), "web_search_options.search_context_size")
    place = NOWHERE
    param = "web_search_options.user_location"
    user_location = _object(options.get("user_location"), param)
    if user_location is not None:
        _approximate_type(user_location, param)
        approximate = _object(user_location.get("approximate"), f"{param}.approximate")
        if approximate is not None:
            place = location(approximate, f"{param}.approximate")
    return _options((), size, place)
