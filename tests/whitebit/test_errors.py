"""Every error class: the status and body mapping (docs/api.md, "Error responses seen"), then
each one end to end."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import httpx
import orjson
import pytest
from httpx_aiohttp import AiohttpTransport

from pipeline import spec
from pipeline.simulator import Fault, Simulator
from pipeline.whitebit import (
    NO_RETRIES,
    APIStatusError,
    AsyncWhiteBIT,
    AuthenticationError,
    ConnectionRefused,
    Credentials,
    NonceRejectedError,
    NotFoundError,
    PayloadRejectedError,
    PermissionDeniedError,
    RateLimitError,
    RetryPolicy,
    ServerError,
    TransportError,
    TransportTimeout,
    UnreadableResponseError,
    ValidationError,
)
from pipeline.whitebit import _auth as auth
from tests.support.client import Watching, client, creds, raises

HTML_429 = b"<html><head><title>429 Too Many Requests</title></head></html>"
HTML_503 = b"<html><head><title>503 Service Unavailable</title></head></html>"

# (status, body, error class) for every row of the table in docs/api.md, "Error responses
# seen", and more.
ANSWERS = [
    (429, b'{"code":0,"errors":{},"message":"Too many requests."}', NonceRejectedError),
    (
        400,
        b'{"code":0,"message":"Your nonce is more than 5 seconds lesser than the current nonce."}',
        NonceRejectedError,
    ),
    (
        429,
        b'{"code":0,"message":"Your nonce is more than 5 seconds lesser than the current nonce."}',
        NonceRejectedError,
    ),
    (401, b'{"code":10,"message":"Unauthorized request."}', AuthenticationError),
    (400, b'{"code":9,"message":"Invalid payload."}', PayloadRejectedError),
    (400, b'{"code":9,"message":"Payload not provided."}', PayloadRejectedError),
    (401, b'{"code":9,"message":"Payload not provided."}', AuthenticationError),
    (400, b'{"code":9,"message":"Nonce not provided."}', PayloadRejectedError),
    (400, b'{"code":9,"message":"Request not provided."}', PayloadRejectedError),
    (
        401,
        b'{"code":2,"message":"This action is unauthorized. Enable your key in API settings"}',
        AuthenticationError,
    ),
    (
        403,
        b'{"code":4,"message":"This API Key is not authorized to perform this action."}',
        PermissionDeniedError,
    ),
    (
        403,
        b'{"code":0,"message":"You don\'t have permission to use this endpoint."}',
        PermissionDeniedError,
    ),
    (
        400,
        b'{"code":0,"message":"Validation failed",'
        b'"errors":{"ticker":["The selected ticker is invalid."]}}',
        ValidationError,
    ),
    (422, b'{"code":30,"message":"Validation failed","errors":{"limit":["x"]}}', ValidationError),
    (422, b'{"code":31,"message":"Validation failed","errors":{"market":["x"]}}', ValidationError),
    (400, b'{"code":0,"message":"Validation failed","errors":{}}', ValidationError),
    (404, b'{"message":"API key not found"}', NotFoundError),
    (429, HTML_429, RateLimitError),
    (500, b"<html>500 Internal Server Error</html>", ServerError),
    (502, b"<html>502 Bad Gateway</html>", ServerError),
    (503, HTML_503, ServerError),
    (500, b'{"error":["Internal server error."]}', ServerError),
    (404, b"", NotFoundError),
    (405, b'{"success":false,"message":"Method not allowed","params":[]}', APIStatusError),
    (200, b'{"code":10,"message":"Unauthorized request."}', AuthenticationError),
    (200, b'{"code":0,"message":"Validation failed","errors":{}}', ValidationError),
    (200, b'{"success":false,"message":"Something failed","params":[]}', APIStatusError),
]


def _answering(status: int, body: bytes, headers: dict[str, str] | None = None) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers=headers)

    return httpx.MockTransport(handler)


def _fake_client(transport: Any, retry: RetryPolicy = NO_RETRIES) -> AsyncWhiteBIT:
    return AsyncWhiteBIT(
        Credentials("key", "secret-of-the-mock"),
        base_url="http://127.0.0.1:9",
        transport=transport,
        pacing=False,
        retry=retry,
    )


@pytest.mark.parametrize(("status", "body", "kind"), ANSWERS)
def test_status_and_body_map_to_the_error(status: int, body: bytes, kind: type) -> None:
    async def main() -> None:
        async with _fake_client(_answering(status, body)) as c:
            with raises(kind) as info:
                await c.hedge_mode()
            assert type(info.value) is kind
            assert info.value.status_code == status
            assert spec.HEDGE_MODE.path in str(info.value)

    asyncio.run(main())


def test_a_validation_error_carries_the_field_errors() -> None:
    body = b'{"code":30,"message":"Validation failed","errors":{"offset":["too big"]}}'

    async def main() -> None:
        async with _fake_client(_answering(422, body)) as c:
            with raises(ValidationError) as info:
                await c.funding_history()
            assert info.value.errors == {"offset": ["too big"]}
            assert info.value.code == 30

    asyncio.run(main())


def test_retry_after_is_honoured() -> None:
    answers = iter([(429, HTML_429, {"Retry-After": "0.3"}), (200, b'{"hedgeMode":false}', {})])

    def handler(request: httpx.Request) -> httpx.Response:
        status, body, headers = next(answers)
        return httpx.Response(status, content=body, headers=headers)

    async def main() -> float:
        policy = RetryPolicy(initial_delay_s=0.001, max_delay_s=0.001)
        async with _fake_client(httpx.MockTransport(handler), retry=policy) as c:
            started = time.monotonic()
            assert await c.hedge_mode() == {"hedgeMode": False}
            return time.monotonic() - started

    assert asyncio.run(main()) >= 0.3


# --- each class, end to end against the simulator ------------------------------------------


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_validation_errors_from_the_exchange(sim: Simulator) -> None:
    async def main() -> None:
        async with client(sim) as c:
            with raises(ValidationError) as info:
                await c.investments_history(ticker="NOPE")
            assert (info.value.status_code, info.value.code) == (400, 0)
            assert info.value.errors == {"ticker": ["The selected ticker is invalid."]}
            assert "(sent ticker='NOPE')" in str(info.value)
            with raises(ValidationError) as info:
                await c.funding_history(market="NOPE_PERP")
            assert (info.value.status_code, info.value.code) == (422, 31)
            assert list(info.value.errors) == ["market"]
            # The exchange names the field; the message names the market too.
            assert str(info.value).endswith(
                "{'market': ['The selected market is invalid.']} (sent market='NOPE_PERP')"
            )
            with raises(ValidationError) as info:
                await c.watcher_links("nobody")
            assert list(info.value.errors) == ["user"]
            assert info.value.attempts == 1

    _run(main())


def test_unknown_key_to_reset_is_not_found(sim: Simulator) -> None:
    async def main() -> None:
        async with client(sim) as c:
            with raises(NotFoundError) as info:
                await c.reset_subaccount_key("00000000-0000-4000-8000-000000000000")
            assert info.value.message == "API key not found"

    _run(main())


@pytest.mark.parametrize(("role", "code"), [("disabled", 2), ("wrong secret", 10)])
def test_authentication_errors(sim: Simulator, role: str, code: int) -> None:
    async def main() -> None:
        if role == "wrong secret":
            c = AsyncWhiteBIT(
                Credentials(sim.credentials.api_key, "not-the-secret"),
                base_url=sim.url,
                pacing=False,
            )
        else:
            c = client(sim, role)
        async with c:
            with raises(AuthenticationError) as info:
                await c.main_balance()
            assert (info.value.status_code, info.value.code, info.value.attempts) == (401, code, 1)

    _run(main())


class _Tampering(httpx.AsyncBaseTransport):
    """Sends a body other than the signed payload, as a buggy proxy would."""

    def __init__(self) -> None:
        self.inner = AiohttpTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = orjson.loads(base64.b64decode(request.headers["X-TXC-PAYLOAD"]))
        body["ticker"] = "ETH"
        tampered = httpx.Request(
            request.method, request.url, headers=request.headers, content=orjson.dumps(body)
        )
        tampered.extensions = request.extensions
        return await self.inner.handle_async_request(tampered)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_a_refused_payload_is_not_retried(sim: Simulator) -> None:
    async def main() -> None:
        async with client(sim, transport=_Tampering()) as c:
            with raises(PayloadRejectedError) as info:
                await c.trading_balance(ticker="BTC")
            assert (info.value.status_code, info.value.code, info.value.attempts) == (400, 9, 1)
            assert isinstance(info.value, AuthenticationError)

    _run(main())


def test_permission_errors(sim: Simulator) -> None:
    async def main() -> None:
        async with client(sim, "read_only") as c:
            with raises(PermissionDeniedError) as info:
                await c.reset_subaccount_key(sim.keys["sub_1"].key_id)
            assert info.value.code == 4
        async with client(sim, "no_b2b") as c:
            with raises(PermissionDeniedError) as info:
                await c.investments_history()
            assert info.value.code == 0

    _run(main())


def _pinned(c: AsyncWhiteBIT, source: auth.NonceSource) -> AsyncWhiteBIT:
    """The client, with its nonces taken from ``source`` instead of the process's."""
    c._nonces = source
    return c


