"""The warehouse section of `make bench`: exact decimals, Parquet writes, partition pruning.

Side by side in one run: our vectorized decimal parsing against a row-by-row
``decimal.Decimal`` conversion in pandas of the same strings; funding normalization end to end;
Parquet partition writes; and a one-day query over the Hive-partitioned view against the same
query over one unpartitioned Parquet file.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Final

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench import Figure
from warehouse import catalog, normalize, parquet

SECTION: Final = "warehouse"
RECORDS: Final = 1_000_000
#: The row-by-row baseline is slow; it converts this many strings and is reported per second.
BASELINE_VALUES: Final = 200_000
DAYS: Final = 60
DAY_START: Final = 1_704_067_200  # 2024-01-01T00:00:00Z
REPEATS: Final = 5
#: The pruning figure queries this many copies of the normalized days, one after the other.
HISTORY_COPIES: Final = 10
ONE_DAY_PARTITIONED: Final = (
    "SELECT count(*), sum(funding_amount) FROM funding_history "
    "WHERE funding_date = DATE '2024-01-31'"
)
ONE_DAY_UNPARTITIONED: Final = (
    "SELECT count(*), sum(funding_amount) FROM read_parquet(?) "
    "WHERE funding_date = DATE '2024-01-31'"
)


def run() -> list[Figure]:
    records = _funding_records(RECORDS)
    amounts = [str(r["fundingAmount"]) for r in records]
    figures = [_decimals(amounts)]
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        batch, normalize_figure = _normalize(records)
        figures.append(normalize_figure)
        figures.append(_write(root, batch))
        figures.append(_pruned_query(root, batch))
    return figures


def _funding_records(count: int) -> list[dict[str, object]]:
    """Funding entries over `DAYS` days, 100 markets, amounts with 18-digit fractions."""
    per_day = count // DAYS
    return [
        {
            "market": f"M{i % 100}_PERP",
            "fundingTime": str(DAY_START + (i // per_day) * 86_400 + (i % per_day) // 100),
            "fundingRate": f"0.{i % 9973:06d}",
            "fundingAmount": f"-{i % 100_003}.{i * 7919 % 10**18:018d}",
            "positionAmount": f"{i % 977}.5",
            "settlementPrice": f"{40_000 + i % 5000}.25",
            "rateCalculatedTime": str(DAY_START + (i // per_day) * 86_400),
        }
        for i in range(count)
    ]


def _seconds(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _decimals(amounts: list[str]) -> Figure:
    ours = _seconds(lambda: normalize.parse_decimals(amounts))
    sample = pd.Series(amounts[:BASELINE_VALUES], dtype=pd.ArrowDtype(pa.string()))
    baseline = _seconds(lambda: sample.map(Decimal))
    return Figure(
        SECTION,
        "decimal strings -> DECIMAL(38,18), exact",
        len(amounts) / ours,
        "values/s",
        baseline=BASELINE_VALUES / baseline,
        baseline_name="pandas Series.map(decimal.Decimal), row by row",
    )


def _normalize(records: list[dict[str, object]]) -> tuple[normalize.Batch, Figure]:
    extracted_at = datetime(2024, 3, 2, tzinfo=UTC)
    started = time.perf_counter()
    batch = normalize.normalize_funding_history(
        records, extracted_at=extracted_at, partition_for_rejects=date(2024, 1, 1)
    )
    elapsed = time.perf_counter() - started
    assert batch.rejected == 0, batch.rejects["reason"][:3]
    figure = Figure(
        SECTION,
        "funding records normalized (7 fields: 4 decimals, 2 times, 1 text)",
        len(records) / elapsed,
        "records/s",
        note=f"{len(records):,} records in {elapsed:.2f} s",
    )
    return batch, figure


def _write(root: Path, batch: normalize.Batch) -> Figure:
    elapsed = _seconds(lambda: parquet.write_batch(root, batch))
    return Figure(
        SECTION,
        f"Parquet partition writes ({DAYS} partitions, zstd, atomic)",
        batch.normalized / elapsed,
        "rows/s",
        note=f"{batch.normalized:,} rows in {elapsed:.2f} s",
    )


def _pruned_query(root: Path, batch: normalize.Batch) -> Figure:
    """Years of history: the normalized days repeated `HISTORY_COPIES` times, each copy later."""
    history = pa.concat_tables(
        _shifted(batch.rows, copy * (DAYS + 1)) for copy in range(HISTORY_COPIES)
    )
    history_root = root / "history"
    parquet.write_partitions(history_root, "funding_history", history)
    single = root / "unpartitioned.parquet"
    pq.write_table(history, single, compression="zstd")
    catalog.refresh(history_root)
    root = history_root
    with catalog.connect(root) as con:
        expected = con.execute(ONE_DAY_PARTITIONED).fetchall()
        assert con.execute(ONE_DAY_UNPARTITIONED, [str(single)]).fetchall() == expected
        ours = _median_seconds(con, ONE_DAY_PARTITIONED)
        baseline = _median_seconds(con, ONE_DAY_UNPARTITIONED, [str(single)])
    return Figure(
        SECTION,
        f"one-day query over {history.num_rows:,} rows: pruned view vs one unpartitioned file",
        1 / ours,
        "queries/s",
        baseline=1 / baseline,
        baseline_name="same query over one Parquet file",
        note=f"median of {REPEATS}: {ours * 1000:.1f} ms vs {baseline * 1000:.1f} ms",
    )


def _shifted(rows: pa.Table, days: int) -> pa.Table:
    shift = pa.scalar(timedelta(days=days), pa.duration("us"))
    for name in ("funding_time", "rate_calculated_time"):
        index = rows.schema.get_field_index(name)
        rows = rows.set_column(index, name, pc.add(rows[name], shift))
    index = rows.schema.get_field_index("funding_date")
    return rows.set_column(index, "funding_date", pc.cast(rows["funding_time"], pa.date32()))


def _median_seconds(
    con: duckdb.DuckDBPyConnection, query: str, parameters: list[object] | None = None
) -> float:
    runs = [_seconds(lambda: con.execute(query, parameters).fetchall()) for _ in range(REPEATS)]
    return statistics.median(runs)
