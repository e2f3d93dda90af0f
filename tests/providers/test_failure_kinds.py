"""What kind of failure a provider call was, as the fallback log and `tools --check` name it: from
the kind a provider declares, from the HTTP status, and from the sentence of a plugin that says none."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.agent.web.calls import attempt
from providers.web import ProviderError, failure


class ThirdPartyPlugin:
    """A plugin written against the contract before `kind` existed: sentences only."""

    name = "theirs"

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def search(self, query: str, limit: int = 5) -> Any:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(("answer", "kind"), [
    (failure("TheirSearch rejected the API key (401)"), "bad_key"),
    (failure("TheirSearch: out of credits for this month"), "out_of_credit"),
    (failure("TheirSearch rate limit reached, try later", retryable=True), "rate_limited"),
    (failure("TheirSearch could not be reached: connection refused", retryable=True), "unreachable"),
    (failure("the model grok-x does not exist"), "model_retired"),
    (failure("blocked: 10.0.0.1 is a private address"), "url_blocked"),
    (failure("something odd happened"), "failed"),
    (failure("odd wording, but the plugin says what it was", kind="rate_limited"), "rate_limited"),
    (ProviderError("TheirSearch timed out (ReadTimeout)", retryable=True), "timeout"),
    (ProviderError("no idea", kind="out_of_credit"), "out_of_credit"),
    (RuntimeError("boom"), "failed"),
    ({"success": True, "data": "not a list"}, "service_error"),
])
async def test_a_failure_is_named_by_its_declared_kind_or_else_its_sentence(answer: Any, kind: str) -> None:
    plugin = ThirdPartyPlugin(answer)

    outcome = await attempt(plugin.search, "q", kind="search", provider=plugin.name, timeout=5.0)

    assert outcome.ok is False and outcome.kind == kind
    assert "kind" not in outcome.envelope  # the model reads the sentence, not the label


async def test_a_plugin_that_hangs_past_the_deadline_is_a_timeout() -> None:
    import time

    class Slow(ThirdPartyPlugin):
        def search(self, query: str, limit: int = 5) -> Any:
            time.sleep(0.5)
            return failure("late")

    outcome = await attempt(Slow(None).search, "q", kind="search", provider="slow", timeout=0.05)

    assert (outcome.kind, outcome.fault) == ("timeout", True)
