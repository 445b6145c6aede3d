"""Where each partition's file is, relative to the warehouse's root, and the checks that make a
partition value a safe path segment.

Layout: ``parquet/<table>/account=<name>/<column>=<value>/data.parquet`` (``_rejects`` nests two
levels under the account, ``table=<t>/partition=<p>``). Partition values live in the path, not
in the file, except for a table partitioned by month (`TableSchema.month_path`):
``funding_history/account=main/funding_month=2025-03/`` holds the month's rows with their
``funding_date`` column, and its rejects stay a partition per day
(``_rejects/account=main/table=funding_history/partition=2025-03-14``). A partition is always
named with its account first: ``("main", "2025-03")``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, datetime
from typing import Final

from warehouse import schemas
from warehouse.errors import WarehouseError
from warehouse.schemas import REJECTS, TableSchema

PARQUET_DIR: Final = "parquet"
#: The one file of a partition; a stable name, so a swap is a single rename.
PARTITION_FILE: Final = "data.parquet"
#: A partition value that may become a path segment: no separators, no leading dot, no "..".
PATH_SEGMENT: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*$")
PATH_SEGMENT_MAX: Final = 128
MONTH: Final = re.compile(r"^[0-9]{4}-(0[1-9]|1[0-2])$")

PartitionValue = date | str
#: A partition: its account, then its value(s) (``("main", date(2025, 3, 14))``).
Partition = Sequence[PartitionValue]


class InvalidPartitionValue(WarehouseError):
    """A partition value that would not make a safe, canonical path segment."""


def table(table_name: str) -> TableSchema:
    try:
        return schemas.TABLES[table_name]
    except KeyError:
        raise ValueError(
            f"unknown table {table_name!r}; tables: {', '.join(schemas.TABLES)}"
        ) from None


def table_dir(table_name: str) -> str:
    """``parquet/<table>``: the directory the table's views read."""
    return f"{PARQUET_DIR}/{table(table_name).name}"


def account_dir(table_name: str, account: str) -> str:
    return f"{table_dir(table_name)}/{schemas.ACCOUNT}={account_segment(account)}"


def partition_file(table_name: str, partition: Partition) -> str:
    """The file holding one partition of a table, relative to the root."""
    schema = table(table_name)
    return relative_path(schema, partition_text(schema, partition))


def relative_path(schema: TableSchema, values: tuple[str, ...]) -> str:
    segments = [f"{c}={v}" for c, v in zip(schema.path_columns, values, strict=True)]
    return "/".join((f"{PARQUET_DIR}/{schema.name}", *segments, PARTITION_FILE))


def partition_text(schema: TableSchema, partition: Partition) -> tuple[str, ...]:
    """Partition values as validated path text, one per path column."""
    values = (partition,) if isinstance(partition, date | str) else tuple(partition)
    if len(values) != len(schema.path_columns):
        raise InvalidPartitionValue(
            f"{schema.name} is partitioned by {list(schema.path_columns)}; got {partition!r}"
        )
    account = account_segment(values[0], where=f"{schema.name}.{schemas.ACCOUNT}")
    if schema.month_path:
        return (account, _month(schema, values[1]))
    return (
        account,
        *(
            _segment(schema, schema.column(name), value)
            for name, value in zip(schema.partition_columns, values[1:], strict=True)
        ),
    )


def account_segment(value: object, *, where: str = schemas.ACCOUNT) -> str:
    """An account's name, checked to be one (`schemas.ACCOUNT_NAME`): it becomes a path."""
    if not isinstance(value, str) or not schemas.ACCOUNT_NAME.match(value):
        raise InvalidPartitionValue(
            f"{where}: {value!r} is not an account name (lower-case letters, digits and '_', "
            "starting with a letter, at most 40)"
        )
    return value


def _segment(schema: TableSchema, column: schemas.Column, value: PartitionValue) -> str:
    where = f"{schema.name}.{column.name}"
    if column.type == schemas.DAY:
        if isinstance(value, datetime) or not isinstance(value, date):
            raise InvalidPartitionValue(f"{where}: expected a date, got {value!r}")
        return value.isoformat()
    if not isinstance(value, str) or len(value) > PATH_SEGMENT_MAX or not PATH_SEGMENT.match(value):
        raise InvalidPartitionValue(
            f"{where}: {value!r} is not a safe path segment (letters, digits, '_', '-', inner '.')"
        )
    if (
        schema.name == REJECTS
        and column.name == "table"
        and (value not in schemas.TABLES or value == REJECTS)
    ):
        raise InvalidPartitionValue(f"{where}: {value!r} is not a data table")
    return value


def _month(schema: TableSchema, value: PartitionValue) -> str:
    """A month partition's text (``2025-03``), from the month or from any day of it."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return schemas.month_of(value)
    if isinstance(value, str) and MONTH.match(value):
        return value
    raise InvalidPartitionValue(
        f"{schema.name}.{schema.month_path}: expected a month like 2025-03 or a day, got {value!r}"
    )
