"""Pacing to the rate budgets, bounded concurrency and nonces under concurrency."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import multiprocessing
import os
import struct
import tempfile
import threading
import time
from collections.abc import AsyncGenerator
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any, NamedTuple, cast

import httpx
import pytest

from pipeline import spec
from pipeline.simulator import (
    DEFAULT_SEED,
    Dataset,
    Scale,
    SimClock,
    Simulator,
    SpawnedSimulator,
    spawn,
)
from pipeline.simulator._keys import KeyStore
from pipeline.whitebit import AsyncWhiteBIT, Credentials, Pacer, RateLimitError, WalkStats, _pacing
from pipeline.whitebit._auth import NonceSource
from pipeline.whitebit._config import NONCE_MAX_LEAD_MS, PACING_BURST
from tests.support.client import FAST_RETRIES, Watching, client, collect
from tests.support.simulated import FROZEN_AT

FUNDING_GROUP = spec.FUNDING_HISTORY.budget.group
#: A budget small enough that a walk outlasts its window many times over.
SMALL_BUDGET = spec.RateBudget(FUNDING_GROUP, 400, 2.0)
#: The walks' data: 54,900 funding entries, some 550 pages.
WALK_SCALE = "markets=30,days=600"


def _rate_limited(sim: Simulator) -> int:
    return sim.state.answers_with(429)


def test_a_paced_walk_runs_near_the_budget_and_never_over_it() -> None:
    """400 requests per 2 s: the walk outlasts the window, so the window is what is tested. The
    simulator runs in its own process, so its pace is not the test process's.

    A pacer cannot make up for time this process loses (a stall on a busy machine), so the walk
    runs up to three times and the best rate counts; every run must be free of 429s."""
    dataset = Dataset(DEFAULT_SEED, Scale.parse(WALK_SCALE), SimClock(FROZEN_AT))
    truth = dataset.funding.newest_first()
    with spawn(scale=WALK_SCALE, frozen_at=FROZEN_AT) as s:
        s.control("limits", budgets={FUNDING_GROUP: [400, 2.0]})

        async def main() -> WalkStats:
            pacer = Pacer([SMALL_BUDGET])
            async with client(s, pacing=pacer) as c:
                walk = c.walk(spec.FUNDING)
                assert await collect(walk) == truth
            return walk.stats

        # The session's large simulators hold millions of references: a full collection that
        # traverses them would time this process, not the pacer.
        gc.collect()
        gc.freeze()
        rates = []
        try:
            for _ in range(3):
                stats = asyncio.run(main())
                assert stats.pages > 400  # more than one window's budget
                assert stats.rate_limited == 0
                rates.append(stats.pages_per_s)
                if stats.pages_per_s >= 0.95 * 200:
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
            stats = WalkStats("over")
            with pytest.raises(RateLimitError):
                await c.call(spec.HEDGE_MODE, {}, stats=stats)
            assert stats.rate_limited == stats.retries + 1 == FAST_RETRIES.max_retries + 1

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


# --- one budget for every process of the machine ------------------------------------------------


class _Run(NamedTuple):
    """What one run in a process of its own did; times by `time.monotonic`, the machine's."""

    began: float
    ended: float
    pages: int
    rows: int
    rate_limited: int


def _walk_elsewhere(
    url: str,
    role: str,
    pacing_dir: str,
    seconds: float | None,
    start: Barrier,
    results: Queue[_Run],
) -> None:
    """One run of the machine, in a process of its own: walks funding history with the key of
    ``role``, paced to `SMALL_BUDGET` through the files of ``pacing_dir``, for ``seconds`` or to
    the end."""
    key = KeyStore(DEFAULT_SEED)[role].credentials

    async def main() -> _Run:
        credentials = Credentials(key.api_key, key.api_secret)
        pacer = Pacer([SMALL_BUDGET], origin=url, directory=pacing_dir)
        async with AsyncWhiteBIT(credentials, base_url=url, pacing=pacer, retry=FAST_RETRIES) as c:
            walk = c.walk(spec.FUNDING)
            start.wait()  # before the walk's first request: the other run is ready too
            began = time.monotonic()
            with contextlib.suppress(RateLimitError):  # retries spent: counted all the same
                async with contextlib.aclosing(
                    cast(AsyncGenerator[Any, None], aiter(walk))
                ) as pages:
                    async for _ in pages:
                        if seconds is not None and time.monotonic() - began > seconds:
                            break
            stats = walk.stats
            return _Run(began, time.monotonic(), stats.pages, stats.rows, stats.rate_limited)

    results.put(asyncio.run(main()))


