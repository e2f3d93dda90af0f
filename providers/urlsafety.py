"""Safe fetching for every URL the gateway itself downloads (the model chooses these URLs).

Rules: http/https only; every address a host resolves to, for the first request and for every
redirect hop, must be public: not loopback, private, link-local, CGNAT (100.64/10), multicast,
reserved, unspecified, an IPv4-mapped / 6to4 / NAT64 / Teredo form of those, or a cloud metadata
address. `allow_private=True` lifts the address rules (not the scheme rule).

No DNS-rebinding gap: the session's connector resolves names through `CheckedResolver`, which
validates the addresses and hands only those to the connector, so the socket goes to the address
that was checked. IP literals skip resolvers in aiohttp, so `check_url` vets them before each hop.
Redirects are followed by hand (at most MAX_REDIRECTS) so that each hop is checked; bodies are
streamed and cut at a size cap; the whole fetch has a time cap.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urljoin

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from providers.web import ProviderError

MAX_REDIRECTS = 5
MAX_BYTES = 5 * 1024 * 1024
TOTAL_TIMEOUT = 20.0
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: Says what is wrong with an address ("a loopback address") or None when it may be fetched.
AddressPolicy = Callable[[IPAddress], str | None]

METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
CGNAT = ipaddress.ip_network("100.64.0.0/10")
NAT64 = ipaddress.ip_network("64:ff9b::/96")


class BlockedUrlError(ProviderError):
    """The URL may not be fetched; the message says why in one sentence."""


def address_problem(address: IPAddress) -> str | None:
    """What kind of non-public address this is ("a loopback address"), or None when it is public."""
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address.teredo is not None:
            embedded = address.teredo[1]
        if embedded is None and address in NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            inner = address_problem(embedded)
            return f"{inner} in IPv6 form" if inner else None
    checks = (
        (address.is_unspecified, "an unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
    )
    for matches, label in checks:
        if matches:
            return label
    if isinstance(address, ipaddress.IPv4Address) and address in CGNAT:
        return "a carrier-grade NAT (100.64/10) address"
    if address.is_private:
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "a non-public address"
    return None


def allow_all(address: IPAddress) -> str | None:
    return None


def _ip(text: str) -> IPAddress:
    return ipaddress.ip_address(text.split("%", 1)[0])  # drop an IPv6 zone id


def _legacy_part(text: str) -> int | None:
    if text[:2] in ("0x", "0X"):
        digits, base = text[2:], 16
    elif len(text) > 1 and text[0] == "0":
        digits, base = text[1:], 8
    else:
        digits, base = text, 10
    if digits == "" and base == 16:
        return 0  # "0x" alone: glibc reads it as zero
    try:
        return int(digits, base) if digits.isalnum() and digits.isascii() else None
    except ValueError:
        return None


def legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address the C resolver (inet_aton) reads in `host`, or None when it reads none.

    inet_aton takes 1 to 4 parts, each decimal, octal (leading 0) or hex (0x); the last part fills
    the remaining bytes: `127.1`, `2130706433`, `017700000001`, `0x7f.1` and `0` are all addresses
    to it (and so to getaddrinfo), though `ipaddress` calls them names. A trailing dot is tolerated.
    """
    parts = (host[:-1] if host.endswith(".") else host).split(".")
    if not 1 <= len(parts) <= 4 or any(part == "" for part in parts):
        return None
    values = [_legacy_part(part) for part in parts]
    if any(value is None for value in values):
        return None
    *leading, last = [value for value in values if value is not None]
    if any(value > 0xFF for value in leading) or last >= 1 << (8 * (4 - len(leading))):
        return None
    number = last
    for index, value in enumerate(leading):
        number |= value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def check_url(url: str, policy: AddressPolicy = address_problem) -> URL:
    """Parse and vet the scheme, and the host when it is an IP literal; return the parsed URL."""
    try:
        parsed = URL(url)
    except (ValueError, TypeError) as exc:
        raise BlockedUrlError(f"blocked: {url!r} is not a valid URL") from exc
    if parsed.scheme not in ("http", "https"):
        scheme = parsed.scheme or "none"
        raise BlockedUrlError(f"blocked: only http and https URLs can be fetched, not {scheme}")
    host = parsed.raw_host
    if not host:
        raise BlockedUrlError(f"blocked: {url!r} has no host")
    try:
        address = _ip(host)
    except ValueError:
        legacy = legacy_ipv4(host)
        if legacy is None:
            return parsed  # a name: CheckedResolver vets what it resolves to
        # Vetted here, whatever the HTTP library does with it: some aiohttp releases hand these
        # to the C resolver as names, which reads them as addresses without asking our resolver.
        problem = policy(legacy)
        if problem:
            raise BlockedUrlError(f"blocked: {host} is the IPv4 address {legacy}, {problem}") from None
        return parsed
    problem = policy(address)
    if problem:
        raise BlockedUrlError(f"blocked: {address} is {problem}")
    return parsed


