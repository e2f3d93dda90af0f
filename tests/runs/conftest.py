"""Fixtures of the background-run tests: a gateway with a key, and the openai SDK pointed at it."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.conftest import API_KEY


@pytest.fixture
async def gateway(make_client: Any) -> Any:
    return await make_client(api_key=API_KEY)


@pytest.fixture
async def sdk(gateway: Any) -> Any:
    sdk = openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key=API_KEY, max_retries=0)
    yield sdk
    await sdk.close()
