"""The warehouse contract: one schema per table, each made from its history's declaration.

Each `TableSchema` names its columns (Arrow type, nullability, a one-line description), its Hive
partition columns (or the month of one, for a table whose days are small) and its key, as the
history's declaration in `pipeline.spec` says them (`table_schema`); ``_rejects`` is the
warehouse's own.
Normalization builds tables in this shape, the Parquet layer checks them against it, the DuckDB
catalog derives its views and column comments from it, and `whitebit-etl tables` prints it as
the data dictionary.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Final

import pyarrow as pa

from pipeline import spec

#: Money and rates: 20 integer digits and 18 fraction digits, exactly.
MONEY: Final = pa.decimal128(38, 18)
#: Every instant, in UTC, to the microsecond.
UTC_TIME: Final = pa.timestamp("us", tz="UTC")
#: Partition days.
DAY: Final = pa.date32()
TEXT: Final = pa.string()
TEXT_LIST: Final = pa.list_(pa.string())

#: ``position_side`` of a funding payment, derived from the sign of ``position_amount``.
LONG: Final = "long"
SHORT: Final = "short"

REJECTS: Final = "_rejects"

#: The column every table has first: whose rows these are. It is a path segment of every partition
#: (``account=main/``), never stored inside a file, and a name of `accounts.yaml` (the
#: application's): letters, digits and ``_``, starting with a letter.
ACCOUNT: Final = "account"
ACCOUNT_NAME: Final = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
#: The name the exchange's own rows (`spec.EXCHANGE_HISTORIES`: its prices) are kept under in
#: place of an account's, one for the whole warehouse: no account of the accounts file takes it.
EXCHANGE: Final = "exchange"


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its name, Arrow type, whether it may be null, and what it means."""

    name: str
    type: pa.DataType
    nullable: bool
    description: str

    @property
    def arrow_field(self) -> pa.Field:
        return pa.field(self.name, self.type, nullable=self.nullable)


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A warehouse table: columns in order, Hive partition columns, and the key of one row.

    Every table is also partitioned by `ACCOUNT`, first, in its path: ``columns``,
    ``partition_columns`` and ``key`` are those of one account's rows, `view_columns` and
    `path_columns` those of the table across accounts.
    """

    name: str
    description: str
    columns: tuple[Column, ...]
    partition_columns: tuple[str, ...]
    #: Columns that identify a row; unique within the table. Empty for ``_rejects``.
    key: tuple[str, ...]
    #: Set for a table whose days are too small to be files of their own: a file then holds a
    #: calendar month of the (one, DAY) partition column, which stays in the file, and the path
    #: names the month under this name (``funding_month=2025-03``).
    month_path: str | None = None
    #: The declaration the table is made from (none for ``_rejects``).
    history: spec.History | None = field(default=None, repr=False, compare=False)
    columns_by_name: Mapping[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {c.name: c for c in self.columns}
        if len(by_name) != len(self.columns):
            raise ValueError(f"table {self.name}: a column name appears twice")
        missing = [c for c in (*self.partition_columns, *self.key) if c not in by_name]
        if missing:
            raise ValueError(f"table {self.name}: partition or key names unknown columns {missing}")
        if ACCOUNT in by_name:
            raise ValueError(f"table {self.name}: {ACCOUNT!r} is the path's, not a column's name")
        if self.month_path and (
            len(self.partition_columns) != 1 or by_name[self.partition_columns[0]].type != DAY
        ):
            raise ValueError(f"table {self.name}: a month partition needs one DAY partition column")
        object.__setattr__(self, "columns_by_name", by_name)

    @property
    def partition_column(self) -> str:
        """The partition column of a table partitioned by exactly one column."""
        if len(self.partition_columns) != 1:
            columns = list(self.partition_columns)
            raise ValueError(f"table {self.name} is partitioned by {columns}, not by one column")
        return self.partition_columns[0]

    @property
    def path_columns(self) -> tuple[str, ...]:
        """The names a partition's path holds: the account, then ``month_path``, else the
        partition columns."""
        return (ACCOUNT, *((self.month_path,) if self.month_path else self.partition_columns))

    @property
    def view_columns(self) -> tuple[Column, ...]:
        """The columns of the table's view: the account, then the rows' own."""
        return (ACCOUNT_COLUMN, *self.columns)

    @property
    def arrow_schema(self) -> pa.Schema:
        """All columns, partition columns included, as normalization produces them."""
        return pa.schema([c.arrow_field for c in self.columns])

    @property
    def file_schema(self) -> pa.Schema:
        """The columns stored inside a Parquet file: a partition value in the path is not."""
        return pa.schema([c.arrow_field for c in self.columns if c.name not in self.path_columns])

    def column(self, name: str) -> Column:
        return self.columns_by_name[name]


ACCOUNT_COLUMN: Final = Column(
    ACCOUNT, TEXT, False, "Account the row belongs to: its name in the accounts file (partition)"
)


#: When a snapshot was seen, beside its ``observed_at``: a snapshot shows the account at an
#: instant after ``observed_from`` and before ``observed_until`` + 1 s, by the exchange's clock.
SEEN_COLUMNS: Final = (
    "observed_from",
    "observed_until",
    "asked_at",
    "answered_at",
    "consistent",
)


def _when_seen() -> tuple[Column, ...]:
    return (
        Column(
            "observed_from",
            UTC_TIME,
            True,
            "The exchange's time known to have passed before the snapshot was asked for (the "
            "Date of the answer before it, to the second): it shows the account after it",
        ),
        Column(
            "observed_until",
            UTC_TIME,
            True,
            "The exchange's time of the snapshot's last answer (its Date, to the second): it "
            "shows the account before the end of that second",
        ),
        Column("asked_at", UTC_TIME, True, "This machine's time when this table was asked for"),
        Column(
            "answered_at", UTC_TIME, True, "This machine's time when this table's last answer came"
        ),
        Column(
            "consistent",
            pa.bool_(),
            True,
            "Asked together with the other balances, twice, and the two collects agreed: all "
            "show one instant; false: they never agreed, the last was kept; null: asked once",
        ),
    )


def _extracted_at() -> Column:
    return Column("extracted_at", UTC_TIME, False, "When the run that wrote this row fetched it")


#: The Arrow type of each JSON type a column's value arrives as.
_ARROW: Final[Mapping[spec.FieldType, pa.DataType]] = {
    spec.FieldType.STRING: TEXT,
    spec.FieldType.DECIMAL: MONEY,
    spec.FieldType.INTEGER: pa.int64(),
    spec.FieldType.TIMESTAMP: UTC_TIME,
    spec.FieldType.TIMESTAMP_STRING: UTC_TIME,
    spec.FieldType.TIMESTAMP_FRACTIONAL: UTC_TIME,
    spec.FieldType.BOOLEAN: pa.bool_(),
    spec.FieldType.STRING_LIST: TEXT_LIST,
    # Kept whole, as the JSON text received (a conversion's path).
    spec.FieldType.OBJECT_LIST: TEXT,
}


def arrow_type(history: spec.History, column: spec.Column) -> pa.DataType:
    """The type a declared column has in its table."""
    if column.day_of is not None:
        return DAY
    if column.sign_of is not None or column.source == spec.OWNER:
        return TEXT
    return _ARROW[history.field_of(column).type]


def _labels(column: spec.Column) -> str:
    if column.labels is not None:
        return ", ".join(column.labels.values())
    assert column.labels_by is not None  # labelled: one or the other
    by, tables = column.labels_by
    return "; ".join(
        f"{by} {value}: " + ", ".join(dict.fromkeys(labels.values()))
        for value, labels in tables.items()
    )


def _columns(history: spec.History) -> tuple[Column, ...]:
    columns = []
    for declared in history.columns:
        kind = arrow_type(history, declared)
        columns.append(Column(declared.name, kind, declared.nullable, declared.description))
        if declared.labelled:
            kept = declared.unlisted == "keep"
            columns.append(
                Column(
                    f"{declared.name}_label",
                    TEXT,
                    kept,
                    f"Label of {declared.name}: {_labels(declared)}"
                    + ("; null for a value the API's documentation does not list" if kept else ""),
                )
            )
    if not history.monthly:
        columns.append(Column("snapshot_date", DAY, False, "UTC day of the snapshot (partition)"))
        columns.append(
            Column(
                "observed_at",
                UTC_TIME,
                True,
                "The exchange's time when it answered (its Date, to the second): the instant "
                "the snapshot shows; null where the answer did not say",
            )
        )
        columns.extend(_when_seen())
    return (*columns, _extracted_at())


def table_schema(history: spec.History) -> TableSchema:
    """A history's table: its declared columns (a status with its label beside it), the snapshot
    day of a snapshot, when each row was extracted; its key and partitioning."""
    partition = history.partition
    if isinstance(partition, spec.Monthly):
        return TableSchema(
            name=history.name,
            description=history.description,
            columns=_columns(history),
            partition_columns=(partition.day,),
            key=history.key,
            month_path=partition.month_path,
            history=history,
        )
    return TableSchema(
        name=history.name,
        description=history.description,
        columns=_columns(history),
        partition_columns=("snapshot_date",),
        key=("snapshot_date", *history.key),
        history=history,
    )


REJECTS_TABLE: Final = TableSchema(
    name=REJECTS,
    description="One row per raw record that failed normalization, with the reason",
    columns=(
        Column("table", TEXT, False, "Table the record was meant for (partition)"),
        Column(
            "partition", TEXT, False, "UTC day of that table the record was meant for (partition)"
        ),
        Column("record_index", pa.int64(), False, "Position of the record in its input batch"),
        Column(
            "raw_json",
            TEXT,
            False,
            "The record as received, as JSON text: every value exact",
        ),
        Column("reason", TEXT, False, "Why it was rejected: field and rule, '; '-separated"),
        _extracted_at(),
    ),
    partition_columns=("table", "partition"),
    key=(),
)


def month_of(day: date) -> str:
    """The month holding ``day``, as a month path names it: ``2025-03``."""
    return f"{day.year:04d}-{day.month:02d}"


def month_days(month: str) -> tuple[date, date]:
    """The first day of a month (``2025-03``) and the first day of the next."""
    first = date.fromisoformat(f"{month}-01")
    following = date(first.year + first.month // 12, first.month % 12 + 1, 1)
    return first, following


#: Every table: one per declared history (the accounts', then the exchange's), then ``_rejects``.
TABLES: Final[Mapping[str, TableSchema]] = {
    **{name: table_schema(history) for name, history in spec.DECLARED.items()},
    REJECTS: REJECTS_TABLE,
}
#: The tables of the declared histories, each with its declaration.
DATA_TABLES: Final = tuple(t for t in TABLES.values() if t.history is not None)
#: The tables of the accounts' histories: the exchange's (`EXCHANGE`) are no account's.
ACCOUNT_TABLES: Final = tuple(t for t in DATA_TABLES if t.name in spec.HISTORIES)
