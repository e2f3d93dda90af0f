"""Deep research, question by question: time, tokens, searches, pages read and citation validity.

    python -m bench.research_eval QUESTIONS.jsonl --gateway http://127.0.0.1:8642 --api-key sk-...
    python -m bench.research_eval QUESTIONS.jsonl --upstream http://127.0.0.1:8080/v1 --upstream-model qwen3 \
        --env SEARXNG_URL=http://127.0.0.1:8888
    python -m bench.research_eval --fake          # the tests' corpus and scripted model (a smoke run)

A question file is JSON Lines, one question an object: `{"id": "q1", "question": "...", "expect":
["words the report should hold"]}` (`id` and `expect` optional). bench/research_questions.jsonl is a
sample. Each question is one Responses API run of the research model (`<model>-deep-research`; the
first such id /v1/models lists unless `--model`), `background: true` and polled (what the README
recommends), one at a time unless `--concurrency`. Per question it reports:

- `time`: create to the ended response; `status` (and the incomplete reason);
- `tokens`: the response's `usage` (input / output);
- `searches`, `pages`: its `web_search_call` items with action `search` and `open_page`;
- citations: `kept` (distinct `url_citation` URLs of the report), of which `read` (a page the run
  opened), `seen` (only a search result's source) and `unsupported` (neither: should be 0);
  `removed` (the gateway's `agent_gateway_research_citations_removed_total` before and after the
  run, one question at a time only; `-` when /metrics has no such series);
- `found`: how many of `expect` the report holds (quality, for comparing settings and models).

`--upstream URL` starts a gateway of this checkout on that model server (a temporary home; `--env
K=V` for its web settings, e.g. SEARXNG_URL); `--fake` starts the tests' research corpus
(tests/fakes/research_web.py) and scripted model (tests/fakes/research_model.py) and a gateway on
them. `--json FILE` writes every record. Loopback and the hosts you name only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ENDED = {"completed", "failed", "incomplete", "cancelled"}
REMOVED_METRIC = "agent_gateway_research_citations_removed_total"
SAMPLE = Path(__file__).with_name("research_questions.jsonl")
FAKE_KEY = "sk-research-eval-local"


@dataclass
class Question:
    id: str
    question: str
    expect: list[str] = field(default_factory=list)


@dataclass
class Result:
    id: str
    status: str
    seconds: float
    input_tokens: int = 0
    output_tokens: int = 0
    searches: int = 0
    pages: int = 0
    kept: int = 0
    read: int = 0
    seen: int = 0
    unsupported: list[str] = field(default_factory=list)
    removed: int | None = None
    found: int = 0
    expected: int = 0
    reason: str | None = None
    report_chars: int = 0


def load_questions(path: Path) -> list[Question]:
    questions = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        entry = json.loads(line)
        questions.append(Question(str(entry.get("id") or f"q{n}"), entry["question"], list(entry.get("expect") or [])))
    return questions


def score(question: Question, response: dict[str, Any], seconds: float) -> Result:
    """What one ended response says about its run (pure: the tests drive it with plain data)."""
    result = Result(question.id, str(response.get("status")), round(seconds, 2), expected=len(question.expect))
    usage = response.get("usage") or {}
    result.input_tokens = int(usage.get("input_tokens") or 0)
    result.output_tokens = int(usage.get("output_tokens") or 0)
    result.reason = (response.get("incomplete_details") or {}).get("reason") or (
        (response.get("error") or {}).get("message"))
    opened: set[str] = set()
    sources: set[str] = set()
    cited: set[str] = set()
    report = []
    for item in response.get("output") or []:
        if item.get("type") == "web_search_call":
            action = item.get("action") or {}
            if action.get("type") == "search":
                result.searches += 1
                sources.update(s["url"] for s in action.get("sources") or [] if s.get("url"))
            elif action.get("type") == "open_page":
                result.pages += 1
                if action.get("url"):
                    opened.add(action["url"])
        elif item.get("type") == "message":
            for part in item.get("content") or []:
                report.append(part.get("text") or "")
                cited.update(a["url"] for a in part.get("annotations") or []
                             if a.get("type") == "url_citation" and a.get("url"))
    text = "\n".join(report)
    result.report_chars = len(text)
    result.kept = len(cited)
    result.read = len(cited & opened)
    result.seen = len((cited - opened) & sources)
    result.unsupported = sorted(cited - opened - sources)
    result.found = sum(1 for words in question.expect if words.lower() in text.lower())
    return result


def removed_total(metrics_text: str) -> float | None:
    """The sum of the removed-citations counter's series, None when /metrics has none."""
    values = [float(line.rsplit(" ", 1)[1]) for line in metrics_text.splitlines()
              if line.startswith(REMOVED_METRIC) and not line.startswith("#")]
    return sum(values) if values else None


