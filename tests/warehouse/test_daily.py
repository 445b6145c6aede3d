"""The funding writer process: what goes down the pipe comes back written, and a writer that dies
fails the load with how it died."""

from __future__ import annotations

import asyncio
import signal
import sys
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from warehouse import daily, parquet

DAY = date(2026, 9, 1)


def _record(market: str, amount: str) -> dict[str, str]:
    return {
        "market": market,
        "fundingTime": "1788220800",  # 2026-09-01 00:00 UTC
        "fundingRate": "0.0001",
        "fundingAmount": amount,
        "positionAmount": "2",
        "settlementPrice": "100",
        "rateCalculatedTime": "1788220500",
    }


def test_records_cross_the_pipe_exactly(tmp_path: Path) -> None:
    # 18 decimal places and odd text survive the pipe between the processes unchanged.
    records = [_record("BTC_PERP", "-0.000000000000000001"), _record("ÉTH_PERP", "1")]
    extracted = datetime(2026, 9, 2, 3, 4, 5, 678901, tzinfo=UTC)

    async def load() -> list[daily.Progress]:
        async with daily.FundingWriter(tmp_path, days=[DAY], extracted_at=extracted) as writer:
            return [*await writer.take(records), *await writer.finish()]

    replies = asyncio.run(load())
    assert sum(p.received for p in replies) == 2
    [write] = [d for p in replies for d in p.days]
    assert (write.day, write.rows, write.rejected) == (DAY, 1, 1)  # ÉTH_PERP is no market name
    rows = parquet.read_partition(tmp_path, "funding_history", DAY)
    assert rows is not None
    assert str(rows["funding_amount"][0].as_py()) == "-1E-18"
    assert rows["extracted_at"][0].as_py() == extracted


def test_a_chunk_arrow_cannot_hold_crosses_as_json_and_is_rejected_as_sent(
    tmp_path: Path,
) -> None:
    number = {**_record("BTC_PERP", "1"), "fundingRate": 0.0001}  # a JSON number, not a string
    records = [_record("ETH_PERP", "2"), number]

    async def load() -> list[daily.Progress]:
        async with daily.FundingWriter(tmp_path, days=[DAY], extracted_at=datetime.now(UTC)) as w:
            return [*await w.take(records), *await w.finish()]

    [write] = [d for p in asyncio.run(load()) for d in p.days]
    assert (write.rows, write.rejected) == (1, 1)
    assert write.reasons == ("fundingRate: number where a decimal string belongs",)


def test_a_writer_that_dies_fails_the_load_naming_the_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer killed as the OOM killer would, while the walk goes on.
    die = "import os, signal, time; time.sleep(0.2); os.kill(os.getpid(), signal.SIGKILL)"
    monkeypatch.setattr(daily, "WRITER_COMMAND", [sys.executable, "-c", die])

    async def load() -> None:
        async with daily.FundingWriter(
            tmp_path, days=[DAY], extracted_at=datetime.now(UTC)
        ) as writer:
            await writer.take([_record("BTC_PERP", "1")])
            await asyncio.sleep(1)  # the walk fetches the next pages meanwhile
            await writer.take([_record("BTC_PERP", "2")])
            await writer.finish()

    with pytest.raises(daily.WriterDied, match=f"killed by signal {signal.SIGKILL.value}"):
        asyncio.run(load())
    assert parquet.read_partition(tmp_path, "funding_history", DAY) is None
