"""`fetch` is available only when its extractor imports; `tools` and `config check` say why not.

The broken install is real: a directory on PYTHONPATH holds a `trafilatura` module that raises
ImportError at import, as trafilatura 2 did on lxml 6 without lxml_html_clean.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.gateway_process import REPO, gateway_env, run_cli, start_gateway

BROKEN = "raise ImportError('lxml.html.clean module is now a separate project lxml_html_clean.')\n"


def broken_extractor_env(tmp_path: Path) -> dict[str, str]:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "trafilatura.py").write_text(BROKEN)
    env = gateway_env(tmp_path / "home")
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), str(REPO)])
    return env


def fetch_line(output: str) -> str:
    return next(line for line in output.splitlines() if line.strip().startswith("fetch"))


async def test_tools_says_fetch_is_unavailable_with_the_import_error_when_trafilatura_cannot_import(tmp_path):
    code, out, err = await run_cli("tools", env=broken_extractor_env(tmp_path))

    assert code == 0, err
    line = fetch_line(out)
    assert "unavailable: its HTML extractor trafilatura cannot be imported" in line
    assert "ImportError: lxml.html.clean module is now a separate project lxml_html_clean." in line
    assert "  extract: fetch" not in out.splitlines()


async def test_config_check_warns_that_fetch_cannot_run_when_trafilatura_cannot_import(tmp_path):
    env = broken_extractor_env(tmp_path)
    env["WEB_EXTRACT_BACKEND"] = "fetch"
    code, out, err = await run_cli("config", "check", env=env)

    assert "web extract: none" in out
    assert "fetch: its HTML extractor trafilatura cannot be imported (ImportError: lxml.html.clean" in err + out
    assert "Traceback" not in err


async def test_config_check_warns_that_the_built_in_reader_cannot_run_even_when_another_provider_extracts(tmp_path):
    code, out, err = await run_cli("config", "check", env=broken_extractor_env(tmp_path))

    assert "web extract: keenable" in out  # the automatic choice moved on
    assert ("warning: the built-in page reader fetch cannot run: its HTML extractor trafilatura cannot be "
            "imported (ImportError: lxml.html.clean module is now a separate project lxml_html_clean.)") in out
    assert "Traceback" not in err


async def test_tools_says_fetch_is_available_on_a_complete_install(tmp_path):
    code, out, err = await run_cli("tools", env=gateway_env(tmp_path))

    assert code == 0, err
    assert fetch_line(out).split()[1:5] == ["-", "yes", "-", "available"]


async def test_a_started_gateway_holds_no_html_extractor_in_memory_until_it_reads_a_page(tmp_path):
    # The start-up report still checks that the extractor imports, in a child interpreter
    # (tests above): the gateway's own memory has no lxml mapped.
    gateway = await start_gateway(env=gateway_env(tmp_path / "home"))
    try:
        maps = Path(f"/proc/{gateway.pid}/maps").read_text()
    finally:
        await gateway.stop()
    assert "lxml" not in maps
