"""Retries: the policy's two decisions (whether to try again, after how long) case by case, then
each fault switch of the simulator end to end: bounded, re-signed, and never for a write that
may have run; an answer that breaks the contract is tried once more, at once, and no more."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import httpx
import orjson
import pytest

from pipeline import spec
from pipeline.simulator import Fault, Simulator
from pipeline.whitebit import (
    APIError,
    APIStatusError,
    AuthenticationError,
    ContractError,
    NonceRejectedError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ResponseFormatError,
    RetryPolicy,
    ServerError,
    TransportError,
    TransportTimeout,
    UnreadableResponseError,
    ValidationError,
    WalkStats,
)
from pipeline.whitebit._parse import parse
from tests.support.client import FAST_RETRIES, Watching, client, raises

FUNDING = spec.FUNDING_HISTORY.path
#: Faults retried with a backoff: all but a slow answer (see its own test) and the drift of a
#: record's fields, which is data, not a failure (tests/whitebit/test_answers.py).
RETRIED = [
    f
    for f in Fault
    if f not in (Fault.SLOW, Fault.EXTRA_FIELD, Fault.MISSING_FIELD, Fault.NUMBER_FOR_STRING)
]
READ = spec.FUNDING_HISTORY
WRITE = spec.RESET_SUBACCOUNT_KEY
POLICY = RetryPolicy(max_retries=3, initial_delay_s=0.25, max_delay_s=8.0)


def _rate_limited(retry_after: float | None = None) -> RateLimitError:
    return RateLimitError("x", operation=READ, status_code=429, retry_after=retry_after)


def _error(kind: type[APIError]) -> APIError:
    """A failure of ``kind``, as the client would raise it."""
    if issubclass(kind, ResponseFormatError):
        return kind(operation=READ, field="f", reason="r", body_excerpt="")
    if issubclass(kind, APIStatusError):
        return kind("x", operation=READ, status_code=429)
    return kind("x", operation=READ)


# --- the policy alone: which failures are tried again, and after how long --------------------

RETRIED_KINDS = [
    RateLimitError,
    NonceRejectedError,
    ServerError,
    TransportError,
    TransportTimeout,
    UnreadableResponseError,
]


@pytest.mark.parametrize("kind", RETRIED_KINDS, ids=lambda k: k.__name__)
def test_a_retried_failure_of_a_read_is_tried_again_up_to_the_budget(
    kind: type[APIError],
) -> None:
    error = _error(kind)
    assert [POLICY.should_retry(READ, error, n) for n in (1, 2, 3, 4)] == [True] * 3 + [False]
    assert not RetryPolicy(max_retries=0).should_retry(READ, error, 1)


@pytest.mark.parametrize(
    "kind",
    [ValidationError, AuthenticationError, PermissionDeniedError, NotFoundError, APIStatusError],
    ids=lambda k: k.__name__,
)
def test_an_answer_that_would_not_change_is_not_tried_again(kind: type[APIError]) -> None:
    assert not POLICY.should_retry(READ, _error(kind), 1)


def test_an_answer_that_breaks_the_contract_is_tried_once_more_at_once() -> None:
    error = _error(ContractError)
    assert not error.retryable  # for a caller: waiting changes nothing
    assert [POLICY.should_retry(READ, error, n) for n in (1, 2)] == [True, False]
    assert POLICY.delay(1, error) == 0.0
    assert not RetryPolicy(max_retries=0).should_retry(READ, error, 1)


def test_what_is_not_the_exchanges_failure_is_not_tried_again() -> None:
    assert not POLICY.should_retry(READ, ValueError("a bug"), 1)
    assert not POLICY.should_retry(READ, asyncio.CancelledError(), 1)


@pytest.mark.parametrize(
    ("kind", "again"),
    [
        (RateLimitError, True),  # refused by the gateway: the reset never ran
        (NonceRejectedError, True),  # refused before the action
        (ServerError, False),  # may have come after the reset was done
        (TransportError, False),
        (TransportTimeout, False),
        (UnreadableResponseError, False),
        (ContractError, False),  # the reset answered: it ran
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_a_key_reset_is_tried_again_only_after_an_answer_that_proves_it_never_ran(
    kind: type[APIError], again: bool
) -> None:
    error = _error(kind)
    assert POLICY.should_retry(WRITE, error, 1) is again
    assert not POLICY.should_retry(WRITE, error, POLICY.max_retries + 1)


@pytest.mark.parametrize(("retry", "full"), [(1, 0.25), (2, 0.5), (3, 1.0), (6, 8.0), (9, 8.0)])
def test_the_delay_backs_off_exponentially_within_the_cap_with_jitter(
    retry: int, full: float
) -> None:
    delays = {POLICY.delay(retry, None) for _ in range(50)}
    assert all(0.75 * full <= d <= full for d in delays)
    assert len(delays) > 1  # jittered
    assert all(0.75 * full <= POLICY.delay(retry, _error(ServerError)) <= full for _ in range(9))


@pytest.mark.parametrize("seconds", [0.0, 2.5, 60.0])
def test_the_delay_is_a_sane_retry_after(seconds: float) -> None:
    assert POLICY.delay(1, _rate_limited(seconds)) == seconds


@pytest.mark.parametrize("seconds", [3600.0, -1.0])
def test_an_absurd_retry_after_is_ignored_for_the_backoff(seconds: float) -> None:
    assert 0.75 * 0.25 <= POLICY.delay(1, _rate_limited(seconds)) <= 0.25


# --- against the simulator -------------------------------------------------------------------


def _nonces(requests: list[httpx.Request]) -> list[str]:
    return [orjson.loads(base64.b64decode(r.headers["X-TXC-PAYLOAD"]))["nonce"] for r in requests]


@pytest.mark.parametrize("fault", RETRIED, ids=lambda f: f.value)
def test_each_fault_is_retried_with_a_fresh_nonce(own_sim: Simulator, fault: Fault) -> None:
    own_sim.faults.script([fault, fault], paths=[FUNDING])
    watch = Watching()

    async def main() -> None:
        stats = WalkStats("test")
        async with client(own_sim, transport=watch) as c:
            page = await c.call(spec.FUNDING_HISTORY, {"limit": 10}, stats=stats)
        assert page["records"] == own_sim.dataset.funding.newest_first()[:10]
        assert stats.retries == 2
        assert stats.rate_limited == (2 if fault is Fault.GATEWAY_429 else 0)

    asyncio.run(main())
    assert len(watch.sent) == 3
    assert len(set(_nonces(watch.sent))) == 3
    assert own_sim.faults.injected[fault] == 2


def test_a_slow_answer_is_retried_after_the_timeout(own_sim: Simulator) -> None:
    own_sim.faults.slow_seconds = 0.4
    own_sim.faults.script([Fault.SLOW], paths=[FUNDING])

    async def main() -> None:
        stats = WalkStats("test")
        async with client(own_sim, timeout=0.15) as c:
            await c.call(spec.FUNDING_HISTORY, {"limit": 3}, stats=stats)
        assert stats.retries == 1

    asyncio.run(main())


def test_the_retry_budget_is_bounded_and_the_last_error_says_so(own_sim: Simulator) -> None:
    own_sim.faults.set(1.0, [Fault.HTTP_503])

    async def main() -> None:
        policy = RetryPolicy(max_retries=3, initial_delay_s=0.001, max_delay_s=0.002)
        async with client(own_sim, retry=policy) as c:
            with raises(ServerError) as info:
                await c.funding_history()
        assert info.value.attempts == 4
        assert str(info.value).endswith("(after 4 attempts)")
        assert FUNDING in str(info.value)

    asyncio.run(main())
    assert own_sim.state.answered[(FUNDING, 503)] == 4


def test_a_timeout_budget_ends_in_a_timeout(own_sim: Simulator) -> None:
    own_sim.faults.set(1.0, [Fault.SLOW], slow_seconds=0.3)

    async def main() -> None:
        policy = RetryPolicy(max_retries=1, initial_delay_s=0.001)
        async with client(own_sim, retry=policy, timeout=0.05) as c:
            with raises(TransportTimeout) as info:
                await c.hedge_mode()
        assert info.value.attempts == 2

    asyncio.run(main())


def test_what_cannot_succeed_is_not_retried(own_sim: Simulator) -> None:
    async def main() -> None:
        async with client(own_sim) as c:
            with raises(ValidationError) as info:
                await c.investments_history(ticker="NOPE")
        assert info.value.attempts == 1

    asyncio.run(main())
    assert own_sim.state.answered[(spec.INVESTMENTS_HISTORY.path, 400)] == 1


def test_an_answer_that_breaks_the_contract_is_asked_twice_then_raised(own_sim: Simulator) -> None:
    own_sim.faults.tamper(FUNDING, lambda params, body: b'{"offset":0,"limit":5,"records":null}')

    async def main() -> None:
        stats = WalkStats("test")
        async with client(own_sim) as c:  # the default budget: 8 retries
            with raises(ContractError) as info:
                await c.call(spec.FUNDING_HISTORY, {"limit": 5}, stats=stats)
        assert info.value.attempts == 2
        assert (info.value.field, info.value.reason) == ("records", "expected an array, got null")
        assert stats.retries == 1

    asyncio.run(main())
    assert own_sim.state.answered[(FUNDING, 200)] == 2


def test_an_answer_cut_short_gets_the_whole_retry_budget(own_sim: Simulator) -> None:
    own_sim.faults.set(1.0, [Fault.TRUNCATED_JSON])

    async def main() -> None:
        async with client(own_sim) as c:
            with raises(UnreadableResponseError) as info:
                await c.funding_history(limit=5)
        assert info.value.attempts == FAST_RETRIES.max_retries + 1
        assert info.value.retryable  # a caller may try again later

    asyncio.run(main())
    assert own_sim.faults.injected[Fault.TRUNCATED_JSON] == FAST_RETRIES.max_retries + 1


@pytest.mark.parametrize(
    ("answer", "where", "why"),
    [
        (b'{"hedgeMode":"\xfftrue"}', "byte 14 of 21", "not valid UTF-8 (invalid start byte)"),
        (b"[" * 100_000 + b"]" * 100_000, "byte 1025 of 200000", "depth limit exceeded"),
        (b'{"hedgeMode":true}}', "byte 18 of 19", "unexpected content after document"),
        ('{"hedgeMode":"é",}'.encode(), "byte 17 of 19", "trailing comma is not allowed"),
    ],
)
def test_a_whole_answer_the_parser_refuses_fails_after_one_quick_retry(
    own_sim: Simulator, answer: bytes, where: str, why: str
) -> None:
    """No network fault makes invalid UTF-8 or nesting too deep: the same answer would come
    again, so it is not waited for; the error says where the body went wrong."""
    own_sim.faults.tamper(spec.HEDGE_MODE.path, lambda p, body: answer)

    async def main() -> None:
        async with client(own_sim) as c:  # the default budget: 8 retries
            with raises(ContractError) as info:
                await c.hedge_mode()
        assert info.value.attempts == 2
        assert info.value.field == where
        assert why in info.value.reason
        assert "hedge_mode" in str(info.value)

    asyncio.run(main())
    assert own_sim.state.answered[(spec.HEDGE_MODE.path, 200)] == 2


@pytest.mark.parametrize(
    "answer",
    [b"", b"  \n", b'{"hedgeMode":tr', b'{"hedgeMode":"\xc3', b'{"records":[{"a":"b"},'],
)
def test_an_answer_that_breaks_off_is_cut_short_not_refused(answer: bytes) -> None:
    """The parser ran out of input (or out of a character): the rest may come on another try."""
    with pytest.raises(UnreadableResponseError) as info:
        parse(spec.HEDGE_MODE, answer, {}, {})
    assert info.value.retryable


def _reset(sim: Simulator, faults: list[Fault | None]) -> tuple[Any, int]:
    """Reset sub_1's key under scripted faults: (error or None, resets done by the exchange)."""
    target = sim.keys["sub_1"]
    sim.faults.script(faults, paths=[spec.RESET_SUBACCOUNT_KEY.path])

    async def main() -> Any:
        async with client(sim) as c:
            try:
                await c.reset_subaccount_key(target.key_id)
            except APIError as error:
                return error
        return None

    return asyncio.run(main()), target.resets


@pytest.mark.parametrize("fault", [Fault.GATEWAY_429, None])
def test_a_key_reset_is_retried_only_when_it_provably_never_ran(
    own_sim: Simulator, fault: Fault | None
) -> None:
    error, resets = _reset(own_sim, [fault, fault])
    assert error is None
    assert resets == 1


@pytest.mark.parametrize(
    ("fault", "ran"),
    [
        (Fault.HTTP_502, False),
        (Fault.DROP_CONNECTION, True),  # the reset ran; repeating it would reset twice
        (Fault.TRUNCATED_JSON, True),
    ],
)
def test_a_key_reset_is_never_repeated_after_an_unclear_answer(
    own_sim: Simulator, fault: Fault, ran: bool
) -> None:
    error, resets = _reset(own_sim, [fault])
    assert error is not None
    assert error.attempts == 1
    assert resets == (1 if ran else 0)
