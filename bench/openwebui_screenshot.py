"""The gateway seen in a real Open WebUI: chats in headless Chromium, saved as screenshots.

`python -m bench.openwebui_screenshot [--scenario NAME] [--src DIR] [--out PNG] [--cache DIR]` (run by
hand, never in CI or pytest). All on 127.0.0.1, all started here and stopped here (try/finally,
bounded waits):

1. a scripted fake model that reasons, calls `web_search` and cites the hits by number
   (bench/fake_reasoner.py, which also answers as SearXNG does);
2. the gateway, `python -m gateway serve` from the checkout `--src` (default: this one), in its
   default setup (no AGENT_TOOL_PROGRESS: it recognises Open WebUI), the SearXNG backend at the fake
   and LLM_BASE_URL at the fake model;
3. Open WebUI, offline, with the gateway as its only OpenAI connection and no login;
4. bench/openwebui_chat.mjs under Node with playwright-core, driving Debian's Chromium: picks the
   model `agent-gateway`, asks "What do otters eat?", waits for the answer, opens the reasoning, the
   status line and the Sources, and writes the PNG. With `--second-model NAME` the gateway has two
   model routes (`models:`, both on the fake) and a second chat, in a fresh browser, picks NAME
   (its picture next to --out, named after it); the gateway's access lines say which route served.

Scenarios (`--scenario`): `search` (the question alone; docs/openwebui.png), `document` (a text file
attached, so Open WebUI sends its document template, and the gateway still searches:
docs/openwebui-document.png), `toggle` (Open WebUI's own web search toggle on, so it offers its
`search_web`/`fetch_url` tools beside the gateway's: one search all the same;
docs/openwebui-toggle.png), `native` (no gateway: Open WebUI's own web search, toggle on, with the
same fake model and search results, for comparison: docs/openwebui-native.png), or `all`.

What it needs is installed when missing, outside the project's venv: Open WebUI (and the CPU torch
wheel from this machine's pip find-links, first, so that pip does not fetch a CUDA build) in a venv
under `--cache`, playwright-core from npm under `--cache`, and Debian's `chromium` with apt-get.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
#: The release the issue was seen with; `--owui-version` picks another.
OWUI_VERSION = "0.12.4"
TORCH_CPU = "torch==2.13.0"  # the CPU wheel on this machine's pip find-links
PLAYWRIGHT = "playwright-core@1"
API_KEY = "sk-bench-openwebui"
PROMPT = "What do otters eat?"
DOC_PROMPT = "What do otters eat? Check the web for newer studies too."
DOC_TEXT = ("Field notes, otter enclosure, spring.\nThe two Eurasian otters were fed whole fish (roach, trout)\n"
            "twice a day, and took crayfish and frogs from the pond when they could.\n")
#: scenario -> (default picture, the question, attach a document, Open WebUI's web search toggle on)
#: The toggle first: on a later chat of the same Open WebUI the page was seen asking for no web
#: search despite `?web-search=true` (the run checks what was sent, see sent_as_meant).
SCENARIOS = {
    "toggle": ("openwebui-toggle.png", PROMPT, False, True),
    "search": ("openwebui.png", PROMPT, False, False),
    "document": ("openwebui-document.png", DOC_PROMPT, True, False),
}
NATIVE = ("openwebui-native.png", PROMPT, False, True)
#: The gateway's own settings a developer's shell may carry; the child must not inherit them.
GATEWAY_PREFIXES = ("API_SERVER_", "LLM_", "AGENT_", "WEB_", "PLUGINS_", "SEARXNG_")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(cmd: list[str], timeout: float, **kwargs: object) -> None:
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, timeout=timeout, **kwargs)  # type: ignore[call-overload]


# --- installing ---------------------------------------------------------------------------------

def ensure_chromium() -> None:
    if CHROMIUM.exists():
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    run([*sudo, "apt-get", "update"], timeout=600)
    run([*sudo, "apt-get", "install", "-y", "chromium"], timeout=1200,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def ensure_open_webui(cache: Path, version: str) -> Path:
    venv = cache / "owui-venv"
    exe = venv / "bin" / "open-webui"
    done = venv / f".installed-open-webui-{version}"  # written last: an interrupted install is redone
    if done.exists():
        return exe
    python = venv / "bin" / "python"
    if not python.exists():
        # The base interpreter, not the project's venv (a venv made from a venv still works, but
        # this says what is meant).
        run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)], timeout=300)
    pip = [str(python), "-m", "pip", "install", "-qq"]  # -qq: not a warning per package from find-links
    run([*pip, TORCH_CPU], timeout=1800)  # first: open-webui's own torch requirement is then met
    run([*pip, f"open-webui=={version}"], timeout=3600)
    done.write_text(f"{TORCH_CPU} open-webui=={version}\n")
    return exe


def ensure_playwright(cache: Path) -> Path:
    """A folder holding node_modules/playwright-core and the chat script (ES modules resolve
    imports from the script's own folder, so the script is copied next to node_modules)."""
    node_dir = cache / "node"
    if not (node_dir / "node_modules" / "playwright-core").exists():
        node_dir.mkdir(parents=True, exist_ok=True)
        if not (node_dir / "package.json").exists():
            (node_dir / "package.json").write_text('{"name": "agent-gateway-bench-node", "private": true}\n')
        # playwright-core has no browser download step; the browser is Debian's.
        run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(node_dir), PLAYWRIGHT], timeout=600)
    shutil.copy2(REPO / "bench" / "openwebui_chat.mjs", node_dir / "openwebui_chat.mjs")
    return node_dir / "openwebui_chat.mjs"


