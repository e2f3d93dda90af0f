"""Typed keys for the state shared on the aiohttp application."""

from __future__ import annotations

from aiohttp import web

from gateway.agent.loop import Agent
from gateway.agent.toolbox import Toolbox
from gateway.agent.web.fallback import WebState
from gateway.common.seal import Sealer
from gateway.config.settings import Settings
from gateway.http.lifecycle import Lifecycle, RunLimiter
from gateway.keys.ring import KeyRing
from gateway.observe.after_reply import AfterReply
from gateway.observe.metrics import Metrics
from gateway.runs.deadlines import RunDeadlines
from gateway.store.api import ResponseStore
from gateway.store.idempotency import IdempotencyCache
from gateway.upstream.client import UpstreamClient
from gateway.upstream.context_window import ContextWindows
from gateway.upstream.routes import RouteTable
from providers.registry import ProviderRegistry

SETTINGS = web.AppKey("settings", Settings)
UPSTREAM = web.AppKey("upstream", UpstreamClient)
#: model id -> its context window in tokens (the budget of a turn's input)
CONTEXT_WINDOWS = web.AppKey("context_windows", ContextWindows)
#: The model routes: what a request's `model` means (one default route without `models:`).
ROUTES = web.AppKey("routes", RouteTable)
TOOLBOX = web.AppKey("toolbox", Toolbox)
AGENT = web.AppKey("agent", Agent)
LIMITER = web.AppKey("limiter", RunLimiter)
LIFECYCLE = web.AppKey("lifecycle", Lifecycle)
#: AGENT_RUN_TIMEOUT of whole (non-streamed) runs (runs/deadlines.py)
RUN_DEADLINES = web.AppKey("run_deadlines", RunDeadlines)
STARTED_AT = web.AppKey("started_at", int)
STORE = web.AppKey("response_store", ResponseStore)
IDEMPOTENCY = web.AppKey("idempotency", IdempotencyCache)
#: The web tools' cool-downs and result cache (`WebState.status()` is what a status route shows).
WEB_STATE = web.AppKey("web_state", WebState)
#: The web providers loaded (absent when the app was built with its own tools): the admin status lists them
WEB_REGISTRY = web.AppKey("web_registry", ProviderRegistry)
#: Absent when API_SERVER_METRICS is false: nothing is counted then.
METRICS = web.AppKey("metrics", Metrics)
#: Host names a keyless gateway answers to (None: a key is set, any Host is fine), see middlewares.check_host
ALLOWED_HOSTS: web.AppKey[frozenset[str] | None] = web.AppKey("allowed_hosts")
#: The API keys accepted and their per-replica counters (keys/ring.py)
KEYRING = web.AppKey("keyring", KeyRing)
#: Each reply's bookkeeping (access line, metrics), run while the gateway would otherwise wait (observe/after_reply.py)
AFTER_REPLY = web.AppKey("after_reply", AfterReply)
#: seals a reasoning item's `encrypted_content` and opens those clients replay (gateway/common/seal.py)
REASONING_SEALER = web.AppKey("reasoning_sealer", Sealer)