def _runs_at_once(
    s: SpawnedSimulator, pacing_dirs: list[Path], seconds: float | None = None
) -> list[_Run]:
    """A run per pacing directory, each in a process of its own and with a key of its own
    (two accounts), all from this machine's address, started together."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(len(pacing_dirs))
    results: Queue[_Run] = context.Queue()
    runs = [
        context.Process(
            target=_walk_elsewhere,
            args=(s.url, role, str(directory), seconds, start, results),
        )
        for role, directory in zip(("partner", "read_only"), pacing_dirs, strict=False)
    ]
    for run in runs:
        run.start()
    try:
        done = [results.get(timeout=60) for _ in runs]
    finally:
        for run in runs:
            run.join(timeout=10)
            if run.is_alive():
                run.kill()
    assert [run.exitcode for run in runs] == [0] * len(runs)
    return done


@pytest.mark.slow  # seconds of pacing in processes
def test_runs_in_separate_processes_share_the_budget_and_use_most_of_it(tmp_path: Path) -> None:
    """Two runs of two accounts at once, from one address: together never over the budget, and
    together near it (the rate a run alone gets, shared)."""
    dataset = Dataset(DEFAULT_SEED, Scale.parse(WALK_SCALE), SimClock(FROZEN_AT))
    entries = len(dataset.funding.newest_first())
    with spawn(scale=WALK_SCALE, frozen_at=FROZEN_AT) as s:
        s.control("limits", budgets={FUNDING_GROUP: [SMALL_BUDGET.requests, SMALL_BUDGET.period_s]})
        runs = _runs_at_once(s, [tmp_path, tmp_path])
        answered = s.stats()["answered"]
    assert not [what for what in answered if what.endswith(" 429")]
    assert [(run.rows, run.rate_limited) for run in runs] == [(entries, 0)] * 2
    pages = sum(run.pages for run in runs)
    assert pages > 2 * SMALL_BUDGET.requests  # the window is what is tested, not the burst
    elapsed = max(run.ended for run in runs) - min(run.began for run in runs)
    budget_rate = 0.98 * SMALL_BUDGET.per_second
    assert pages / elapsed >= 0.85 * budget_rate, (pages / elapsed, runs)


@pytest.mark.slow  # seconds of pacing in processes
def test_runs_that_do_not_share_a_pacing_directory_exceed_the_budget(tmp_path: Path) -> None:
    """The check on the test above: apart, each run takes the whole budget, and the exchange
    refuses what is over."""
    with spawn(scale=WALK_SCALE, frozen_at=FROZEN_AT) as s:
        s.control("limits", budgets={FUNDING_GROUP: [SMALL_BUDGET.requests, SMALL_BUDGET.period_s]})
        runs = _runs_at_once(s, [tmp_path / "a", tmp_path / "b"], seconds=2.5)
        answered = s.stats()["answered"]
    assert sum(n for what, n in answered.items() if what.endswith(" 429")) > 0
    assert sum(run.rate_limited for run in runs) > 0


def test_pacers_of_one_address_and_budgets_share_one_file(tmp_path: Path) -> None:
    def path(*budgets: spec.RateBudget, origin: str | None = "https://whitebit.com") -> Path | None:
        return Pacer(budgets, origin=origin, directory=tmp_path).path

    assert path() == path(origin="HTTPS://WhiteBIT.com:443/api") is not None
    assert path() != path(origin="http://whitebit.com")
    assert path() != path(origin="https://whitebit.com:8443")
    # Budgets overridden (tests) pace apart from the exchange's own.
    assert path() != path(SMALL_BUDGET)
    assert path(SMALL_BUDGET) == path(SMALL_BUDGET)
    assert path(origin=None) is None  # a pacer of its own
    with pytest.raises(ValueError, match="exchange address"):
        Pacer(origin="whitebit.com")


def test_the_pacing_directory_is_the_users_unless_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client reads no variable: the settings name the directory (WHITEBIT_PACING_DIR).
    monkeypatch.setenv("WHITEBIT_PACING_DIR", str(tmp_path / "not-read"))
    path = Pacer(origin="https://whitebit.com").path
    assert path is not None
    assert path.parent == Path(tempfile.gettempdir()) / f"whitebit-pacing-{os.getuid()}"
    assert Pacer.shared("https://whitebit.com").path == path
    path = Pacer(origin="https://whitebit.com", directory=tmp_path).path
    assert path is not None
    assert path.parent == tmp_path
    assert Pacer.shared("https://whitebit.com", directory=tmp_path).path == path


def test_two_pacers_of_one_file_take_turns(tmp_path: Path) -> None:
    """As two processes would: what one takes, the other waits for."""
    budget = spec.RateBudget(FUNDING_GROUP, 10, 1.0)  # a burst of 1, then one per 0.113 s
    op = spec.FUNDING_HISTORY
    one, other = (Pacer([budget], origin="http://127.0.0.1:1", directory=tmp_path) for _ in "12")
    alone = Pacer([budget])
    interval = 1 / one.rate(op)

    async def waited(pacer: Pacer) -> float:
        started = time.monotonic()
        await pacer.acquire(op)
        return time.monotonic() - started

    async def main() -> list[float]:
        return [await waited(one), await waited(other), await waited(alone)]

    first, second, apart = asyncio.run(main())
    assert first < 0.05
    assert interval * 0.9 <= second < interval * 2
    assert apart < 0.05  # a pacer of its own shares nothing


def test_a_file_taken_from_its_directory_is_made_again_and_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporary directory's cleaner may take a file no request touched for days: a process
    that still holds it opens the new one, and shares it with the others again."""
    monkeypatch.setattr(_pacing, "_LOOK_AGAIN_S", 0.0)  # look before every request
    budget = spec.RateBudget(FUNDING_GROUP, 10, 1.0)
    op = spec.FUNDING_HISTORY
    one, other = (Pacer([budget], origin="http://127.0.0.1:1", directory=tmp_path) for _ in "12")
    assert one.path is not None
    interval = 1 / one.rate(op)

    async def waited(pacer: Pacer) -> float:
        started = time.monotonic()
        await pacer.acquire(op)
        return time.monotonic() - started

    async def main() -> None:
        await waited(one)
        await waited(other)  # both have the file open
        assert one.path is not None
        one.path.unlink()
        await asyncio.sleep(2 * interval)  # what the old file holds is past
        assert await waited(one) < 0.05
        assert one.path.exists()  # made again
        assert interval * 0.9 <= await waited(other)  # waits for what `one` took from it

    asyncio.run(main())


