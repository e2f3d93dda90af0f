"""URL safety: which addresses are refused, and that redirects cannot sneak past the checks."""

from __future__ import annotations

import ipaddress

import pytest

from providers.urlsafety import BlockedUrlError, SafeFetcher, address_problem, check_url
from tests.fakes.pages import PageServer, page_server  # noqa: F401


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1", "a loopback address"),
        ("::1", "a loopback address"),
        ("10.1.2.3", "a private address"),
        ("172.16.0.1", "a private address"),
        ("192.168.1.1", "a private address"),
        ("fc00::1", "a private address"),
        ("169.254.10.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("100.64.0.1", "a carrier-grade NAT (100.64/10) address"),
        ("224.0.0.1", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("0.0.0.0", "an unspecified address"),
        ("::", "an unspecified address"),
        ("169.254.169.254", "a cloud metadata address"),
        ("fd00:ec2::254", "a cloud metadata address"),
        ("::ffff:10.0.0.1", "a private address in IPv6 form"),
        ("::ffff:169.254.169.254", "a cloud metadata address in IPv6 form"),
        ("2002:7f00:1::", "a loopback address in IPv6 form"),
        ("64:ff9b::7f00:1", "a loopback address in IPv6 form"),
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
    ],
)
def test_address_classification(address: str, problem: str | None):
    assert address_problem(ipaddress.ip_address(address)) == problem


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.org/file", "blocked: only http and https URLs can be fetched, not ftp"),
        ("file:///etc/passwd", "blocked: only http and https URLs can be fetched, not file"),
        ("http://127.0.0.1:8080/", "blocked: 127.0.0.1 is a loopback address"),
        ("http://[fd00:ec2::254]/latest", "blocked: fd00:ec2::254 is a cloud metadata address"),
        ("http:///nohost", "blocked: 'http:///nohost' has no host"),
    ],
)
def test_check_url_refuses_bad_schemes_and_non_public_ip_literals(url: str, message: str):
    with pytest.raises(BlockedUrlError) as info:
        check_url(url)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("host", "address", "problem"),
    [
        ("127.1", "127.0.0.1", "a loopback address"),
        ("127.0.1", "127.0.0.1", "a loopback address"),
        ("2130706433", "127.0.0.1", "a loopback address"),
        ("017700000001", "127.0.0.1", "a loopback address"),
        ("0177.0.0.1", "127.0.0.1", "a loopback address"),
        ("0x7f.1", "127.0.0.1", "a loopback address"),
        ("0x7f000001", "127.0.0.1", "a loopback address"),
        ("0x7F.0.0.1", "127.0.0.1", "a loopback address"),
        ("127.0.0.1.", "127.0.0.1", "a loopback address"),
        ("0", "0.0.0.0", "an unspecified address"),
        ("0x", "0.0.0.0", "an unspecified address"),
        ("10.1", "10.0.0.1", "a private address"),
        ("0300.0250.1.1", "192.168.1.1", "a private address"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254", "a cloud metadata address"),
        ("2852039166", "169.254.169.254", "a cloud metadata address"),
        ("0251.0376.1.1", "169.254.1.1", "a link-local address"),
        ("100.0x40.1", "100.64.0.1", "a carrier-grade NAT (100.64/10) address"),
    ],
)
def test_legacy_ipv4_spellings_are_read_as_the_address_the_c_resolver_sees_and_refused(
    host: str, address: str, problem: str
):
    with pytest.raises(BlockedUrlError) as info:
        check_url(f"http://{host}:8080/")
    assert str(info.value) == f"blocked: {host.lower()} is the IPv4 address {address}, {problem}"


@pytest.mark.parametrize("host", ["134744072", "8.8.8.8.", "0x08080808", "example.com", "256.1.1.1", "08", "1e3"])
def test_public_legacy_ipv4_spellings_and_names_pass_the_literal_check(host: str):
    assert check_url(f"http://{host}/").raw_host == host.lower()


def test_names_are_left_to_the_resolver_and_public_literals_pass():
    assert check_url("https://example.org/a").host == "example.org"
    assert check_url("http://8.8.8.8/").host == "8.8.8.8"


def only_this_loopback(address):
    """A policy for tests: the page server's 127.0.0.1 counts as public, everything else as usual."""
    return None if str(address) == "127.0.0.1" else address_problem(address)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("http://169.254.169.254/latest/meta-data/", "blocked: 169.254.169.254 is a cloud metadata address"),
        ("http://[::1]:{port}/article", "blocked: ::1 is a loopback address"),
        ("http://192.168.0.10/admin", "blocked: 192.168.0.10 is a private address"),
        ("gopher://127.0.0.1:{port}/", "blocked: only http and https URLs can be fetched, not gopher"),
    ],
)
async def test_every_redirect_hop_is_checked(page_server: PageServer, target: str, message: str):  # noqa: F811
    port = page_server.url.rsplit(":", 1)[1]
    fetcher = SafeFetcher(policy=only_this_loopback, timeout=2)
    try:
        with pytest.raises(BlockedUrlError) as info:
            await fetcher.fetch(f"{page_server.url}/redirect?to={target.format(port=port)}")
    finally:
        await fetcher.aclose()
    assert str(info.value) == message
    # Only the redirecting page was requested; the blocked target never was.
    assert len(page_server.requests) == 1 and page_server.requests[0].startswith("/redirect?to=")


async def test_a_name_resolving_to_loopback_is_blocked_before_connecting(page_server: PageServer):  # noqa: F811
    port = page_server.url.rsplit(":", 1)[1]
    fetcher = SafeFetcher(timeout=2)
    try:
        with pytest.raises(BlockedUrlError, match="localhost resolves to 127.0.0.1, a loopback address"):
            await fetcher.fetch(f"http://localhost:{port}/article")
    finally:
        await fetcher.aclose()
    assert page_server.requests == []


async def test_redirect_chains_are_capped(page_server: PageServer):  # noqa: F811
    fetcher = SafeFetcher(allow_private=True, max_redirects=2, timeout=2)
    url = page_server.url + "/redirect?to=/redirect%3Fto%3D/redirect%253Fto%253D/notes.txt"
    try:
        with pytest.raises(Exception, match="gave up after 2 redirects"):
            await fetcher.fetch(url)
    finally:
        await fetcher.aclose()


async def test_allow_private_lifts_the_address_rules_only(page_server: PageServer):  # noqa: F811
    fetcher = SafeFetcher(allow_private=True, timeout=2)
    try:
        fetched = await fetcher.fetch(page_server.url + "/notes.txt")
        assert fetched.body == b"plain notes\nline two"
        with pytest.raises(BlockedUrlError, match="only http and https"):
            await fetcher.fetch("file:///etc/passwd")
    finally:
        await fetcher.aclose()
