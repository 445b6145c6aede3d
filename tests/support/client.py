"""The client against a simulator, a transport that watches its requests, and the secrets it
must never show."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from httpx_aiohttp import AiohttpTransport

from pipeline import simulator
from pipeline.whitebit import AsyncWhiteBIT, Credentials, RetryPolicy
from tests.support.leaks import seed_secrets

#: Retries as the defaults count them, without the waiting: tests are about behaviour.
FAST_RETRIES = RetryPolicy(initial_delay_s=0.005, max_delay_s=0.02)


#: Every secret a seed-7 simulator's keys have, including after a few resets.
SECRETS = frozenset(seed_secrets(simulator.DEFAULT_SEED))


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, "a secret appears in the text"


def creds(sim: Any, role: str = "partner") -> Credentials:
    """The client's credentials for one of the simulator's keys."""
    c = sim.credentials if role == "partner" else sim.credentials_for(role)
    return Credentials(c.api_key, c.api_secret)


def client(sim: Any, role: str = "partner", **options: Any) -> AsyncWhiteBIT:
    """A client of the simulator; pacing off and quick retries unless the test says otherwise."""
    options.setdefault("pacing", False)
    options.setdefault("retry", FAST_RETRIES)
    return AsyncWhiteBIT(creds(sim, role), base_url=sim.url, **options)


class Watching(httpx.AsyncBaseTransport):
    """aiohttp's transport, as the client has it by default, with a look at every request as it
    goes out and every answer as it comes in (before its body is read). Passed as the client's
    ``transport``, it sees the traffic on the path production takes."""

    def __init__(
        self,
        on_request: Callable[[httpx.Request], Awaitable[None]] | None = None,
        on_response: Callable[[httpx.Request, httpx.Response], Awaitable[None]] | None = None,
    ) -> None:
        self.inner = AiohttpTransport()
        self.on_request = on_request
        self.on_response = on_response
        #: Every request sent, in order.
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        if self.on_request is not None:
            await self.on_request(request)
        response = await self.inner.handle_async_request(request)
        if self.on_response is not None:
            await self.on_response(request, response)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@contextmanager
def raises(kind: type[BaseException]) -> Iterator[pytest.ExceptionInfo[Any]]:
    """`pytest.raises` that also checks the error's text carries no secret."""
    with pytest.raises(kind) as info:
        yield info
    assert_no_secret(str(info.value))
    assert_no_secret(repr(info.value))


async def collect(walk: Any) -> list[Any]:
    rows: list[Any] = []
    async for page in walk:
        rows.extend(page)
    return rows