class Gateway:
    def __init__(self, session: aiohttp.ClientSession, base_url: str, api_key: str | None) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def research_model(self) -> str:
        async with self.session.get(self.base_url + "/v1/models", headers=self.headers) as reply:
            reply.raise_for_status()
            ids = [m["id"] for m in (await reply.json())["data"]]
        found = [i for i in ids if i.endswith("-deep-research")]
        if not found:
            raise SystemExit(f"no <id>-deep-research model in /v1/models ({', '.join(ids)}): is AGENT_RESEARCH off?")
        return found[0]

    async def removed(self) -> float | None:
        async with self.session.get(self.base_url + "/metrics", headers=self.headers) as reply:
            return removed_total(await reply.text()) if reply.status == 200 else None

    async def run(self, model: str, question: Question, extra: dict[str, Any], poll: float,
                  timeout: float) -> tuple[dict[str, Any], float]:
        started = time.perf_counter()
        body = {"model": model, "input": question.question, "background": True,
                "include": ["web_search_call.action.sources"], **extra}
        async with self.session.post(self.base_url + "/v1/responses", json=body, headers=self.headers) as reply:
            response = await reply.json()
            if reply.status != 200:
                return {"status": f"http {reply.status}", "error": response.get("error")}, time.perf_counter() - started
        while response.get("status") not in ENDED:
            if time.perf_counter() - started > timeout:
                await self.session.post(f"{self.base_url}/v1/responses/{response['id']}/cancel", headers=self.headers)
                return {**response, "status": "timeout"}, time.perf_counter() - started
            await asyncio.sleep(poll)
            url = f"{self.base_url}/v1/responses/{response['id']}?include=web_search_call.action.sources"
            async with self.session.get(url, headers=self.headers) as reply:
                response = await reply.json()
        return response, time.perf_counter() - started


async def evaluate(gateway: Gateway, questions: Sequence[Question], *, model: str, extra: dict[str, Any],
                   concurrency: int, poll: float, timeout: float) -> list[Result]:
    limit = asyncio.Semaphore(concurrency)

    async def one(question: Question) -> Result:
        async with limit:
            before = await gateway.removed() if concurrency == 1 else None
            response, seconds = await gateway.run(model, question, extra, poll, timeout)
            result = score(question, response, seconds)
            after = await gateway.removed() if concurrency == 1 else None
            if before is not None and after is not None:
                result.removed = int(after - before)
            print(line(result), flush=True)
            return result

    print(HEADER, flush=True)
    return list(await asyncio.gather(*(one(q) for q in questions)))


HEADER = (f"{'id':<10} {'status':<11} {'time s':>7} {'in tok':>7} {'out tok':>7} {'search':>6} {'pages':>5} "
          f"{'kept':>4} {'read':>4} {'seen':>4} {'bad':>3} {'removed':>7} {'found':>5}")


def line(r: Result) -> str:
    removed = "-" if r.removed is None else str(r.removed)
    found = f"{r.found}/{r.expected}" if r.expected else "-"
    return (f"{r.id[:10]:<10} {r.status[:11]:<11} {r.seconds:>7.1f} {r.input_tokens:>7} {r.output_tokens:>7} "
            f"{r.searches:>6} {r.pages:>5} {r.kept:>4} {r.read:>4} {r.seen:>4} {len(r.unsupported):>3} "
            f"{removed:>7} {found:>5}" + (f"  ({r.reason})" if r.reason else ""))


def summary(results: Sequence[Result]) -> str:
    if not results:
        return "no questions"
    done = sum(r.status == "completed" for r in results)
    return (f"{done}/{len(results)} completed; median {statistics.median(r.seconds for r in results):.1f} s, "
            f"{statistics.median(r.input_tokens + r.output_tokens for r in results):.0f} tokens, "
            f"{statistics.median(r.searches for r in results):.0f} searches, "
            f"{statistics.median(r.pages for r in results):.0f} pages; citations kept {sum(r.kept for r in results)}, "
            f"unsupported {sum(len(r.unsupported) for r in results)}")


@dataclass
class FakeResearch:
    """The tests' research corpus and scripted model, served on 127.0.0.1 from this process."""

    env: dict[str, str]  # a gateway's settings for them
    web: Any  # tests.fakes.research_web.ResearchWeb: the searches' spans, the pages read
    model: Any  # tests.fakes.research_model.ResearchModel: the calls by stage


