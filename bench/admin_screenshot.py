"""The admin page's screenshots for the README: docs/admin-sign-in.png, admin-dashboard.png, admin-new-key.png.

`python -m bench.admin_screenshot [--out DIR]` (run by hand, never in CI or pytest; the page's
behaviour is tested in tests/http/test_admin_page_browser.py). All on 127.0.0.1, started and
stopped here:

1. a fake upstream model (tests/fakes/upstream.py) behind two model routes, and a third route whose
   upstream refuses connections, so the status shows both answers;
2. the gateway in this process (`create_app` + `start_site`, its real web providers, SearXNG named
   as the search backend), over a SQLite store seeded through the store's own API with a few keys
   and 30 days of made-up usage (deterministic), so the chart has something to show;
3. Debian's Chromium under Playwright: a wrong key refused, the admin signed in, a key made.

Needs Debian's `chromium` (apt-get install chromium) and the test extra (playwright).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import tempfile
import time
from pathlib import Path

from aiohttp import web

from gateway.config.settings import load_settings
from gateway.http.app import create_app
from gateway.http.server import start_site
from gateway.keys.ring import DAY, utc_day
from gateway.store.keys import ApiKey, UsageDelta, UsageWrite, key_hash, new_key
from gateway.store.owners import DEFAULT_KEY, owner_of, profile_label
from gateway.store.sqlite.keys import SQLiteKeyStore
from tests.fakes.upstream import FakeUpstream

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
DAYS = 30
#: name -> (admin, rpm, max_concurrent, max_stored_bytes, models, web, requests a day)
KEYS = {
    "ops-admin": (True, None, None, None, None, True, 3),
    "alice": (False, 60, 2, 50_000_000, None, True, 40),
    "ci-bot": (False, 600, 8, None, ("fast",), False, 120),
    "research": (False, 30, 1, 200_000_000, ("fast", "large"), True, 15),
}


async def seed(db_path: Path) -> str:
    """Keys and usage in the profile's store; returns the admin key."""
    store = SQLiteKeyStore(db_path, profile_label(None), legacy_owner=owner_of(None, DEFAULT_KEY))
    await store.open()
    rng = random.Random(46)
    now = int(time.time())
    admin_key = ""
    try:
        for name, (admin, rpm, concurrent, stored, models, web_tools, _) in KEYS.items():
            key = new_key()
            admin_key = key if admin else admin_key
            await store.create(ApiKey(name=name, key_hash=key_hash(key), created_at=now - DAYS * DAY, rpm=rpm,
                                      max_concurrent=concurrent, max_stored_bytes=stored, admin=admin,
                                      models=models, web=web_tools))
        for back in range(DAYS - 1, -1, -1):
            day = utc_day(now - back * DAY)
            weekend = time.gmtime(now - back * DAY).tm_wday >= 5
            deltas = {}
            for name, (*_, per_day) in KEYS.items():
                requests = max(0, round(per_day * (0.3 if weekend else 1.0) * rng.uniform(0.6, 1.4)))
                searches = round(requests * rng.uniform(0.5, 1.5)) if KEYS[name][5] else 0
                deltas[name] = UsageDelta(
                    requests=requests, model_calls=requests * 2, input_tokens=requests * rng.randint(1800, 3200),
                    output_tokens=requests * rng.randint(250, 600), web_searches=searches,
                    web_extracts=searches // 2, last_used_at=now - back * DAY)
            await store.add_usage(UsageWrite(deltas=deltas, day=day))
    finally:
        await store.close()
    return admin_key


def free_refused_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # bound, never listening: connections to it are refused
    return sock


async def main(out: Path) -> None:
    from playwright.async_api import async_playwright

    upstream = FakeUpstream(models=["fake-model", "fake-large"])
    upstream_runner = web.AppRunner(upstream.app())
    await upstream_runner.setup()
    site = web.TCPSite(upstream_runner, "127.0.0.1", 0)
    await site.start()
    upstream_url = f"http://127.0.0.1:{upstream_runner.addresses[0][1]}/v1"
    refused = free_refused_port()
    home = Path(tempfile.mkdtemp(prefix="admin-shot-"))
    (home / "config.yaml").write_text(
        "models:\n"
        "  fast:\n    model: fake-model\n    fallbacks: [large]\n"
        "  large:\n    model: fake-large\n"
        f"  offsite:\n    model: gpt-4.1\n    base_url: http://127.0.0.1:{refused.getsockname()[1]}/v1\n")
    settings = load_settings(home=home, environ={
        "LLM_BASE_URL": upstream_url, "LLM_MODEL": "fake-model", "API_SERVER_MODEL_NAME": "fast",
        "WEB_SEARCH_BACKEND": "searxng", "SEARXNG_URL": "http://127.0.0.1:9"})
    admin = await seed(settings.db_path)
    runner = await start_site(create_app(settings), settings, "127.0.0.1", 0)
    origin = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 1280, "height": 860})
            await page.goto(f"{origin}/admin")
            await page.fill("#admin-key", "agk_this-is-not-a-key")
            await page.click("#sign-in button[type=submit]")
            await page.wait_for_selector("#sign-in-error:not([hidden])")
            await page.screenshot(path=str(out / "admin-sign-in.png"),
                                  clip={"x": 0, "y": 0, "width": 1280, "height": 460})
            await page.fill("#admin-key", admin)
            await page.click("#sign-in button[type=submit]")
            await page.wait_for_selector("#chart svg rect.bar-input")
            await page.wait_for_selector("#routes-table tbody tr")
            await page.screenshot(path=str(out / "admin-dashboard.png"), full_page=True)
            await page.click("#new-key-button")
            await page.fill("#key-form input[name=name]", "bob")
            await page.fill("#key-form input[name=rpm]", "30")
            await page.fill("#key-form input[name=max_concurrent]", "2")
            await page.fill("#key-form input[name=models]", "fast")
            await page.click("#key-form-submit")
            await page.wait_for_selector("#created:not([hidden])")
            await page.wait_for_selector("#keys-table tr[data-key=bob]")
            clip = await page.locator("#keys-section").bounding_box()
            await page.screenshot(path=str(out / "admin-new-key.png"), clip=clip)
            await browser.close()
    finally:
        await runner.cleanup()
        await upstream_runner.cleanup()
        refused.close()
    print(f"screenshots in {out}: admin-sign-in.png, admin-dashboard.png, admin-new-key.png")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "docs"), help="where the PNGs go (default: docs/)")
    asyncio.run(main(Path(parser.parse_args().out)))
