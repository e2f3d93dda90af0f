"""Typed keys for the state shared on the aiohttp application."""

from __future__ import annotations

from aiohttp import web

from gateway.agent.loop import Agent
from gateway.agent.toolbox import Toolbox
from gateway.config.settings import Settings
from gateway.http.cors_policy import CorsPolicy
from gateway.http.lifecycle import Lifecycle, RunLimiter
from gateway.store.idempotency import IdempotencyCache
from gateway.store.sqlite import ResponseStore
from gateway.upstream.client import UpstreamClient

SETTINGS = web.AppKey("settings", Settings)
UPSTREAM = web.AppKey("upstream", UpstreamClient)
TOOLBOX = web.AppKey("toolbox", Toolbox)
AGENT = web.AppKey("agent", Agent)
LIMITER = web.AppKey("limiter", RunLimiter)
LIFECYCLE = web.AppKey("lifecycle", Lifecycle)
STARTED_AT = web.AppKey("started_at", int)
STORE = web.AppKey("response_store", ResponseStore)
IDEMPOTENCY = web.AppKey("idempotency", IdempotencyCache)
CORS_POLICY = web.AppKey("cors_policy", CorsPolicy)
