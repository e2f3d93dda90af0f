"""The admin page in a real browser: Debian's Chromium, headless, driven by Playwright (the Python
package; it never downloads a browser here, it starts /usr/bin/chromium), against an in-process
gateway on 127.0.0.1 with keys made by the real CLI.

What a user does: a wrong key and a plain key are refused with a message; the admin key signs in;
model routes and web providers show; a key is made (shown once, copied), listed, changed, revoked
(and then refused by the API); the usage chart draws bars for the days that had requests; signing
out forgets the key. Throughout, the page loads nothing from another origin and breaks no CSP rule.

The README's screenshots are made by bench/admin_screenshot.py, with more keys and days of usage.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import async_playwright, expect

from gateway.config.options import DEFAULT_MODEL_NAME
from tests.conftest import API_KEY
from tests.fakes.upstream import FakeUpstream
from tests.keys.test_keys_isolation import bearer, make_key

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Playwright's waits (milliseconds): generous, the machine is shared; a pass is usually far quicker.
#: `expect` rather than wait_for_function: a string predicate is eval'd in the page, which its CSP
#: forbids, as it should.
WAIT_MS = 20_000


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """Debian's Chromium under Playwright. Skipped when it is missing, except in CI, where .ci/run
    installs it and a missing one is a failure."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    async with async_playwright() as playwright:
        # --no-sandbox: the tests run as root in CI, where Chromium's sandbox refuses to start
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            await launched.close()


class PageWatch:
    """Every request the page makes, and every console error or uncaught exception it shows."""

    def __init__(self, page: Any) -> None:
        self.requests: list[str] = []
        self.errors: list[str] = []
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        page.on("console", self._console)

    def _console(self, message: Any) -> None:
        # a 401/403/404 the page asked for is logged by Chromium as "Failed to load resource"; a
        # CSP violation ("Refused to ...") or a script's error is what counts
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.errors.append(message.text)

    def foreign(self, origin: str) -> list[str]:
        return [url for url in self.requests if not url.startswith(origin + "/")]


async def wait_for_usage(client: Any, admin: str, key: str, requests: int) -> None:
    """The ring writes usage in batches: wait (bounded) until the day's row has the requests."""
    for _ in range(100):
        reply = await client.get(f"/v1/admin/usage?key={key}&days=7", headers=bearer(admin))
        rows = (await reply.json())["data"]
        if sum(row["requests"] for row in rows) >= requests:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"no usage recorded for {key}: {rows}")


