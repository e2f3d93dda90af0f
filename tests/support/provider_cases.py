"""Behaviour every keyed web provider shares, written once and run against each provider's fake.

A provider's test file subclasses the mixins that apply to its service and fills in the class
attributes (its wording, its routes, its fake fixture); pytest collects the inherited tests
under that subclass. What only one service does stays as plain tests in its own file.
The mixins' names do not start with "Test", so pytest does not collect them on their own.
"""

from __future__ import annotations

import importlib
from contextlib import aclosing
from types import EllipsisType
from typing import Any, ClassVar

import pytest

from tests.fakes.registry_ctx import RecordingContext
from tests.fakes.scripted import Reply

PAGE = "https://a.example/1"


async def call_once(provider: Any, method: str = "search") -> dict[str, Any]:
    """One search or extract on a provider made for this test alone, which is closed afterwards."""
    async with aclosing(provider):
        return await call(provider, method)


async def call(provider: Any, method: str) -> dict[str, Any]:
    argument: Any = "q" if method == "search" else [PAGE] if method == "extract" else "https://a.example"
    return await getattr(provider, method)(argument)


class ProviderCase:
    """What the shared tests need to know about one provider and its fake.

    Names follow the bundled plugins' convention: plugin `plugins.web.<name>`, fake fixture
    `<name>_fake`, variables `<NAME>_API_KEY` and `<NAME>_API_URL`.
    """

    name: ClassVar[str]  # the plugin directory and the provider's name
    label: ClassVar[str]  # how the provider names itself in error sentences
    provider_class: ClassVar[type]
    api_key: ClassVar[str | None]  # the key the fake accepts; None runs the provider keyless
    route: ClassVar[str] = "search"  # the fake's route a search goes to, for scripting replies

    @property
    def key_variable(self) -> str:
        return f"{self.name.upper()}_API_KEY"

    @property
    def fake_fixture(self) -> str:
        return f"{self.name}_fake"

    def make(self, fake: Any, *, key: str | None | EllipsisType = ..., timeout: float = 2.0, **env: str) -> Any:
        """The provider pointed at `fake`, with the fake's own key unless another (or None) is given."""
        key = self.api_key if key is ... else key
        if key is not None:
            env[self.key_variable] = key
        env[f"{self.name.upper()}_API_URL"] = fake.base_url
        return self.provider_class(env, timeout=timeout)

    @pytest.fixture
    def fake(self, request: pytest.FixtureRequest) -> Any:
        return request.getfixturevalue(self.fake_fixture)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        # Service-error tables are data of each provider, so they parametrize per class.
        if "expected_error" in metafunc.fixturenames:
            metafunc.parametrize(("status", "headers", "expected_error"), metafunc.cls.service_errors)


class TimesOut(ProviderCase):
    empty_search: ClassVar[Any] = {"results": []}  # a well-formed, empty search answer, sent too late

    async def test_a_slow_service_is_a_timeout_failure(self, fake: Any) -> None:
        provider = self.make(fake, timeout=0.2)
        fake.script(Reply(200, self.empty_search, delay=1.0), route=self.route)

        result = await call_once(provider)

        assert result["success"] is False
        assert result["error"].startswith(f"{self.label} timed out")


class RejectsAWrongKey(ProviderCase):
    wrong_key_detail: ClassVar[str] = "missing or invalid API key"  # what the fake says after the status

    async def test_a_wrong_key_is_rejected_by_the_service(self, fake: Any) -> None:
        result = await call_once(self.make(fake, key="wrong-key"))

        error = f"{self.label} rejected the API key (401): {self.wrong_key_detail}"
        # `kind` names the failure for the fallback log and `agent-gateway tools --check`.
        assert result == {"success": False, "error": error, "kind": "bad_key"}


class NeedsAKey(ProviderCase):
    unconfigured_call: ClassVar[str] = "search"
    unconfigured_env: ClassVar[dict[str, str]] = {}

    async def test_missing_key_makes_the_provider_unavailable_naming_the_variable(self) -> None:
        provider = self.provider_class(self.unconfigured_env)

        assert provider.is_available() is False
        assert provider.unavailable_reason() == f"set {self.key_variable}"
        assert await call(provider, self.unconfigured_call) == {
            "success": False,
            "error": f"{self.label} is not configured: set {self.key_variable}",
        }


class MapsServiceErrors(ProviderCase):
    service_errors: ClassVar[list[tuple[int, dict[str, str], str]]]  # status, headers, sentence start
    error_body: ClassVar[Any]

    def error_json(self, status: int) -> Any:
        return self.error_body

    async def test_service_errors_become_one_clear_sentence(
        self, fake: Any, status: int, headers: dict[str, str], expected_error: str
    ) -> None:
        fake.script(Reply(status, self.error_json(status), headers=headers), route=self.route)

        result = await call_once(self.make(fake))

        assert result["success"] is False
        assert result["error"].startswith(expected_error)


class RejectsAWrongShape(ProviderCase):
    wrong_shape_json: ClassVar[Any]
    wrong_shape_error: ClassVar[str]
    wrong_shape_call: ClassVar[str] = "search"
    wrong_shape_route: ClassVar[str | None] = None  # where that call goes, when not to `route`

    async def test_a_body_of_the_wrong_shape_is_a_clear_failure(self, fake: Any) -> None:
        fake.script(Reply(200, self.wrong_shape_json), route=self.wrong_shape_route or self.route)

        result = await call_once(self.make(fake), self.wrong_shape_call)

        # `retryable` (when present) sends the call to the next provider of the fallback chain.
        assert {k: v for k, v in result.items() if k != "retryable"} == {
            "success": False, "error": self.wrong_shape_error}
        assert result.get("retryable", True) is True


class FollowsTheBaseUrl(ProviderCase):
    paths_called: ClassVar[list[str]]  # what search, extract (and crawl, if listed) ask for

    async def test_base_url_override_sends_every_call_to_it(self, fake: Any) -> None:
        async with aclosing(self.make(fake)) as provider:
            for method in ("search", "extract", "crawl")[: len(self.paths_called)]:
                await call(provider, method)

        assert [r.path for r in fake.requests] == self.paths_called


class Registers(ProviderCase):
    capabilities: ClassVar[tuple[bool, bool, bool]]  # search, extract, crawl
    register_with_key: ClassVar[bool] = True

    def check_registered(self, provider: Any) -> None:
        """What else a provider's registration promises (nothing, unless a subclass says)."""

    def test_register_adds_the_provider_with_its_capabilities(self) -> None:
        ctx = RecordingContext({self.key_variable: "k"} if self.register_with_key else {})

        importlib.import_module(f"plugins.web.{self.name}").register(ctx)

        [provider] = ctx.providers
        assert provider.name == self.name
        assert (provider.supports_search(), provider.supports_extract(), provider.supports_crawl()) == (
            self.capabilities
        )
        self.check_registered(provider)


class KeyedService(TimesOut, RejectsAWrongKey, NeedsAKey, MapsServiceErrors, RejectsAWrongShape, Registers):
    """Everything above at once: what a hosted search API that needs a key always promises."""
