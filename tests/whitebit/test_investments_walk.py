"""The investments walk: every investment once, splitting slices that fill the offset window,
and saying so when a split still does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pipeline import spec
from pipeline.simulator import Fault, Simulator
from pipeline.whitebit import OffsetWindowExceeded
from tests.support.client import client, collect, raises

REACHABLE = 10_100  # offsets 0..10000 of pages of 100


def _ids(rows: list[Any]) -> list[str]:
    return [r["id"] for r in rows]


def test_every_investment_once_without_a_split(sim: Simulator) -> None:
    async def main() -> None:
        async with client(sim) as c:
            walk = c.walk(spec.INVESTMENTS)
            rows = await collect(walk)
        truth = sim.dataset.investments.all()
        assert sorted(_ids(rows)) == sorted(_ids(truth))
        assert {r["id"]: r for r in rows} == {r["id"]: r for r in truth}
        stats = walk.stats
        assert stats.slices == ["status=1", "status=2"]
        assert (stats.rows, stats.complete, stats.duplicates_dropped) == (len(truth), True, 0)

    asyncio.run(main())


def test_the_offset_window_is_split_by_ticker_and_reaches_everything(large_sim: Simulator) -> None:
    data = large_sim.dataset.investments
    assert data.count(status=1) > REACHABLE  # the window bites at this scale

    async def main() -> None:
        async with client(large_sim) as c:
            walk = c.walk(spec.INVESTMENTS)
            rows = await collect(walk)
        assert len(rows) == len(set(_ids(rows))) == len(data.all())
        assert set(_ids(rows)) == set(data.ids)
        stats = walk.stats
        assert stats.complete
        assert "status=1,ticker=BTC" in stats.slices
        assert stats.duplicates_dropped > 0  # rows of the first pass, met again in the split

    asyncio.run(main())


def test_a_slice_too_large_even_when_split_is_raised_after_the_rest(
    too_large_sim: Simulator,
) -> None:
    active = too_large_sim.dataset.investments.count(status=1)
    assert active > REACHABLE

    async def main() -> None:
        rows: list[Any] = []
        async with client(too_large_sim) as c:
            walk = c.walk(spec.INVESTMENTS)
            with raises(OffsetWindowExceeded) as info:
                async for page in walk:
                    rows.extend(page)
        assert (info.value.slice, info.value.reachable) == ("status=1,ticker=USDT", REACHABLE)
        assert "status=1,ticker=USDT" in str(info.value)
        # Everything reachable was yielded before the walk said what it could not reach.
        closed = too_large_sim.dataset.investments.count(status=2)
        assert len(rows) == len(set(_ids(rows))) == REACHABLE + closed
        assert not walk.stats.complete

    asyncio.run(main())


def test_a_slice_too_large_can_be_reported_instead(too_large_sim: Simulator) -> None:
    async def main() -> None:
        async with client(too_large_sim) as c:
            walk = c.walk(spec.INVESTMENTS, on_window_exceeded="report")
            rows = await collect(walk)
        [incomplete] = walk.stats.incomplete_slices
        assert (incomplete.slice, incomplete.reachable) == ("status=1,ticker=USDT", REACHABLE)
        assert len(rows) == REACHABLE + too_large_sim.dataset.investments.count(status=2)

    asyncio.run(main())


def test_tickers_unknown_to_the_exchange_are_skipped_and_noted(sim_at: Any) -> None:
    s = sim_at("investments=20000,tickers=4")

    async def main() -> None:
        async with client(s) as c:
            walk = c.walk(spec.INVESTMENTS)
            rows = await collect(walk)
        assert set(_ids(rows)) == set(s.dataset.investments.ids)
        # The main balance holds tickers no plan uses; the exchange refuses them as filters.
        assert any("XLM" in note for note in walk.stats.notes)

    asyncio.run(main())


#: Faults that leave the data as it is: those of transport and gateway, answers cut short, and a
#: field added (tolerated, and noted). A field missing or of another type changes a record: the
#: warehouse rejects it (tests/whitebit/test_answers.py).
DATA_KEPT = [f for f in Fault if f not in (Fault.MISSING_FIELD, Fault.NUMBER_FOR_STRING)]


def test_with_a_fifth_of_answers_faulted_the_rows_are_exactly_the_same(sim_at: Any) -> None:
    s = sim_at("investments=20000,tickers=4")
    truth = {r["id"]: r for r in s.dataset.investments.all()}
    s.faults.set(0.2, DATA_KEPT, seed=5, slow_seconds=0.05)

    async def main() -> None:
        async with client(s) as c:
            walk = c.walk(spec.INVESTMENTS)
            rows = await collect(walk)
        assert len(rows) == len(truth)
        drifted = [r for r in rows if r.pop("unexpectedField", None) is not None]
        assert drifted  # the field added is passed on, as received
        assert {r["id"]: r for r in rows} == truth
        assert walk.stats.retries > 0
        # In a record; or in the envelope, where a page had no record to add it to.
        unknown = walk.stats.unknown_fields
        assert unknown["records[].unexpectedField"] == '"drift"'
        assert unknown.keys() <= {"records[].unexpectedField", "unexpectedField"}
        assert any(",ticker=" in name for name in walk.stats.slices)

    asyncio.run(main())
    assert set(s.faults.injected) == set(DATA_KEPT)


def test_a_refusal_other_than_an_unknown_ticker_stops_the_walk(sim: Simulator) -> None:
    from pipeline.whitebit import PermissionDeniedError

    async def main() -> None:
        async with client(sim, "no_b2b") as c:
            with raises(PermissionDeniedError):
                await collect(c.walk(spec.INVESTMENTS))

    asyncio.run(main())


@pytest.mark.parametrize("mode", ["sometimes"])
def test_on_window_exceeded_is_checked(sim: Simulator, mode: str) -> None:
    async def main() -> None:
        async with client(sim) as c:
            with pytest.raises(ValueError, match="'raise' or 'report'"):
                c.walk(spec.INVESTMENTS, on_window_exceeded=mode)  # type: ignore[arg-type]

    asyncio.run(main())


def test_the_walk_takes_its_bounds_from_the_spec(sim: Simulator) -> None:
    async def main() -> None:
        async with client(sim) as c:
            window = c.walk(spec.INVESTMENTS).window
        assert window.limit == spec.INVESTMENTS_HISTORY.param("limit").maximum
        assert window.max_offset == spec.INVESTMENTS_HISTORY.param("offset").maximum
        assert window.offsets_from(0)[:2] == [0, window.limit]
        assert window.offsets_from(0)[-1] == window.max_offset
        assert window.offsets_from(window.max_offset) == [window.max_offset]
        assert window.reachable == REACHABLE

    asyncio.run(main())
