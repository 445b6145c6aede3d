"""The warehouse section of `make bench`: exact decimals, Parquet writes, the layout's queries.

Side by side in one run: our vectorized decimal parsing against a row-by-row
``decimal.Decimal`` conversion in pandas of the same strings; funding normalization end to end;
Parquet partition writes. `layout` measures a warehouse the backfill section filled: its file
count, and a one-day query and a whole-history aggregate through the view against the same
queries over one unpartitioned Parquet file of the same rows.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Final

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench import Figure
from pipeline import spec
from warehouse import Warehouse, catalog, normalize, partitions

#: The account the figures' rows are written as.
ACCOUNT: Final = "default"

SECTION: Final = "warehouse"
RECORDS: Final = 1_000_000
#: The row-by-row baseline is slow; it converts this many strings and is reported per second.
BASELINE_VALUES: Final = 200_000
DAYS: Final = 60
DAY_START: Final = 1_704_067_200  # 2024-01-01T00:00:00Z
REPEATS: Final = 7
#: The queries of the layout figures; ``{source}`` is the view, or one file.
ONE_DAY: Final = (
    "SELECT count(*), sum(funding_amount) FROM {source} WHERE funding_date = DATE '{day}'"
)
BY_MARKET: Final = (
    "SELECT market, count(*), sum(funding_amount) FROM {source} GROUP BY market ORDER BY market"
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
    batch = normalize.normalize(
        spec.FUNDING, records, extracted_at=extracted_at, day=date(2024, 1, 1)
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
    wh = Warehouse.open(root)
    elapsed = _seconds(lambda: partitions.write_batch(wh, batch, account=ACCOUNT))
    return Figure(
        SECTION,
        f"Parquet writes of {DAYS} days (a file per month, zstd, atomic)",
        batch.normalized / elapsed,
        "rows/s",
        note=f"{batch.normalized:,} rows in {elapsed:.2f} s",
    )


def layout(root: Path) -> list[Figure]:
    """The funding history of a warehouse: its files, and two queries through its view against
    the same over one file of its rows (zstd, sorted by day, pyarrow's defaults otherwise)."""
    wh = Warehouse.open(root)
    files = partitions.partition_files(wh.store, "funding_history")
    single = root.parent / f"{root.name}-one-file.parquet"
    with catalog.connect(wh) as con:
        rows = con.sql("SELECT * FROM funding_history ORDER BY funding_date").to_arrow_table()
        pq.write_table(rows, single, compression="zstd")
        days = con.execute("SELECT count(DISTINCT funding_date) FROM funding_history").fetchone()
        middle = con.execute(  # the median day
            "SELECT funding_date FROM funding_history ORDER BY funding_date LIMIT 1 OFFSET ?",
            [rows.num_rows // 2],
        ).fetchone()
        assert days is not None
        assert middle is not None
        view, one_file = "funding_history", f"read_parquet('{single}')"
        figures = [
            Figure(
                SECTION,
                f"funding history of {rows.num_rows:,} rows, {days[0]:,} days: Parquet files",
                len(files),
                "files",
                days[0],
                "a file per day",
                "lower is better: a file per month",
            )
        ]
        for label, query in (
            (f"one-day query ({middle[0]})", ONE_DAY.format(source="{source}", day=middle[0])),
            ("whole-history sum of funding by market", BY_MARKET),
        ):
            ours, expected = timed_query(con, query.format(source=view))
            baseline, found = timed_query(con, query.format(source=one_file))
            assert found == expected, label
            figures.append(
                Figure(
                    SECTION,
                    f"{label} through the view",
                    1 / ours,
                    "queries/s",
                    1 / baseline,
                    "the same over one unpartitioned file",
                    f"median of {REPEATS}: {ours * 1000:.1f} ms vs {baseline * 1000:.1f} ms",
                )
            )
    single.unlink()
    return figures


def timed_query(con: duckdb.DuckDBPyConnection, query: str) -> tuple[float, list[object]]:
    """The median seconds of a query, and its answer."""
    answer = con.execute(query).fetchall()
    return _median_seconds(con, query), list(answer)


def _median_seconds(
    con: duckdb.DuckDBPyConnection, query: str, parameters: list[object] | None = None
) -> float:
    runs = [_seconds(lambda: con.execute(query, parameters).fetchall()) for _ in range(REPEATS)]
    return statistics.median(runs)