def test_a_time_stored_before_a_restart_is_forgotten(tmp_path: Path) -> None:
    """A stored arrival time further ahead than any waiters could have pushed it (the machine
    restarted and its monotonic clock began again, or the file holds garbage) is reset to now;
    one merely ahead is waited for."""
    budget = spec.RateBudget(FUNDING_GROUP, 10, 1.0)
    op = spec.FUNDING_HISTORY
    pacer = Pacer([budget], origin="http://127.0.0.1:1", directory=tmp_path)
    assert pacer.path is not None

    def store(tat: float) -> None:
        assert pacer.path is not None
        # Every group's slot, and more: the layout is the pacer's own business.
        pacer.path.write_bytes(struct.pack("=d", tat) * 64)

    async def waited() -> float:
        started = time.monotonic()
        await asyncio.wait_for(pacer.acquire(op), 2.0)  # not an hour
        return time.monotonic() - started

    async def main() -> None:
        await pacer.acquire(op)  # makes the file
        for garbage in (time.monotonic() + 3_600, math.inf, math.nan, -1.0):
            store(garbage)
            assert await waited() < 0.05
        store(time.monotonic() + 0.3)  # the waiters of a busy machine: honoured
        assert 0.25 <= await waited() < 0.6

    asyncio.run(main())


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
            await collect(c.walk(spec.FUNDING))

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
    stats = WalkStats("strict")

    async def main() -> None:
        async with client(sim, "no_b2b", nonce_window=False, max_concurrency=8) as c:
            await asyncio.gather(*(c.call(spec.HEDGE_MODE, {}, stats=stats) for _ in range(100)))

    asyncio.run(main())
    assert (stats.retries, _rate_limited(sim) - before) == (0, 0)


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


def test_a_waiter_cancelled_before_its_turn_gives_its_slot_to_the_next(tmp_path: Path) -> None:
    """A walk cancels the pages it fetched ahead once a slice ends: their slots go to the next
    requests of the process, not to waste. A budget of 10 per 10 s spaces slots over a second,
    so the slot given back is still ahead however slow the machine."""
    budget = spec.RateBudget(FUNDING_GROUP, 10, 10.0)
    operation = spec.FUNDING_HISTORY

    async def main() -> int:
        pacer = Pacer([budget], origin="http://127.0.0.1:9", directory=tmp_path)
        reserved = 0
        reserve = pacer._reserve

        def counted(cell: Any) -> float:
            nonlocal reserved
            reserved += 1
            return reserve(cell)

        pacer._reserve = counted  # type: ignore[method-assign]
        for _ in range(pacer.burst_of(operation)):
            await pacer.acquire(operation)  # the opening burst: at once
        waiting = asyncio.create_task(pacer.acquire(operation))
        await asyncio.sleep(0.05)  # it took the next slot, a second ahead, and waits for it
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        await pacer.acquire(operation)  # the slot given back: no new one taken
        return reserved

    assert asyncio.run(main()) == Pacer([budget]).burst_of(operation) + 1
