"""What `config check` and `serve` say of the model routes: each route, its upstream and whether
that upstream answered, and warnings for what will not work."""

from __future__ import annotations

from gateway.config.settings import Settings
from gateway.upstream.client import UpstreamClient
from gateway.upstream.routes import RouteTable

SHOWN = 10  # discovered ids named on the start-up line


def report(table: RouteTable) -> tuple[list[str], list[str]]:
    """Lines naming each route, its upstream and whether that upstream answered (after `start`
    or `probe`), and warnings for what will not work: `config check` and `serve` print them."""
    if not table.configured:
        return [], []
    lines: list[str] = []
    warnings: list[str] = []
    if table.discover:  # an upstream may list hundreds (OpenRouter): a count and the first few
        state = table.upstreams[table.default.client]
        ids = list(state.entries)
        found = (f"{len(ids)}: " + ", ".join(ids[:SHOWN]) + (", ..." if len(ids) > SHOWN else "")) if ids \
            else "none yet"
        lines.append(f"model routes: auto, from {state.client.base_url} ({found})")
    # a line each for the default and the configured routes (discovered ones are in the line above)
    routes = [table.default, *(r for r in table.routes.values() if r is not table.default and r.id in table.specs)]
    for route in routes:
        state = table.upstreams[route.client]
        spec = table.specs.get(route.id)
        model = route.model or "the first model it lists"
        answer = "answered" if state.answered else f"did not answer ({state.error or 'no reply in time'})"
        chain = f"; fallbacks {', '.join(r.id for r in route.fallbacks)}" if route.fallbacks else ""
        window = f"; context window {route.context_window}" if route.context_window else ""
        default = " (default)" if route is table.default else ""
        seen = "; vision" if route.vision else ""  # configured, or what the model list said
        dropped = f"; drops {', '.join(sorted(route.drop_params))}" if route.drop_params else ""
        lines.append(f"model route {route.id}{default}: {model} at {state.client.base_url}, "
                     f"upstream {answer}{window}{chain}{seen}{dropped}")
        if not state.answered:
            warnings.append(f"model route {route.id}: the upstream at {state.client.base_url} did not answer "
                            f"({state.error or 'no reply in time'}); requests for it fail until it does")
        elif route.model and route.model not in state.entries and state.entries:
            warnings.append(f"model route {route.id}: the upstream at {state.client.base_url} does not list "
                            f"{route.model!r} (it lists {', '.join(list(state.entries)[:8])})")
        if spec is not None and spec.api_key_env and not table.settings.env.get(spec.api_key_env):
            warnings.append(f"model route {route.id}: {spec.api_key_env} (its api_key_env) is not set; "
                            "requests go without a key")
    return lines, warnings


async def probe_report(settings: Settings) -> tuple[list[str], list[str]]:
    """`report` for `config check`: the routes' upstreams asked once, then closed."""
    client = UpstreamClient(settings.llm_base_url, api_key=settings.llm_api_key, model=settings.llm_model,
                            connect_timeout=settings.llm_connect_timeout, read_timeout=settings.llm_timeout,
                            http_client=settings.llm_http_client)
    await client.start()
    table = RouteTable(settings, client)
    try:
        await table.start()
        return report(table)
    finally:
        await table.close()
        await client.close()
