"""Funding into daily partitions: the day-splitting logic in this process (`DailyFunding`), then
the writer process end to end (`FundingWriter`): what goes down the pipe comes back written, an
error of the writer comes back whole, and a writer that dies fails the load with how it died."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from datetime import UTC, date, datetime, time
from pathlib import Path

import pytest

from tests.warehouse.conftest import EXTRACTED_AT, funding_record
from warehouse import daily, parquet
from warehouse.daily import DailyFunding, DayOrderError, FewerRowsRefused, LoadAbandoned

# Four days, newest last; EXTRACTED_AT is the morning after D4.
D1, D2, D3, D4 = date(2024, 2, 27), date(2024, 2, 28), date(2024, 2, 29), date(2024, 3, 1)


def at(day: date, hour: int, market: str = "BTC_PERP", **fields: object) -> dict[str, object]:
    """A funding payment of ``market`` at ``hour`` of ``day``."""
    seconds = int(datetime.combine(day, time(hour), UTC).timestamp())
    return funding_record(
        market=market, fundingTime=str(seconds), rateCalculatedTime=str(seconds - 60), **fields
    )


def markets(root: Path, day: date) -> list[str] | None:
    """The markets of the day's partition, or None when it has no file."""
    rows = parquet.read_partition(root, "funding_history", day)
    return None if rows is None else sorted(rows["market"].to_pylist())


def loader(
    root: Path, days: list[date], *, allow_fewer_rows: bool = False, parent: int | None = None
) -> DailyFunding:
    return DailyFunding(
        root,
        days=days,
        extracted_at=EXTRACTED_AT,
        allow_fewer_rows=allow_fewer_rows,
        parent=parent,
    )


# --- The day-splitting logic, in this process ---------------------------------------------------


def test_a_day_is_written_once_complete_and_a_day_spanning_chunks_whole(root: Path) -> None:
    funding = loader(root, [D2, D3, D4])
    first = funding.take([at(D4, 8), at(D3, 16, "ETH_PERP")])
    assert [(d.day, d.rows) for d in first.days] == [(D4, 1)]
    assert (first.received, first.duplicates) == (2, 0)
    assert markets(root, D3) is None  # D3 may go on in the next chunk
    second = funding.take([at(D3, 8), at(D2, 8)])
    assert [(d.day, d.rows) for d in second.days] == [(D3, 2)]
    assert markets(root, D3) == ["BTC_PERP", "ETH_PERP"]
    assert markets(root, D2) is None
    last = funding.finish()
    assert [(d.day, d.rows) for d in last.days] == [(D2, 1)]
    assert markets(root, D2) == ["BTC_PERP"]


def test_every_day_of_the_range_is_replaced_those_without_records_emptied(root: Path) -> None:
    funding = loader(root, [D1, D2, D3, D4])
    assert funding.take([at(D3, 8)]).days == []
    finished = funding.finish()
    assert [(d.day, d.rows) for d in finished.days] == [(D3, 1), (D1, 0), (D2, 0), (D4, 0)]
    assert [markets(root, day) for day in (D1, D2, D3, D4)] == [[], [], ["BTC_PERP"], []]


def test_rejects_go_into_their_day_with_the_rows(root: Path) -> None:
    funding = loader(root, [D4])
    funding.take([at(D4, 8), at(D4, 9, fundingAmount="1e5")])
    [write] = funding.finish().days
    assert (write.day, write.rows, write.rejected) == (D4, 1, 1)
    assert write.reasons == ("fundingAmount: not a decimal number",)


def test_a_newer_day_after_an_older_one_is_an_order_error(root: Path) -> None:
    funding = loader(root, [D2, D3, D4])
    funding.take([at(D3, 8)])
    with pytest.raises(DayOrderError, match=f"out of order: after {D3}, {D4}"):
        funding.take([at(D4, 8)])


def test_a_day_that_begins_again_after_it_was_written_is_an_order_error(root: Path) -> None:
    funding = loader(root, [D3, D4])
    funding.take([at(D4, 8), at(D3, 8)])
    with pytest.raises(DayOrderError, match=f"{D4} began again after it was written"):
        funding.take([at(D4, 9)])


def test_a_day_outside_the_range_is_an_order_error(root: Path) -> None:
    funding = loader(root, [D3, D4])
    with pytest.raises(DayOrderError, match=f"a record of {D2} came with the window"):
        funding.take([at(D2, 8), at(D1, 8)])


def test_fewer_payments_than_the_partition_holds_are_refused_unless_allowed(root: Path) -> None:
    first = loader(root, [D4])
    first.take([at(D4, 8), at(D4, 8, "ETH_PERP")])
    first.finish()
    again = loader(root, [D4])
    again.take([at(D4, 8)])
    with pytest.raises(FewerRowsRefused, match=r"no longer lists 1 payment\(s\).*'ETH_PERP'"):
        again.finish()
    assert markets(root, D4) == ["BTC_PERP", "ETH_PERP"]  # left as it was
    allowed = loader(root, [D4], allow_fewer_rows=True)
    allowed.take([at(D4, 8)])
    allowed.finish()
    assert markets(root, D4) == ["BTC_PERP"]


def test_no_partition_is_written_once_the_parent_is_gone(root: Path) -> None:
    # This process's parent is not this process: as if the parent had died and left it.
    funding = loader(root, [D4], parent=os.getpid())
    funding.take([at(D4, 8)])
    with pytest.raises(LoadAbandoned, match="process is gone"):
        funding.finish()
    assert markets(root, D4) is None


