"""Pacing to the rate budgets, bounded concurrency and nonces under concurrency."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import httpx
import pytest

from pipeline import spec
from pipeline.simulator import DEFAULT_SEED, Dataset, Scale, SimClock, Simulator, spawn
from pipeline.whitebit import Pacer, RateLimitError, WalkReport
from pipeline.whitebit._auth import NonceSource
from pipeline.whitebit._config import NONCE_MAX_LEAD_MS, PACING_BURST
from tests.support.client import FAST_RETRIES, Watching, client, collect
from tests.support.simulated import FROZEN_AT

FUNDING_GROUP = spec.FUNDING_HISTORY.budget.group


def _rate_limited(sim: Simulator) -> int:
    return sim.state.answers_with(429)


def test_a_paced_walk_runs_near_the_budget_and_never_over_it() -> None:
    """400 requests per 2 s: the walk outlasts the window, so the window is what is tested. The
    simulator runs in its own process, so its pace is not the test process's.

    A pacer cannot make up for time this process loses (a stall on a busy machine), so the walk
    runs up to three times and the best rate counts; every run must be free of 429s."""
    scale = "markets=30,days=600"
    truth = Dataset(DEFAULT_SEED, Scale.parse(scale), SimClock(FROZEN_AT)).funding.newest_first()
    with spawn(scale=scale, frozen_at=FROZEN_AT) as s:
        s.control("limits", budgets={FUNDING_GROUP: [400, 2.0]})

        async def main() -> WalkReport:
            pacer = Pacer([spec.RateBudget(FUNDING_GROUP, 400, 2.0)])
            async with client(s, pacing=pacer) as c:
                walk = c.walk_funding()
                assert await collect(walk) == truth
            return walk.report

        # The session's large simulators hold millions of references: a full collection that
        # traverses them would time this process, not the pacer.
        gc.collect()
        gc.freeze()
        rates = []
        try:
            for _ in range(3):
                report = asyncio.run(main())
                assert report.pages > 400  # more than one window's budget
                assert report.rate_limited == 0
                rates.append(report.pages_per_s)
                if report.pages_per_s >= 0.95 * 200:
                    break
                time.sleep(2.0)  # let the window empty before the next run
        finally:
            gc.unfreeze()
        answered = s.stats()["answered"]
    assert max(rates) >= 0.95 * 200, rates
    assert not [what for what in answered if what.endswith(" 429")]


def test_one_pacer_holds_every_client_and_every_operation_of_a_group(own_sim: Simulator) -> None:
    """Investments history and main balance draw from one "main-account" budget."""
    assert spec.INVESTMENTS_HISTORY.budget.group == spec.MAIN_BALANCE.budget.group
    group = spec.MAIN_BALANCE.budget.group
    own_sim.limits.set_budget(group, 60, 1.0)
    pacer = Pacer([spec.RateBudget(group, 60, 1.0)])

    async def main() -> float:
        async with client(own_sim, pacing=pacer) as a, client(own_sim, pacing=pacer) as b:
            started = asyncio.get_running_loop().time()
            await asyncio.gather(
                *(a.main_balance() for _ in range(45)),
                *(b.investments_history(limit=5) for _ in range(45)),
            )
            return asyncio.get_running_loop().time() - started

    elapsed = asyncio.run(main())
    assert _rate_limited(own_sim) == 0
    assert elapsed >= (90 - pacer.burst_of(spec.MAIN_BALANCE)) / pacer.rate(spec.MAIN_BALANCE)


def test_without_pacing_the_exchange_refuses_what_is_over(own_sim: Simulator) -> None:
    own_sim.limits.set_budget(spec.HEDGE_MODE.budget.group, 10, 60.0)

    async def main() -> None:
        async with client(own_sim) as c:
            await asyncio.gather(*(c.hedge_mode() for _ in range(10)))
            report = WalkReport("over")
            with pytest.raises(RateLimitError):
                await c.call(spec.HEDGE_MODE, {}, report=report)
            assert report.rate_limited == report.retries + 1 == FAST_RETRIES.max_retries + 1

    asyncio.run(main())


def test_small_budgets_get_a_small_burst() -> None:
    pacer = Pacer([spec.RateBudget("main-account", 60, 1.0)])
    assert pacer.burst_of(spec.MAIN_BALANCE) == 1
    assert Pacer().burst_of(spec.FUNDING_HISTORY) == PACING_BURST
    assert Pacer().burst_of(spec.INVESTMENTS_HISTORY) == 10  # 2% of 1,000, halved
    for budget in (2, 10, 60, 100, 400, 1_000, 10_000):
        paced = Pacer([spec.RateBudget("main-account", budget, 10.0)])
        op = spec.MAIN_BALANCE
        most_in_a_window = paced.burst_of(op) + paced.rate(op) * 10.0
        assert most_in_a_window < budget
        if budget >= 100:
            assert most_in_a_window <= budget * 0.985


def test_concurrency_is_bounded(sim: Simulator) -> None:
    in_flight, most = [0], [0]

    async def sent(request: httpx.Request) -> None:
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        await asyncio.sleep(0.005)

    async def answered(request: httpx.Request, response: httpx.Response) -> None:
        in_flight[0] -= 1

    async def main() -> None:
        watch = Watching(on_request=sent, on_response=answered)
        async with client(sim, max_concurrency=3, transport=watch) as c:
            await asyncio.gather(*(c.hedge_mode() for _ in range(30)))
            await collect(c.walk_funding())

    asyncio.run(main())
    assert most[0] == 3


def test_window_nonces_hold_under_concurrency(sim: Simulator) -> None:
    before = _rate_limited(sim)

    async def main() -> None:
        async with client(sim, max_concurrency=16) as c:
            await asyncio.gather(*(c.trading_balance(ticker="BTC") for _ in range(300)))

    asyncio.run(main())
    assert _rate_limited(sim) == before


def test_strict_nonces_are_sent_one_at_a_time_in_order(sim: Simulator) -> None:
    """Without the window, a nonce must exceed the last accepted: concurrent requests would
    overtake each other and be refused, so the client sends them in order."""
    before = _rate_limited(sim)
    report = WalkReport("strict")

    async def main() -> None:
        async with client(sim, "no_b2b", nonce_window=False, max_concurrency=8) as c:
            await asyncio.gather(*(c.call(spec.HEDGE_MODE, {}, report=report) for _ in range(100)))

    asyncio.run(main())
    assert (report.retries, _rate_limited(sim) - before) == (0, 0)


def test_nonces_increase_strictly_across_threads() -> None:
    source = NonceSource()
    taken: list[list[int]] = [[] for _ in range(4)]

    def take(out: list[int]) -> None:
        out.extend(source.take()[0] for _ in range(5_000))

    threads = [threading.Thread(target=take, args=(out,)) for out in taken]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [n for out in taken for n in out]
    assert len(set(everything)) == len(everything)
    assert all(out == sorted(out) for out in taken)


def test_nonces_never_run_further_ahead_than_the_window_allows() -> None:
    now_ms = 1_790_000_000_000
    source = NonceSource(clock_ns=lambda: now_ms * 1_000_000)
    for _ in range(NONCE_MAX_LEAD_MS + 1):
        nonce, wait = source.take()
        assert wait == 0
        assert nonce - now_ms <= NONCE_MAX_LEAD_MS
    nonce, wait = source.take()
    # Past the lead, the caller is told to wait until the clock has caught up.
    assert nonce - now_ms - wait * 1000 <= NONCE_MAX_LEAD_MS
    assert wait > 0
