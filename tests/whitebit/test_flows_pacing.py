"""Pacing an operation with a budget of its own inside its group's: the deposit and withdrawal
history, 200 per 10 s of its own inside main-account's 1000. Each run lasts some 3 s against a
simulator in a process of its own (so that its pace is not this process's), which enforces both
budgets and counts what it answered. Rates are bounded from above only: how close a walk comes
to its budget is a benchmark's to say."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline import spec
from pipeline.simulator import SpawnedSimulator, spawn
from pipeline.whitebit import OffsetWindowWalk, Pacer
from tests.support.client import client
from tests.support.simulated import FROZEN_AT

pytestmark = [pytest.mark.serial, pytest.mark.slow]  # it measures time, run by run for seconds

#: Some 25,000 deposits and withdrawals: more pages than a run of 3 s reads at 20 a second.
FLOWS_SCALE = "markets=1,days=4200,fills=960"
DEPOSITS = spec.MAIN_ACCOUNT_HISTORY
GROUP = DEPOSITS.budget
assert DEPOSITS.endpoint_budget is not None  # the budget of its own these tests are about
OWN = DEPOSITS.endpoint_budget
RUN_S = 3.0


@pytest.fixture(scope="module")
def flows_sim() -> Iterator[SpawnedSimulator]:
    with spawn(scale=FLOWS_SCALE, frozen_at=FROZEN_AT) as s:

        async def warm() -> None:
            # The first request builds the account's ledger (some seconds): not in a run.
            async with client(s) as c:
                await c.call(DEPOSITS, {"limit": 1})

        asyncio.run(warm())
        yield s


def _budgets(sim: SpawnedSimulator, *budgets: spec.RateBudget) -> Pacer:
    """The simulator's budgets set (each one's window emptied), its counts forgotten, and a
    pacer of its own to them."""
    sim.control("limits", budgets={b.group: [b.requests, b.period_s] for b in budgets})
    sim.stats(reset=True)
    return Pacer(budgets)


async def _for_a_while(*work: Any) -> None:
    """Run these for `RUN_S` seconds, then stop them."""
    tasks = [asyncio.ensure_future(w) for w in work]
    await asyncio.sleep(RUN_S)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _answered(stats: Any, op: spec.Operation, status: int = 200) -> int:
    return int(stats["answered"].get(f"{op.path} {status}", 0))


def _span(stats: Any, op: spec.Operation) -> float:
    return float(stats["spans"].get(op.path, 0.0))


def test_a_deposits_walk_keeps_to_its_own_budget_without_a_429(
    flows_sim: SpawnedSimulator,
) -> None:
    """The exchange's budgets: the walk's requests stay within 200 per 10 s, not the 1000 of
    its group."""
    pacer = _budgets(flows_sim, GROUP, OWN)

    async def walk() -> None:
        async with client(flows_sim, pacing=pacer) as c:
            async for _ in OffsetWindowWalk(
                c, spec.DEPOSITS_WITHDRAWALS, on_window_exceeded="raise"
            ):
                pass

    asyncio.run(_for_a_while(walk()))
    stats = flows_sim.stats()
    assert stats["rate_limited"] == 0
    requests, span = _answered(stats, DEPOSITS), _span(stats, DEPOSITS)
    assert requests > pacer.burst_of(DEPOSITS) + 10  # paced, yet walking
    # Its burst, then at most its own budget's rate: the group's would allow five times more.
    assert requests <= pacer.burst_of(DEPOSITS) + span * OWN.per_second + 1


#: (group's, own) budgets per 10 s, and whether the main balance (the same group) is asked as
#: often as its pacer allows or twice a second. Each fails a pacer that spends only one of them.
CASES = {
    "own binds": (300, 40, False),
    "group binds": (20, 60, True),
}


@pytest.mark.parametrize("case", CASES)
def test_a_request_spends_both_budgets_and_waits_for_both(
    flows_sim: SpawnedSimulator, case: str
) -> None:
    group_requests, own_requests, busy = CASES[case]
    group = spec.RateBudget(GROUP.group, group_requests)
    own = spec.RateBudget(OWN.group, own_requests)
    pacer = _budgets(flows_sim, group, own)

    async def main() -> None:
        async with client(flows_sim, pacing=pacer) as c:

            async def walk() -> None:
                # Five years back: page after page of the unsplit slice, then of each method,
                # none waiting for the main balance's tickers (a split this deep needs none).
                since = int(FROZEN_AT) - 5 * 365 * 86_400
                async for _ in OffsetWindowWalk(
                    c, spec.DEPOSITS_WITHDRAWALS, since=since, on_window_exceeded="raise"
                ):
                    pass

            async def balances() -> None:
                while True:
                    await c.main_balance()
                    if not busy:
                        await asyncio.sleep(0.5)

            await _for_a_while(walk(), balances(), *(balances() for _ in range(3 if busy else 0)))

    asyncio.run(main())
    stats = flows_sim.stats()
    assert stats["rate_limited"] == 0
    deposits, balances = _answered(stats, DEPOSITS), _answered(stats, spec.MAIN_BALANCE)
    assert deposits > 0
    assert balances > 0
    assert deposits <= own.requests
    assert deposits + balances <= group.requests