# --- The writer process, end to end -------------------------------------------------------------


def run(
    root: Path, chunks: list[list[dict[str, object]]], days: list[date] | None = None
) -> list[daily.Progress]:
    """Each chunk through a `FundingWriter`, then its finish: every reply."""

    async def load() -> list[daily.Progress]:
        async with daily.FundingWriter(root, days=days or [D4], extracted_at=EXTRACTED_AT) as w:
            replies = [p for chunk in chunks for p in await w.take(chunk)]
            return [*replies, *await w.finish()]

    return asyncio.run(load())


def test_records_cross_the_pipe_exactly(root: Path) -> None:
    # 18 decimal places, odd text and the exact extraction time survive the pipe unchanged.
    records = [at(D4, 8, fundingAmount="-0.000000000000000001"), at(D4, 8, "ÉTH_PERP")]
    extracted = datetime(2024, 3, 2, 3, 4, 5, 678901, tzinfo=UTC)

    async def load() -> list[daily.Progress]:
        async with daily.FundingWriter(root, days=[D4], extracted_at=extracted) as writer:
            return [*await writer.take(records), *await writer.finish()]

    replies = asyncio.run(load())
    assert sum(p.received for p in replies) == 2
    [write] = [d for p in replies for d in p.days]
    assert (write.day, write.rows, write.rejected) == (D4, 1, 1)  # ÉTH_PERP is no market name
    rows = parquet.read_partition(root, "funding_history", D4)
    assert rows is not None
    assert str(rows["funding_amount"][0].as_py()) == "-1E-18"
    assert rows["extracted_at"][0].as_py() == extracted
    rejects = parquet.read_partition(root, "_rejects", ("funding_history", D4.isoformat()))
    assert rejects is not None
    assert '"market":"ÉTH_PERP"' in rejects["raw_json"][0].as_py()


def test_days_are_written_in_order_over_many_chunks(root: Path) -> None:
    chunks = [
        [at(D4, 16), at(D4, 8)],
        [at(D4, 0), at(D3, 16)],
        [at(D3, 8), at(D2, 16)],
        [at(D2, 8, "ETH_PERP")],
    ]
    replies = run(root, chunks, days=[D1, D2, D3, D4])
    written = [(d.day, d.rows) for p in replies for d in p.days]
    assert written == [(D4, 3), (D3, 2), (D2, 2), (D1, 0)]
    assert markets(root, D2) == ["BTC_PERP", "ETH_PERP"]


def test_a_record_of_another_json_type_crosses_as_sent_and_is_rejected(root: Path) -> None:
    number = at(D4, 9, fundingRate=0.0001)  # a JSON number, not a string
    [write] = [d for p in run(root, [[at(D4, 8), number]]) for d in p.days]
    assert (write.rows, write.rejected) == (1, 1)
    assert write.reasons == ("fundingRate: number where a decimal string belongs",)


def test_an_error_of_the_writer_is_raised_in_the_walk_with_its_note(root: Path) -> None:
    held = loader(root, [D4])
    held.take([at(D4, 8), at(D4, 8, "ETH_PERP")])
    held.finish()
    with pytest.raises(FewerRowsRefused, match="no longer lists 1 payment") as raised:
        run(root, [[at(D4, 8)]])
    assert "in the funding writer process" in "\n".join(raised.value.__notes__)
    assert markets(root, D4) == ["BTC_PERP", "ETH_PERP"]


def test_an_abandoned_load_ends_the_writer_before_the_context_exits(root: Path) -> None:
    writer = daily.FundingWriter(root, days=[D3, D4], extracted_at=EXTRACTED_AT)

    async def load() -> None:
        async with writer:
            await writer.take([at(D4, 8)])
            raise RuntimeError("the walk failed")

    with pytest.raises(RuntimeError, match="the walk failed"):
        asyncio.run(load())
    assert writer.exit_status == daily.ABANDONED_EXIT_STATUS
    assert (markets(root, D4), markets(root, D3)) == (None, None)


def test_the_writer_is_started_without_the_api_credentials(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHITEBIT_API_KEY", "not-a-real-key")
    tell = (
        "import os, sys; "
        "sys.exit(9 if any(k.startswith('WHITEBIT_API_') for k in os.environ) else 4)"
    )
    monkeypatch.setattr(daily, "WRITER_COMMAND", [sys.executable, "-c", tell])
    with pytest.raises(daily.WriterDied, match="exited with status 4"):
        run(root, [[at(D4, 8)]])


def test_a_writer_that_dies_fails_the_load_naming_the_signal(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer killed as the OOM killer would, while the walk goes on.
    die = "import os, signal, time; time.sleep(0.2); os.kill(os.getpid(), signal.SIGKILL)"
    monkeypatch.setattr(daily, "WRITER_COMMAND", [sys.executable, "-c", die])

    async def load() -> None:
        async with daily.FundingWriter(root, days=[D4], extracted_at=EXTRACTED_AT) as writer:
            await writer.take([at(D4, 8)])
            await asyncio.sleep(1)  # the walk fetches the next pages meanwhile
            await writer.take([at(D4, 9)])
            await writer.finish()

    with pytest.raises(daily.WriterDied, match=f"killed by signal {signal.SIGKILL.value}"):
        asyncio.run(load())
    assert markets(root, D4) is None