async def test_admin_signs_in_manages_keys_and_sees_usage_and_status(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream, browser: Any) -> None:
    admin = await make_key(tmp_path, "boss", "--admin")
    alice = await make_key(tmp_path, "alice", "--rpm", "60")
    client = await make_client(tools=[], api_key=API_KEY)
    for _ in range(3):
        reply = await client.post("/v1/chat/completions", headers=bearer(alice),
                                  json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert reply.status == 200
    origin = str(client.make_url("")).rstrip("/")

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)
    page = await context.new_page()
    page.set_default_timeout(WAIT_MS)
    watch = PageWatch(page)
    await page.goto(f"{origin}/admin")

    # a wrong key, then a key that is not an admin's: refused, with a message, still signed out
    await page.fill("#admin-key", "agk_not-a-key")
    await page.click("#sign-in button[type=submit]")
    await page.wait_for_selector("#sign-in-error:not([hidden])")
    assert "not accepted" in await page.text_content("#sign-in-error")
    await page.fill("#admin-key", alice)
    await page.click("#sign-in button[type=submit]")
    await expect(page.locator("#sign-in-error")).to_contain_text("not an admin", timeout=WAIT_MS)
    assert await page.is_hidden("#dashboard")
    # that refused try was alice's fourth request: her figures are final once it is written
    await wait_for_usage(client, admin, "alice", 4)

    # the admin key: the dashboard, with the routes, the keys and a chart with bars
    await page.fill("#admin-key", admin)
    await page.click("#sign-in button[type=submit]")
    await page.wait_for_selector("#dashboard:not([hidden])")
    await page.wait_for_selector("#keys-table tr[data-key=alice]")
    await page.wait_for_selector("#chart svg rect.bar-input")
    assert await page.evaluate(f"sessionStorage.getItem('agent-gateway-admin-key') === {admin!r}")
    route_row = await page.text_content("#routes-table tbody tr")
    assert "fake-model" in route_row and "yes" in route_row
    assert "4 requests" in await page.text_content("#keys-table tr[data-key=alice]")
    assert "60 rpm" in await page.text_content("#keys-table tr[data-key=alice]")
    bars = page.locator("#chart svg g.bars rect.bar-input")  # the legend has one of each class too
    assert await bars.count() == 1  # one day with tokens in the last 30: today's, the last of the axis
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert await bars.get_attribute("data-day") == today
    assert float(await bars.get_attribute("height")) > 10
    assert "requests" not in await page.text_content("#usage-total")  # the tokens view first
    # the admin's own calls count too (all keys); alice's alone are her three chats and her try
    await page.select_option("#usage-key", "alice")
    await page.select_option("#usage-metric", "requests")
    await expect(page.locator("#usage-total")).to_contain_text("Key alice, last 30 days: 4 requests",
                                                                timeout=WAIT_MS)
    await page.select_option("#usage-metric", "tokens")
    await page.wait_for_selector("#chart svg g.bars rect.bar-output")

    # a new key: shown once, copied, listed, and it works
    await page.click("#new-key-button")
    await page.fill("#key-form input[name=name]", "carol")
    await page.fill("#key-form input[name=rpm]", "10")
    await page.fill("#key-form input[name=models]", DEFAULT_MODEL_NAME)
    await page.click("#key-form-submit")
    await page.wait_for_selector("#created:not([hidden])")
    carol = (await page.text_content("#created-key")).strip()
    assert carol.startswith("agk_")
    await page.wait_for_selector("#keys-table tr[data-key=carol]")
    assert "10 rpm" in await page.text_content("#keys-table tr[data-key=carol]")
    await page.click("#copy-key")
    await expect(page.locator("#copied")).to_contain_text("Copied", timeout=WAIT_MS)
    assert await page.evaluate("navigator.clipboard.readText()") == carol
    await page.click("#dismiss-key")
    assert await page.text_content("#created-key") == ""
    models = await client.get("/v1/models", headers=bearer(carol))
    assert models.status == 200  # its one route, and that route's research id
    listed = [m["id"] for m in (await models.json())["data"]]
    assert listed == [DEFAULT_MODEL_NAME, f"{DEFAULT_MODEL_NAME}-deep-research"]

    # a change in place: alice's rpm
    await page.click("#keys-table tr[data-key=alice] button[data-action=edit]")
    assert await page.input_value("#key-form input[name=rpm]") == "60"
    await page.fill("#key-form input[name=rpm]", "120")
    await page.click("#key-form-submit")
    await expect(page.locator("#keys-table tr[data-key=alice]")).to_contain_text("120 rpm", timeout=WAIT_MS)

    # revoking asks twice; the key is refused at once
    revoke = "#keys-table tr[data-key=carol] button[data-action=revoke]"
    await page.click(revoke)
    assert "sure" in await page.text_content(revoke)
    await page.click(revoke)
    await expect(page.locator("#keys-table tr[data-key=carol]")).to_contain_text("revoked", timeout=WAIT_MS)
    assert (await client.get("/v1/models", headers=bearer(carol))).status == 401

    # signing out forgets the key
    await page.click("#sign-out")
    await page.wait_for_selector("#sign-in-view:not([hidden])")
    assert await page.evaluate("sessionStorage.getItem('agent-gateway-admin-key')") is None

    assert watch.errors == []  # a CSP violation is a console error
    assert watch.foreign(origin) == []
    await context.close()


async def test_a_stored_session_survives_a_reload_but_not_a_new_tab(
        tmp_path: Path, make_client: Callable[..., Any], browser: Any) -> None:
    admin = await make_key(tmp_path, "boss", "--admin")
    client = await make_client(tools=[], api_key=API_KEY)
    origin = str(client.make_url("")).rstrip("/")
    context = await browser.new_context()
    page = await context.new_page()
    page.set_default_timeout(WAIT_MS)
    watch = PageWatch(page)
    await page.goto(f"{origin}/admin")
    await page.fill("#admin-key", admin)
    await page.click("#sign-in button[type=submit]")
    await page.wait_for_selector("#dashboard:not([hidden])")
    await page.reload()
    await page.wait_for_selector("#dashboard:not([hidden])")
    other = await context.new_page()
    await other.goto(f"{origin}/admin")
    await other.wait_for_selector("#sign-in-view:not([hidden])")
    assert await other.is_hidden("#dashboard")
    assert watch.errors == [] and watch.foreign(origin) == []
    await context.close()
