"""Secrets in URLs, masked for logs and `config` output.

A database URL carries its password in several places, and all of them are masked:
- the userinfo, `postgresql://user:PASSWORD@host/db`, whatever the password holds (a raw `@`, `/`,
  `?` or `#` included: the userinfo ends at the last `@`, not where a URL parser would stop);
- a query parameter whose name looks secret (`?password=`, `sslpassword=`, `api_key=`, `token=`...);
- a query parameter whose value carries a secret-looking `name=value` (`options=-c password=...`):
  its whole value is masked;
- the same `name=value` pairs outside any URL (libpq's `host=... password=...` form).

Masking is on the safe side: a string that is not a URL at all loses everything before its last `@`
too. `secrets_of(url)` lists the secret values themselves, so text that a driver wrote about the URL
(an error message quoting one parameter) can be scrubbed of them too (`scrub`).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"

#: Words that make a parameter's name (or a `name=value` inside a value) a secret.
_SECRET_NAME = re.compile(r"pass|pwd|secret|token|key|auth|credential|signature", re.IGNORECASE)
#: `name=value` pairs in free text, value quoted ('...' or "...") or up to a separator.
_PAIR = re.compile(r"""([\w.%-]+)(\s*=\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s&;,'"]*)""")


def _is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(unquote(name)))


def _mask_pairs(text: str) -> str:
    return _PAIR.sub(lambda m: m.group(1) + m.group(2) + MASK if _is_secret_name(m.group(1)) else m.group(0), text)


def _mask_query(query: str) -> str:
    params = []
    for param in query.split("&"):
        name, equals, value = param.partition("=")
        if equals and (_is_secret_name(name) or _mask_pairs(unquote(value)) != unquote(value)):
            value = MASK
        params.append(f"{name}{equals}{value}")
    return "&".join(params)


def redact_url(url: str) -> str:
    """The URL with every password and secret parameter masked (`postgresql://user:***@host/db?sslpassword=***`)."""
    scheme, sep, rest = url.partition("://")
    if not sep:  # not a URL: libpq's key=value form, or anything at all
        _userinfo, at_sign, tail = url.rpartition("@")
        return (MASK + at_sign if at_sign else "") + _mask_pairs(tail)
    at = rest.rfind("@")
    if at >= 0:
        user, colon, _password = rest[:at].partition(":")
        rest = f"{user}{colon}{MASK if colon else ''}@{rest[at + 1:]}"
        if not colon and _is_secret_name(user):  # a token given as the user name
            rest = f"{MASK}@{rest[len(user) + 1:]}"
    before, question, after = rest.partition("?")
    if question:
        query, hash_, fragment = after.partition("#")
        rest = f"{before}?{_mask_query(query)}{hash_}{fragment}"
    return f"{scheme}://{rest}"


def secrets_of(url: str) -> list[str]:
    """The secret values in `url` (as written and percent-decoded), longest first, for `scrub`."""
    found: set[str] = set()
    scheme, sep, rest = url.partition("://")
    if sep:
        at = rest.rfind("@")
        if at >= 0:
            _user, colon, password = rest[:at].partition(":")
            if colon:
                found.add(password)
        _before, question, after = rest.partition("?")
        for param in after.partition("#")[0].split("&") if question else ():
            name, equals, value = param.partition("=")
            if equals and (_is_secret_name(name) or _mask_pairs(unquote(value)) != unquote(value)):
                found.add(value)
                for inner in _PAIR.finditer(unquote(value)):
                    if _is_secret_name(inner.group(1)):
                        found.add(inner.group(3).strip("'\""))
    else:
        found.update(m.group(3).strip("'\"") for m in _PAIR.finditer(url) if _is_secret_name(m.group(1)))
    found |= {unquote(value) for value in found}
    return sorted((value for value in found if value), key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """`text` (a driver's message, say) with `url` shown masked and each of its secrets replaced by `***`."""
    if url:
        text = text.replace(url, redact_url(url))
    for secret in secrets_of(url):
        text = text.replace(secret, MASK)
    return text