# --- processes ----------------------------------------------------------------------------------

@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    sink: IO[bytes] = field(repr=False)

    def stop(self, grace: float = 10) -> None:
        """SIGTERM to its whole process group (Open WebUI and Chromium start children), then
        SIGKILL after `grace` seconds."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                log(f"{self.name} did not stop in {grace:.0f} s: SIGKILL")
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
            except ProcessLookupError:
                pass
        else:  # the leader is gone; its group may not be
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.sink.close()

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def start(name: str, cmd: list[str], env: dict[str, str], work: Path, cwd: Path | None = None) -> Child:
    log_path = work / f"{name}.log"
    sink = log_path.open("wb")
    log(f"start {name}: {' '.join(cmd)}  (log {log_path})")
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=sink,
                            stderr=subprocess.STDOUT, start_new_session=True)
    return Child(name, proc, log_path, sink)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(child: Child, url: str, timeout: float, headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.proc.poll() is not None:
            raise RuntimeError(f"{child.name} exited ({child.proc.returncode}):\n{child.tail()}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    raise RuntimeError(f"{child.name} not answering {url} after {timeout:.0f} s:\n{child.tail()}")


def describe(src: Path) -> str:
    """The checkout's commit, and whether its work tree has changes (the picture shows those too)."""
    try:
        head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return "not a git checkout"
    return f"commit {head}" + (" with uncommitted changes" if dirty else "")


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(GATEWAY_PREFIXES)}
    env.pop("VIRTUAL_ENV", None)
    env.update(extra)
    return env


def open_webui_env(gateway_url: str, data_dir: Path, model: str, search_url: str) -> dict[str, str]:
    """Open WebUI offline: the gateway as its one OpenAI connection, no login, no model downloads,
    no side tasks (titles, tags, follow-ups would each be a second agent run through the gateway).
    Its own web search is available (SearXNG at the fake) for the toggle; a document goes to the
    model whole (no embedding model offline)."""
    return clean_env({
        "ENABLE_WEB_SEARCH": "true", "WEB_SEARCH_ENGINE": "searxng",
        "SEARXNG_QUERY_URL": f"{search_url}/search?q=<query>", "BYPASS_WEB_SEARCH_WEB_LOADER": "true",
        "BYPASS_EMBEDDING_AND_RETRIEVAL": "true",
        "DATA_DIR": str(data_dir), "WEBUI_AUTH": "false",
        "WEBUI_SECRET_KEY": "bench-only-not-a-secret-0123456789abcdef",
        "OFFLINE_MODE": "true", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "ENABLE_OLLAMA_API": "false", "ENABLE_OPENAI_API": "true",
        "OPENAI_API_BASE_URL": f"{gateway_url}/v1", "OPENAI_API_KEY": API_KEY, "DEFAULT_MODELS": model,
        # No embedding model at all: it would be loaded (or, offline, looked for and not found) at start.
        "RAG_EMBEDDING_MODEL": "", "RAG_EMBEDDING_MODEL_AUTO_UPDATE": "false",
        "RAG_RERANKING_MODEL_AUTO_UPDATE": "false",
        "WHISPER_MODEL_AUTO_UPDATE": "false", "AUDIO_STT_ENGINE": "webapi", "AUDIO_TTS_ENGINE": "",
        "ENABLE_TITLE_GENERATION": "false", "ENABLE_TAGS_GENERATION": "false",
        "ENABLE_FOLLOW_UP_GENERATION": "false", "ENABLE_AUTOCOMPLETE_GENERATION": "false",
        "ENABLE_SEARCH_QUERY_GENERATION": "false", "ENABLE_RETRIEVAL_QUERY_GENERATION": "false",
        "ENABLE_VERSION_UPDATE_CHECK": "false", "ENABLE_COMMUNITY_SHARING": "false",
        "ENABLE_EVALUATION_ARENA_MODELS": "false", "SHOW_ADMIN_DETAILS": "false",
        "SCARF_NO_ANALYTICS": "true", "DO_NOT_TRACK": "true", "ANONYMIZED_TELEMETRY": "false",
        "GLOBAL_LOG_LEVEL": "INFO",
    })