@asynccontextmanager
async def fake_services(search_delay: float = 0.0, model_latency: float = 0.0) -> AsyncIterator[FakeResearch]:
    from tests.fakes.research_model import ResearchModel
    from tests.fakes.research_web import ResearchWeb
    from tests.fakes.upstream import FakeUpstream

    web_fake, upstream, model = ResearchWeb(), FakeUpstream(), ResearchModel(latency={"*": model_latency})
    web_fake.delay = search_delay
    upstream.responder = model
    runners = []
    urls = []
    for app in (web_fake.app(), upstream.app()):
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        host, port = next(iter(runner.addresses))[:2]
        urls.append(f"http://{host}:{port}")
    web_fake.base_url = urls[0]
    env = {"LLM_BASE_URL": urls[1] + "/v1", "LLM_MODEL": "fake-model", "SEARXNG_URL": urls[0],
           "WEB_SEARCH_BACKEND": "searxng", "WEB_ALLOW_PRIVATE_URLS": "true", "WEB_SEARCH_FALLBACK": "none",
           "WEB_EXTRACT_FALLBACK": "none"}
    try:
        yield FakeResearch(env, web_fake, model)
    finally:
        for runner in runners:
            await runner.cleanup()


async def main_async(args: argparse.Namespace) -> list[Result]:
    if args.questions:
        questions = load_questions(Path(args.questions))
    elif args.fake:  # the corpus knows one question
        from tests.fakes.research_web import MULTI_HOP

        questions = [Question("multi-hop", MULTI_HOP.question, ["Tomas Varga", "Kestrel Island"])]
    else:
        questions = load_questions(SAMPLE)
    extra: dict[str, Any] = {}
    if args.max_tool_calls is not None:
        extra["max_tool_calls"] = args.max_tool_calls
    async with AsyncExitStack() as stack:
        base_url, key = args.gateway, args.api_key
        if args.fake or args.upstream:
            from bench import processes

            env = dict(kv.split("=", 1) for kv in args.env)
            if args.fake:
                env = {**(await stack.enter_async_context(fake_services())).env, **env}
            else:
                env = {"LLM_BASE_URL": args.upstream, "LLM_MODEL": args.upstream_model or "", **env}
                if args.upstream_key:
                    env["LLM_API_KEY"] = args.upstream_key
            key = key or FAKE_KEY
            home = stack.enter_context(tempfile.TemporaryDirectory(prefix="agent-gateway-research-eval-"))
            gateway_process = await processes.start("gateway", ["-m", "gateway", "serve", "--port", "0"],
                                                    processes.clean_env({"AGENT_GATEWAY_HOME": home,
                                                                         "API_SERVER_KEY": key, **env}))
            stack.push_async_callback(gateway_process.stop)
            base_url = gateway_process.base_url
        if not base_url:
            raise SystemExit("say where: --gateway URL, --upstream URL or --fake")
        session = await stack.enter_async_context(aiohttp.ClientSession())
        gateway = Gateway(session, base_url, key)
        model = args.model or await gateway.research_model()
        results = await evaluate(gateway, questions, model=model, extra=extra, concurrency=args.concurrency,
                                 poll=args.poll, timeout=args.timeout)
    print(summary(results))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("questions", nargs="?", help=f"JSON Lines question file (default: {SAMPLE.name})")
    parser.add_argument("--gateway", help="a running gateway's base URL")
    parser.add_argument("--api-key", help="its API_SERVER_KEY (or a key of `keys create`)")
    parser.add_argument("--upstream", help="start a gateway on this model server (OpenAI base URL, /v1)")
    parser.add_argument("--upstream-model", help="the model id there (LLM_MODEL)")
    parser.add_argument("--upstream-key", help="its key (LLM_API_KEY)")
    parser.add_argument("--fake", action="store_true", help="the tests' corpus and scripted model")
    parser.add_argument("--env", action="append", default=[], metavar="K=V", help="more settings for a started gateway")
    parser.add_argument("--model", help="the research model id (default: the first -deep-research in /v1/models)")
    parser.add_argument("--max-tool-calls", type=int, help="max_tool_calls of each request")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between polls")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds before a run is cancelled")
    parser.add_argument("--json", help="write every record here")
    args = parser.parse_args(argv)
    results = asyncio.run(main_async(args))
    return 0 if all(r.status == "completed" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