def _frozen_nonces(at_ms: int) -> auth.NonceSource:
    return auth.NonceSource(clock_ns=lambda: at_ms * 1_000_000)


def test_a_reused_nonce_is_rejected_and_then_retried_fresh(sim: Simulator) -> None:
    source = _frozen_nonces(time.time_ns() // 1_000_000)

    async def main() -> None:
        async with _pinned(client(sim, retry=NO_RETRIES), source) as c:
            await c.hedge_mode()
            source._last -= 1  # the next nonce repeats the last one: another process's, say
            with raises(NonceRejectedError) as info:
                await c.hedge_mode()
            assert info.value.status_code == 429
        async with _pinned(client(sim), source) as c:
            source._last -= 1
            await c.hedge_mode()  # rejected once, then signed anew and accepted

    _run(main())


def test_a_nonce_outside_the_window_is_rejected(sim: Simulator) -> None:
    source = _frozen_nonces(time.time_ns() // 1_000_000 - 10_000)

    async def main() -> None:
        retry = RetryPolicy(max_retries=2, initial_delay_s=0.001)
        async with _pinned(client(sim, retry=retry), source) as c:
            with raises(NonceRejectedError) as info:
                await c.hedge_mode()
            assert info.value.status_code == 400
            assert "5 seconds" in str(info.value)
            assert info.value.attempts == 3

    _run(main())


def test_the_gateway_rate_limit(own_sim: Simulator) -> None:
    own_sim.limits.set_budget("hedge-mode", 2, 60)

    async def main() -> None:
        async with client(own_sim, retry=RetryPolicy(max_retries=2, initial_delay_s=0.001)) as c:
            await c.hedge_mode()
            await c.hedge_mode()
            with raises(RateLimitError) as info:
                await c.hedge_mode()
            assert info.value.attempts == 3
            assert "after 3 attempts" in str(info.value)
            assert spec.HEDGE_MODE.path in str(info.value)

    _run(main())


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (Fault.HTTP_500, ServerError),
        (Fault.HTTP_502, ServerError),
        (Fault.HTTP_503, ServerError),
        (Fault.GATEWAY_429, RateLimitError),
        (Fault.DROP_CONNECTION, TransportError),
        (Fault.TRUNCATED_JSON, UnreadableResponseError),
    ],
)
def test_each_fault_raises_its_error_when_retries_are_off(
    own_sim: Simulator, fault: Fault, kind: type
) -> None:
    own_sim.faults.script([fault])

    async def main() -> None:
        async with client(own_sim, retry=NO_RETRIES) as c:
            with raises(kind) as info:
                await c.funding_history(limit=5)
            assert spec.FUNDING_HISTORY.path in str(info.value)

    _run(main())