# --- the run ------------------------------------------------------------------------------------

def screenshot(args: argparse.Namespace, work: Path, children: list[Child]) -> int:
    """Start everything once, then run each scenario's chat; 0 when every picture was written."""
    cache = Path(args.cache).expanduser()
    cache.mkdir(parents=True, exist_ok=True)
    ensure_chromium()
    owui = ensure_open_webui(cache, args.owui_version)
    script = ensure_playwright(cache)
    src = Path(args.src).resolve()

    fake_port, gw_port, owui_port = free_port(), free_port(), free_port()
    fake = start("fake-model", [sys.executable, "-m", "bench.fake_reasoner", "--port", str(fake_port)],
                 clean_env({"PYTHONPATH": str(REPO)}), work, cwd=REPO)
    children.append(fake)
    fake_url = f"http://127.0.0.1:{fake_port}"
    wait_http(fake, f"{fake_url}/v1/models", 30)

    home = work / "gateway-home"
    home.mkdir()
    if args.second_model:  # two model routes to the same fake: two entries in Open WebUI's menu
        (home / "config.yaml").write_text(
            f"models:\n  {args.model}:\n    model: fake-reasoner\n  {args.second_model}:\n    model: fake-reasoner\n")
    gateway = start("gateway", [sys.executable, "-m", "gateway", "serve", "--port", str(gw_port)], clean_env({
        "PYTHONPATH": str(src), "AGENT_GATEWAY_HOME": str(home), "API_SERVER_HOST": "127.0.0.1",
        "API_SERVER_KEY": API_KEY, "API_SERVER_MODEL_NAME": args.model,
        "LLM_BASE_URL": f"{fake_url}/v1", "LLM_MODEL": "fake-reasoner",
        "WEB_SEARCH_BACKEND": "searxng", "SEARXNG_URL": fake_url,
        **({"AGENT_TOOL_PROGRESS": args.progress} if args.progress else {}),
    }), work, cwd=src)
    children.append(gateway)
    gw_url = f"http://127.0.0.1:{gw_port}"
    wait_http(gateway, f"{gw_url}/v1/models", 60, {"Authorization": f"Bearer {API_KEY}"})
    log(f"gateway from {src} ({describe(src)}) at {gw_url}")

    if args.scenario == "native":  # Open WebUI straight to the fake model: no gateway in the way
        gw_url, args.model = fake_url, "fake-reasoner"
    # Open WebUI talks to the gateway through a recorder: requests.jsonl says what it sent
    proxy_port = free_port()
    proxy = start("recorder", [sys.executable, "-m", "bench.recording_proxy", "--port", str(proxy_port),
                               "--target", gw_url, "--out", str(work / "requests.jsonl")],
                  clean_env({"PYTHONPATH": str(REPO)}), work, cwd=REPO)
    children.append(proxy)
    gw_url = f"http://127.0.0.1:{proxy_port}"
    wait_http(proxy, f"{gw_url}/v1/models", 30, {"Authorization": f"Bearer {API_KEY}"})

    data_dir = work / "owui-data"
    data_dir.mkdir()
    webui = start("open-webui", [str(owui), "serve", "--host", "127.0.0.1", "--port", str(owui_port)],
                  open_webui_env(gw_url, data_dir, args.model, fake_url), work, cwd=work)
    children.append(webui)
    owui_url = f"http://127.0.0.1:{owui_port}"
    wait_http(webui, f"{owui_url}/health", args.start_timeout)
    log(f"Open WebUI at {owui_url}")

    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    failed = 0
    for name in names:
        picture, prompt, attach, toggle = NATIVE if name == "native" else SCENARIOS[name]
        out = Path(args.out).resolve() if args.out and len(names) == 1 else REPO / "docs" / picture
        failed += chat(args, work, children, script, owui_url, name, out, prompt, attach, toggle)
        for child in (gateway, webui):
            if child.proc.poll() is not None:
                log(f"{child.name} exited early ({child.proc.returncode}):\n{child.tail()}")
                return 1
    if args.second_model:  # the search chat again on the second model route, in a picture of its own
        picture, prompt, attach, toggle = SCENARIOS["search"]
        first = Path(args.out).resolve() if args.out else REPO / "docs" / picture
        args.model, second = args.second_model, first.with_name(f"{first.stem}-{args.second_model}{first.suffix}")
        failed += chat(args, work, children, script, owui_url, "second", second, prompt, attach, toggle)
        served = [line for line in gateway.log_path.read_text(errors="replace").splitlines() if " model=" in line]
        log("gateway access lines with a model route:\n" + "\n".join(served[-12:]))
    recorded = work / "requests.jsonl"
    if recorded.exists():
        for line in recorded.read_text().splitlines():
            entry = json.loads(line)
            if entry["path"].endswith("/chat/completions"):
                log(f"Open WebUI sent: User-Agent {entry['headers'].get('User-Agent')!r}, stream {entry['stream']}, "
                    f"{len(entry['tools'])} tools {entry['tools'][:6]}..., {entry['last_user'][:70]!r}")
    return 1 if failed else 0