class CheckedResolver(AbstractResolver):
    """Resolves like aiohttp's threaded resolver, then refuses the host if any address is non-public."""

    def __init__(self, policy: AddressPolicy = address_problem) -> None:
        self._policy = policy

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, family=family)
        except socket.gaierror as exc:
            raise BlockedUrlError(f"cannot resolve {host}: {exc.strerror or exc}") from exc
        results: list[ResolveResult] = []
        for fam, _type, proto, _canon, sockaddr in infos:
            address = str(sockaddr[0])
            problem = self._policy(_ip(address))
            if problem:
                raise BlockedUrlError(f"blocked: {host} resolves to {address}, {problem}")
            results.append(
                ResolveResult(
                    hostname=host, host=address, port=int(sockaddr[1]), family=fam, proto=proto,
                    flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
                )
            )
        if not results:
            raise BlockedUrlError(f"cannot resolve {host}")
        return results

    async def close(self) -> None:
        return None


@dataclass(frozen=True)
class Fetched:
    url: str  # as asked
    final_url: str  # after redirects
    status: int
    content_type: str  # lower-case media type without parameters, "" when absent
    charset: str | None
    body: bytes
    truncated: bool  # the body was cut at the size cap


def _media_type(response: aiohttp.ClientResponse) -> str:
    # aiohttp reports application/octet-stream when the header is missing; we want to know it was.
    if "Content-Type" not in response.headers:
        return ""
    return (response.content_type or "").lower()


class SafeFetcher:
    """One pooled session whose every connection goes to a checked public address."""

    def __init__(
        self,
        *,
        allow_private: bool = False,
        max_bytes: int = MAX_BYTES,
        timeout: float = TOTAL_TIMEOUT,
        max_redirects: int = MAX_REDIRECTS,
        user_agent: str = "agent-gateway (+web_extract)",
        policy: AddressPolicy | None = None,
    ) -> None:
        # `policy` replaces the built-in address rules (allow-lists, tests); allow_private lifts them.
        self.policy = allow_all if allow_private else (policy or address_problem)
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.max_redirects = max_redirects
        self.user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        # Created on first use: a ClientSession must be born inside the running loop.
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                resolver=CheckedResolver(self.policy), use_dns_cache=False, limit=20
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,  # a proxy would connect on our behalf to addresses we never checked
                headers={"User-Agent": self.user_agent},
            )
        return self._session

    async def fetch(self, url: str) -> Fetched:
        try:
            async with asyncio.timeout(self.timeout):
                return await self._fetch(url)
        except TimeoutError as exc:
            raise ProviderError(f"fetching {url} took longer than {self.timeout:g} s") from exc

    async def _fetch(self, url: str) -> Fetched:
        session = self._get_session()
        current = url
        for _hop in range(self.max_redirects + 1):
            target = check_url(current, self.policy)
            try:
                async with session.get(
                    target,
                    allow_redirects=False,
                    headers={"Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"},
                ) as response:
                    if response.status in REDIRECT_STATUSES and "Location" in response.headers:
                        current = urljoin(str(response.url), response.headers["Location"])
                        continue
                    body, truncated = await self._read_capped(response)
                    return Fetched(
                        url=url,
                        final_url=str(response.url),
                        status=response.status,
                        content_type=_media_type(response),
                        charset=response.charset,
                        body=body,
                        truncated=truncated,
                    )
            except aiohttp.ClientConnectorError as exc:
                cause = exc.os_error
                if isinstance(cause, BlockedUrlError):
                    raise cause from None
                raise ProviderError(f"cannot connect to {target.host}: {cause.strerror or cause}") from exc
            except aiohttp.ClientError as exc:
                raise ProviderError(f"fetching {current} failed: {exc or type(exc).__name__}") from exc
        raise ProviderError(f"fetching {url} gave up after {self.max_redirects} redirects")

    async def _read_capped(self, response: aiohttp.ClientResponse) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.content.iter_chunked(64 * 1024):
            room = self.max_bytes - size
            if len(chunk) > room:
                chunks.append(chunk[:room])
                return b"".join(chunks), True
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), False

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