def test_an_unreadable_answer_quotes_its_end_briefly(own_sim: Simulator) -> None:
    own_sim.faults.script([Fault.TRUNCATED_JSON])

    async def main() -> None:
        async with client(own_sim, retry=NO_RETRIES) as c:
            with raises(UnreadableResponseError) as info:
                await c.funding_history()
            assert info.value.field == "(the whole answer)"
            assert "not valid JSON" in info.value.reason
            assert info.value.operation is spec.FUNDING_HISTORY
            assert len(info.value.body_excerpt) <= 200

    _run(main())


def test_a_timeout(own_sim: Simulator) -> None:
    own_sim.faults.set(1.0, [Fault.SLOW], slow_seconds=0.5)

    async def main() -> None:
        async with client(own_sim, retry=NO_RETRIES, timeout=0.1) as c:
            with raises(TransportTimeout):
                await c.hedge_mode()

    _run(main())


def test_a_refused_connection_is_said_as_refused_not_as_a_timeout() -> None:
    async def main() -> None:
        async with AsyncWhiteBIT(
            base_url="http://127.0.0.1:1", pacing=False, retry=NO_RETRIES
        ) as c:
            with raises(TransportError) as info:
                await c.ping()
            assert type(info.value) is ConnectionRefused
            assert "http://127.0.0.1:1 refused the connection" in str(info.value)
            assert info.value.retryable  # an exchange restarting mid-walk comes back

    _run(main())


def test_a_refused_first_connection_is_said_at_once_a_later_one_retried() -> None:
    """As a run's preflight, a refused connection raises at once: the address is wrong or the
    exchange down; elsewhere it keeps the policy's patience."""
    patient = RetryPolicy(max_retries=2, initial_delay_s=0.2)

    async def main() -> None:
        async with AsyncWhiteBIT(base_url="http://127.0.0.1:1", pacing=False, retry=patient) as c:
            # One attempt: no retry, so no wait (a bound in seconds would measure the machine).
            with raises(ConnectionRefused) as preflight:
                await c.ping(preflight=True)
            assert preflight.value.attempts == 1
            with raises(ConnectionRefused) as later:
                await c.ping()
            assert later.value.attempts == 3

    _run(main())


def test_errors_name_the_operation_and_never_the_payload(sim: Simulator) -> None:
    watch = Watching()

    async def main() -> None:
        async with client(sim, transport=watch) as c:
            with raises(ValidationError) as info:
                await c.investments_history(ticker="NOPE")
        text = str(info.value)
        assert text.startswith("investments_history /api/v4/main-account/smart/investments:")
        assert len(watch.sent) == 1
        for request in watch.sent:
            assert request.headers["X-TXC-PAYLOAD"] not in text
            assert request.headers["X-TXC-SIGNATURE"] not in text

    _run(main())


def test_credentials_reach_the_client_not_the_error(sim: Simulator) -> None:
    assert creds(sim).api_secret not in repr(creds(sim))
