"""Child processes for the tests that need a second, real process.

``python -m tests.warehouse.children write-large ROOT DAY ROWS``: replace one funding_history
partition with a large table (the kill test SIGKILLs it mid-write).
``python -m tests.warehouse.children analyst ROOT``: hold one read-only catalog connection
open; run each SQL line read from stdin and answer one JSON line (rows, or the error).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, date, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tests.support.records import ACCOUNT
from warehouse import Warehouse, catalog, partitions, schemas


def large_funding_table(day: date, rows: int, seed: int = 0) -> pa.Table:
    """A valid funding_history partition: 1,000 markets, one payment per second each."""
    markets = pa.array([f"M{i}_PERP" for i in range(1000)])
    index = np.arange(rows, dtype=np.int64)
    day_start_us = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) * 10**6
    times = pa.array(day_start_us + (index // 1000) * 10**6).cast(schemas.UTC_TIME)
    amounts = np.random.default_rng(seed).integers(-(10**15), 10**15, rows)
    money = pc.cast(pa.array(amounts), schemas.MONEY)
    extracted = datetime(day.year, day.month, day.day, 23, tzinfo=UTC)
    return pa.table(
        {
            "market": pc.take(markets, pa.array(index % 1000)),
            "funding_time": times,
            "position_side": pa.repeat(pa.scalar(schemas.LONG), rows),
            "funding_rate": money,
            "funding_amount": money,
            "position_amount": pc.abs(money),
            "settlement_price": money,
            "rate_calculated_time": times,
            "funding_date": pa.repeat(pa.scalar(day, schemas.DAY), rows),
            "extracted_at": pa.repeat(pa.scalar(extracted, schemas.UTC_TIME), rows),
        },
        schema=schemas.TABLES["funding_history"].arrow_schema,
    )


def write_large(root: str, day: str, rows: str) -> None:
    table = large_funding_table(date.fromisoformat(day), int(rows), seed=1)
    partitions.replace_partition(
        Warehouse.open(root), "funding_history", (ACCOUNT, date.fromisoformat(day)), table
    )


def analyst(root: str) -> None:
    with catalog.connect(Warehouse.open(root)) as con:
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            query = line.strip()
            if query == "exit":
                return
            try:
                rows = con.execute(query).fetchall()
                print(json.dumps({"rows": rows}, default=str), flush=True)
            except Exception as error:  # the parent asserts on whatever went wrong
                print(json.dumps({"error": str(error)}), flush=True)


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    {"write-large": write_large, "analyst": analyst}[command](*arguments)
