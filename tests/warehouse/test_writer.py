"""The writer process end to end (`HistoryWriter`, of the funding history): what goes down the
pipe comes back written, an error of the writer comes back whole, and a writer that dies fails
the load with how it died."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Mapping
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from pipeline import spec
from tests.support.records import ACCOUNT, D1, D2, D3, D4, EXTRACTED_AT, at, markets
from warehouse import Warehouse, partitions
from warehouse import writer as funding
from warehouse.monthly import FewerRowsRefused, MonthlyLoad, MonthlyTarget, Progress


def target(root: Path, days: list[date], *, extracted_at: datetime = EXTRACTED_AT) -> MonthlyTarget:
    """The days of the account's funding history at ``root``."""
    return MonthlyTarget(
        Warehouse.open(root), spec.FUNDING, account=ACCOUNT, days=days, extracted_at=extracted_at
    )


def history_writer(
    root: Path,
    days: list[date],
    *,
    extracted_at: datetime = EXTRACTED_AT,
    environ: Mapping[str, str] | None = None,
) -> funding.HistoryWriter:
    """A writer of the account's funding history at ``root`` (its child gets this process's
    environment unless ``environ`` is given)."""
    return funding.HistoryWriter(
        target(root, days, extracted_at=extracted_at),
        environ=dict(os.environ) if environ is None else environ,
    )


def run(
    root: Path,
    chunks: list[list[dict[str, object]]],
    days: list[date] | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Progress]:
    """Each chunk through a `HistoryWriter`, then its finish: every reply."""

    async def load() -> list[Progress]:
        async with history_writer(root, days or [D4], environ=environ) as w:
            replies = [p for chunk in chunks for p in await w.take(chunk)]
            return [*replies, *await w.finish()]

    return asyncio.run(load())


def test_records_cross_the_pipe_exactly(root: Path) -> None:
    # 18 decimal places, odd text and the exact extraction time survive the pipe unchanged.
    records = [at(D4, 8, fundingAmount="-0.000000000000000001"), at(D4, 8, "ÉTH_PERP")]
    extracted = datetime(2024, 3, 2, 3, 4, 5, 678901, tzinfo=UTC)

    async def load() -> list[Progress]:
        async with history_writer(root, [D4], extracted_at=extracted) as writer:
            return [*await writer.take(records), *await writer.finish()]

    replies = asyncio.run(load())
    assert sum(p.received for p in replies) == 2
    [write] = [d for p in replies for d in p.days]
    assert (write.day, write.rows, write.rejected) == (D4, 1, 1)  # ÉTH_PERP is no market name
    wh = Warehouse.open(root)
    rows = partitions.read_partition(wh, "funding_history", (ACCOUNT, D4))
    assert rows is not None
    assert str(rows["funding_amount"][0].as_py()) == "-1E-18"
    assert rows["extracted_at"][0].as_py() == extracted
    rejects = partitions.read_partition(
        wh, "_rejects", (ACCOUNT, "funding_history", D4.isoformat())
    )
    assert rejects is not None
    assert '"market":"ÉTH_PERP"' in rejects["raw_json"][0].as_py()


def test_months_are_written_in_order_over_many_chunks(root: Path) -> None:
    chunks = [
        [at(D4, 16), at(D4, 8)],
        [at(D4, 0), at(D3, 16)],
        [at(D3, 8), at(D2, 16)],
        [at(D2, 8, "ETH_PERP")],
    ]
    replies = run(root, chunks, days=[D1, D2, D3, D4])
    written = [(d.day, d.rows) for p in replies for d in p.days]
    assert written == [(D4, 3), (D1, 0), (D2, 2), (D3, 2)]
    assert markets(root, D2) == ["BTC_PERP", "ETH_PERP"]