def sent_as_meant(recorded: Path, attach: bool, toggle: bool) -> bool:
    """Whether Open WebUI's last chat request was the scenario's: its document template with a
    document attached, its own `search_web` offered with the toggle on (a page can come up without
    the toggle taking: then the picture would not show what it says)."""
    chats = [json.loads(line) for line in recorded.read_text().splitlines()] if recorded.exists() else []
    chats = [c for c in chats if c["path"].endswith("/chat/completions") and c.get("stream")]
    if not chats:
        log("no chat request was recorded")
        return False
    last = chats[-1]
    if attach and not last["last_user"].startswith("### Task:"):
        log("the document did not reach the request: Open WebUI sent the question alone")
        return False
    if toggle and "search_web" not in last["tools"]:
        log("the web search toggle did not take: Open WebUI offered no search_web")
        return False
    return True


def chat(args: argparse.Namespace, work: Path, children: list[Child], script: Path, owui_url: str, name: str,
         out: Path, prompt: str, attach: bool, toggle: bool) -> int:
    """One scenario's chat in a fresh browser profile; the PNG goes to `out` once the answer finished."""
    profile = work / f"chromium-profile-{name}"
    profile.mkdir()
    extra: dict[str, str] = {}
    if attach:
        document = work / "otter-notes.txt"
        document.write_text(DOC_TEXT)
        extra["OWUI_FILE"] = str(document)
    if toggle:
        extra["OWUI_PARAMS"] = "web-search=true"
    browser = start(f"chat-{name}", ["node", str(script)], {
        **os.environ, "OWUI_URL": owui_url, "OWUI_MODEL": args.model, "OWUI_PROMPT": prompt,
        "OWUI_OUT": str(work / f"{name}.png"), "OWUI_PROFILE": str(profile), "OWUI_DIAG": str(work / f"page-{name}"),
        "OWUI_TIMEOUT": str(args.chat_timeout), "CHROMIUM": str(CHROMIUM), **extra,
    }, work, cwd=script.parent)
    children.append(browser)
    try:
        code = browser.proc.wait(args.chat_timeout + 180)
    except subprocess.TimeoutExpired:
        log("the browser run took too long")
        code = 1
    log(f"browser run ({name}):\n" + browser.tail(20))
    if code == 0 and not sent_as_meant(work / "requests.jsonl", attach, toggle):
        code = 1
    if code == 0:  # only a finished chat replaces the picture; a failed run's stays in the temp folder
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(work / f"{name}.png", out)
        log(f"screenshot written: {out}")
    return code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(REPO), help="the gateway checkout to run (default: this one)")
    parser.add_argument("--scenario", default="search", choices=[*SCENARIOS, "native", "all"], help="which chat(s)")
    parser.add_argument("--out", default=None, help="the PNG to write (one scenario; default docs/<scenario's>)")
    parser.add_argument("--cache", default="~/.cache/agent-gateway-bench",
                        help="where Open WebUI's venv and playwright-core are installed")
    parser.add_argument("--owui-version", default=OWUI_VERSION, help="Open WebUI release to install")
    parser.add_argument("--model", default="agent-gateway", help="the gateway's model name, picked in the UI")
    parser.add_argument("--second-model", default="",
                        help="a second model route (both on the fake): two models in the menu, a chat on each")
    parser.add_argument("--progress", default=None,
                        help="AGENT_TOOL_PROGRESS for the gateway (default: unset, the gateway's default)")
    parser.add_argument("--start-timeout", type=float, default=420, help="seconds for Open WebUI to start")
    parser.add_argument("--chat-timeout", type=float, default=180, help="seconds for the answer to finish")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (logs, page.html, page.txt)")
    args = parser.parse_args()

    # SIGTERM / SIGHUP from outside run the same cleanup as Ctrl-C.
    def interrupted(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)

    work = Path(tempfile.mkdtemp(prefix="owui-shot-"))
    children: list[Child] = []
    code = 1
    try:
        code = screenshot(args, work, children)
    except (RuntimeError, subprocess.SubprocessError, OSError) as err:
        log(f"failed: {err}")
    except KeyboardInterrupt:
        log("interrupted")
    finally:
        for child in reversed(children):
            child.stop()
        log(f"stopped {len(children)} processes")
        if args.keep or code != 0:
            log(f"logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
