"""Retries under each fault switch of the simulator, bounded, re-signed, and never for a write
that may have run."""

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
    RetryPolicy,
    ServerError,
    TransportTimeout,
    ValidationError,
    WalkReport,
)
from tests.whitebit.conftest import Watching, client, raises

FUNDING = spec.FUNDING_HISTORY.path
RETRIED = [f for f in Fault if f is not Fault.SLOW]


def _nonces(requests: list[httpx.Request]) -> list[str]:
    return [orjson.loads(base64.b64decode(r.headers["X-TXC-PAYLOAD"]))["nonce"] for r in requests]


@pytest.mark.parametrize("fault", RETRIED, ids=lambda f: f.value)
def test_each_fault_is_retried_with_a_fresh_nonce(own_sim: Simulator, fault: Fault) -> None:
    own_sim.faults.script([fault, fault], paths=[FUNDING])
    watch = Watching()

    async def main() -> None:
        report = WalkReport("test")
        async with client(own_sim, transport=watch) as c:
            page = await c.call(spec.FUNDING_HISTORY, {"limit": 10}, report=report)
        assert page["records"] == own_sim.dataset.funding.newest_first()[:10]
        assert report.retries == 2
        assert report.rate_limited == (2 if fault is Fault.GATEWAY_429 else 0)

    asyncio.run(main())
    assert len(watch.sent) == 3
    assert len(set(_nonces(watch.sent))) == 3
    assert own_sim.faults.injected[fault] == 2


def test_a_slow_answer_is_retried_after_the_timeout(own_sim: Simulator) -> None:
    own_sim.faults.slow_seconds = 0.4
    own_sim.faults.script([Fault.SLOW], paths=[FUNDING])

    async def main() -> None:
        report = WalkReport("test")
        async with client(own_sim, timeout=0.15) as c:
            await c.call(spec.FUNDING_HISTORY, {"limit": 3}, report=report)
        assert report.retries == 1

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