def test_a_record_of_another_json_type_crosses_as_sent_and_is_rejected(root: Path) -> None:
    number = at(D4, 9, fundingRate=0.0001)  # a JSON number, not a string
    [write] = [d for p in run(root, [[at(D4, 8), number]]) for d in p.days]
    assert (write.rows, write.rejected) == (1, 1)
    assert write.reasons == ("fundingRate: number where a decimal string belongs",)


def test_an_error_of_the_writer_is_raised_in_the_walk_with_its_note(root: Path) -> None:
    held = MonthlyLoad(target(root, [D4]))
    held.take([at(D4, 8), at(D4, 8, "ETH_PERP")])
    held.finish()
    with pytest.raises(FewerRowsRefused, match=r"did not list 1 record\(s\)") as raised:
        run(root, [[at(D4, 8)]])
    assert "in the writer process" in "\n".join(raised.value.__notes__)
    assert markets(root, D4) == ["BTC_PERP", "ETH_PERP"]


def test_an_abandoned_load_ends_the_writer_before_the_context_exits(root: Path) -> None:
    writer = history_writer(root, [D3, D4])

    async def load() -> None:
        async with writer:
            await writer.take([at(D4, 8)])
            raise RuntimeError("the walk failed")

    with pytest.raises(RuntimeError, match="the walk failed"):
        asyncio.run(load())
    assert writer.exit_status == funding.ABANDONED_EXIT_STATUS
    assert (markets(root, D4), markets(root, D3)) == (None, None)


def test_the_writer_is_started_with_the_environment_its_caller_built(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not this process's: the caller leaves the exchange's credentials out of it."""
    monkeypatch.setenv("WHITEBIT_API_KEY", "not-a-real-key")
    tell = (
        "import os, sys; "
        "sys.exit(9 if any(k.startswith('WHITEBIT_API_') for k in os.environ) "
        "else 4 if os.environ.get('WRITER_ENV') == 'built' else 8)"
    )
    monkeypatch.setattr(funding, "WRITER_COMMAND", [sys.executable, "-c", tell])
    built = {k: v for k, v in os.environ.items() if not k.startswith("WHITEBIT_API_")}
    with pytest.raises(funding.WriterDied, match="exited with status 4"):
        run(root, [[at(D4, 8)]], environ=built | {"WRITER_ENV": "built"})


def test_a_writer_that_dies_fails_the_load_naming_the_signal(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer killed as the OOM killer would, while the walk goes on.
    die = "import os, signal, time; time.sleep(0.2); os.kill(os.getpid(), signal.SIGKILL)"
    monkeypatch.setattr(funding, "WRITER_COMMAND", [sys.executable, "-c", die])

    async def load() -> None:
        async with history_writer(root, [D4]) as writer:
            await writer.take([at(D4, 8)])
            await asyncio.sleep(1)  # the walk fetches the next pages meanwhile
            await writer.take([at(D4, 9)])
            await writer.finish()

    with pytest.raises(funding.WriterDied, match=f"killed by signal {signal.SIGKILL.value}"):
        asyncio.run(load())
    assert markets(root, D4) is None


def test_each_load_of_one_process_has_its_own_environment_from_one_host(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host is started once, with the first load's environment; each writer it forks takes
    its own load's (the variables a store needs, as the caller built them)."""
    say = (
        "import os, sys; from warehouse import writer; "
        "writer.MonthlyLoad.take = lambda self, records: "
        "(_ for _ in ()).throw(RuntimeError(f\"{os.environ['LOAD_MARK']} {os.getppid()}\")); "
        "sys.exit(writer.main(sys.argv[1:]))"
    )
    monkeypatch.setattr(funding, "WRITER_COMMAND", [sys.executable, "-c", say])
    said = []
    for mark in ("first", "second"):
        with pytest.raises(RuntimeError) as raised:
            run(root, [[at(D4, 8)]], environ={**os.environ, "LOAD_MARK": mark})
        said.append(str(raised.value).split())
    (first, host), (second, same_host) = said
    assert (first, second) == ("first", "second")
    assert host == same_host
